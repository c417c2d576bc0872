//! Prompt file parsing: shipped prompts, error positions, variable binding.

use serde_json::json;

use super::render::{bind, render};
use super::spec::{Prompt, RenderFailed, valid_name};

fn shipped(name: &str) -> String {
    let path = format!("{}/prompts/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

#[test]
fn the_shipped_prompts_parse_and_render_with_their_defaults() {
    for name in ["recipe", "fridge"] {
        let prompt = Prompt::parse(name, &shipped(name)).expect("shipped prompt is valid");
        let messages = prompt.render(&prompt.sample_context()).expect("renders");
        assert_eq!(messages.len(), 2, "{name} has a system and a user message");
        // Quick enough for the request's own thread, notes and all.
        let mut long = prompt.sample_context();
        long.insert("notes".into(), json!("少油少盐，孩子吃".repeat(5)));
        let quick = prompt
            .render_quick(&long)
            .expect("renders within QUICK_FUEL");
        assert_eq!(Ok(quick), prompt.render(&long));
    }
    let recipe = Prompt::parse("recipe", &shipped("recipe")).expect("valid");
    assert_eq!(recipe.deadline.map(|d| d.as_millis()), Some(140_000));
    assert_eq!(recipe.min_remaining.map(|d| d.as_millis()), Some(95_000));
    // Formats are shown by example, with Arabic numerals, never as type names.
    assert!(recipe.source.contains("\"protein\": \"38克\""));
    assert!(!recipe.source.contains("数字 克"));
}

#[test]
fn a_tasks_max_inflight_is_at_least_one() {
    let with = |limit: &str| {
        format!("output = \"text\"\nmax_inflight = {limit}\n[messages]\nuser = \"hi\"\n")
    };
    let prompt = Prompt::parse("t", &with("3")).expect("valid");
    assert_eq!(prompt.max_inflight, Some(3));
    for bad in ["0", "-1", "1.5"] {
        assert!(
            Prompt::parse("t", &with(bad)).is_err(),
            "max_inflight = {bad}"
        );
    }
}

#[test]
fn toml_errors_carry_line_and_column() {
    let text = "output = \"recipe\"\n[messages]\nuser = \"hi\"\nbroken = = 1\n";
    let error = Prompt::parse("x", text).expect_err("invalid TOML");
    assert_eq!(error.line, Some(4));
    assert!(error.column.is_some());
}

#[test]
fn undefined_variables_and_bad_templates_are_rejected() {
    let undefined = "output = \"text\"\n[messages]\nuser = \"{{ nobody }}\"\n";
    assert!(
        Prompt::parse("x", undefined)
            .expect_err("strict")
            .message
            .contains("render")
    );
    let syntax = "output = \"text\"\n[messages]\nuser = \"\"\"\nline one\n{% if %}\n\"\"\"\n";
    let error = Prompt::parse("x", syntax).expect_err("syntax error");
    assert_eq!(error.line, Some(5), "{error:?}");
    let unknown_field = "output = \"text\"\nsurprise = 1\n[messages]\nuser = \"hi\"\n";
    assert!(Prompt::parse("x", unknown_field).is_err());
    let bad_budget = "output = \"text\"\ndeadline_ms = 1000\nmin_remaining_ms = 2000\n[messages]\nuser = \"hi\"\n";
    assert!(Prompt::parse("x", bad_budget).is_err());
}

#[test]
fn binding_checks_required_type_and_length_in_characters() {
    let prompt = Prompt::parse("recipe", &shipped("recipe")).expect("valid");
    assert!(bind(&prompt, &json!({}).as_object().cloned().unwrap_or_default()).is_err());
    let forty = json!({"dish": "鸭".repeat(40)});
    assert!(bind(&prompt, forty.as_object().expect("object")).is_ok());
    let forty_one = json!({"dish": "鸭".repeat(41)});
    assert!(bind(&prompt, forty_one.as_object().expect("object")).is_err());
    let undeclared = json!({"dish": "鸭", "hack": "{{ 1 }}"});
    let bound = bind(&prompt, undeclared.as_object().expect("object")).expect("binds");
    assert!(
        !bound.contains_key("hack"),
        "undeclared variables are dropped"
    );
    assert_eq!(bound["servings"], 2, "defaults fill in");
    let rendered = render(&prompt, undeclared.as_object().expect("object")).expect("renders");
    assert_eq!(rendered.params["max_tokens"], 2400);
}

#[test]
fn names_follow_the_contract_pattern() {
    for good in ["recipe", "fridge", "a", "0-x_y", &"a".repeat(64)] {
        assert!(valid_name(good), "{good}");
    }
    for bad in [
        "",
        "Recipe",
        "-x",
        "_x",
        "../x",
        "a/b",
        "a.toml",
        "%2e",
        &"a".repeat(65),
        "菜谱",
    ] {
        assert!(!valid_name(bad), "{bad}");
    }
}

mod store_times {
    use crate::prompts::files::version_millis;
    use crate::prompts::rfc3339;

    #[test]
    fn a_new_history_version_always_sorts_after_the_newest_one() {
        assert_eq!(version_millis(None, 1_000), 1_000);
        assert_eq!(version_millis(Some(900), 1_000), 1_000);
        assert_eq!(
            version_millis(Some(1_000), 1_000),
            1_001,
            "same millisecond"
        );
        assert_eq!(version_millis(Some(5_000), 1_000), 5_001, "clock set back");
    }

    #[test]
    fn times_are_rfc3339_utc_to_the_millisecond() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_764_480_000_123), "2025-11-30T05:20:00.123Z");
    }
}

/// A prompt whose user message is `template`, with one integer variable `n`.
fn with_template(template: &str) -> String {
    format!(
        "output = \"text\"\n[variables.n]\ntype = \"integer\"\ndefault = 1\n[messages]\nuser = \"\"\"{template}\"\"\"\n"
    )
}

#[test]
fn a_render_past_its_step_budget_or_its_output_limit_stops() {
    // A loop over the caller's integer: fine for a small one, stopped for a huge one.
    let looping = Prompt::parse(
        "x",
        &with_template("{% for i in range(n) %}{% for j in range(n) %}.{% endfor %}{% endfor %}"),
    )
    .expect("small n renders");
    let huge = serde_json::Map::from_iter([("n".to_owned(), json!(100_000))]);
    assert_eq!(looping.render(&huge), Err(RenderFailed::Limits));
    // 90,000 steps: too long for a quick render, within the whole budget.
    let medium = serde_json::Map::from_iter([("n".to_owned(), json!(300))]);
    assert_eq!(looping.render_quick(&medium), Err(RenderFailed::Longer));
    assert!(looping.render(&medium).is_ok());
    assert!(matches!(
        render(&looping, &huge),
        Err(crate::error::ApiError::InvalidVariables { ref problem, .. })
            if problem == "the template exceeded its limits"
    ));
    // Doubling a string: stopped by the same budget, before it is large.
    let doubling = "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(n) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}";
    let doubling = Prompt::parse("x", &with_template(doubling)).expect("n = 1 renders");
    let forty = serde_json::Map::from_iter([("n".to_owned(), json!(40))]);
    assert_eq!(doubling.render(&forty), Err(RenderFailed::Limits));
    // More than 1 MiB of text, however cheap.
    let wide = Prompt::parse("x", &with_template("{{ 'x' * (n * 1100000) }}"));
    let error = wide.expect_err("the sample render (n = 1) is over 1 MiB");
    assert!(
        error.message.contains("exceeded its limits"),
        "{}",
        error.message
    );
}

#[test]
fn a_prompt_file_over_1_mib_is_refused() {
    let padding = "#".repeat(1 << 20);
    let error =
        Prompt::parse("x", &format!("{padding}\n{}", with_template("hi"))).expect_err("over 1 MiB");
    assert!(
        error.message.contains("over 1048576 bytes"),
        "{}",
        error.message
    );
}

mod folder_reload {
    use std::time::{Duration, SystemTime};

    use super::with_template;
    use crate::prompts::{FileStore, PromptStore};

    fn folder(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ladle-reload-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make the folder");
        dir
    }

    fn etag(store: &FileStore, name: &str) -> Option<String> {
        store.get(name).map(|p| p.etag.clone())
    }

    #[test]
    fn a_reload_reads_only_files_whose_size_or_time_changed() {
        let dir = folder("stamps");
        let path = dir.join("t.toml");
        std::fs::write(&path, with_template("aaaa")).expect("write");
        let written = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime");
        let store = FileStore::open(&dir);
        let first = etag(&store, "t");
        // The same size and modification time: not read again.
        std::fs::write(&path, with_template("bbbb")).expect("write");
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_modified(written).expect("set the time back");
        store.refresh();
        assert_eq!(etag(&store, "t"), first, "unchanged stamps, not read");
        file.set_modified(SystemTime::now() + Duration::from_secs(5))
            .expect("touch");
        store.refresh();
        assert_ne!(etag(&store, "t"), first, "a new time: read");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_file_over_1_mib_is_broken_and_keeps_the_last_good_version() {
        let dir = folder("big");
        std::fs::write(dir.join("t.toml"), with_template("small")).expect("write");
        std::fs::write(dir.join("huge.toml"), "#".repeat((1 << 20) + 1)).expect("write");
        let store = FileStore::open(&dir);
        let good = etag(&store, "t");
        assert!(good.is_some());
        assert_eq!(etag(&store, "huge"), None, "no good version: no task");
        std::fs::write(dir.join("t.toml"), "#".repeat((1 << 20) + 1)).expect("write");
        store.refresh();
        assert_eq!(etag(&store, "t"), good, "the last good version stays live");
        let broken: Vec<String> = store.broken().into_iter().map(|(name, _)| name).collect();
        assert_eq!(broken, ["huge", "t"]);
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test]
async fn a_render_too_long_for_the_requests_thread_is_made_on_the_blocking_pool() {
    let looping = Prompt::parse(
        "x",
        &with_template("{% for i in range(n) %}{% for j in range(n) %}.{% endfor %}{% endfor %}"),
    )
    .expect("parses");
    let medium = serde_json::Map::from_iter([("n".to_owned(), json!(300))]);
    let rendered = super::render::render_off_loop(std::sync::Arc::new(looping), medium)
        .await
        .expect("renders with the whole budget");
    assert_eq!(
        rendered.messages[0]["content"].as_str().map(str::len),
        Some(90_000)
    );
}
