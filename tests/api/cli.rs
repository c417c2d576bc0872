//! The `ladle` binary itself: `check`, configuration errors, and `demo`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use ladle::demo::{self, DemoOptions};
use ladle::engine::upstream::continuation::Continuation;
use serde_json::json;

use crate::support::process::ladle_command;
use crate::support::raw::blocking_get;
use crate::support::*;

/// Runs `ladle check` on the prompts in `dir`; its output, and its stdout as text.
fn check_on(dir: &std::path::Path) -> (std::process::Output, String) {
    let output = ladle_command()
        .arg("check")
        .env("LADLE_PROMPTS_DIR", dir)
        .output()
        .expect("run ladle check");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output, stdout)
}

#[test]
fn check_passes_on_the_shipped_prompts() {
    let dir = prompts_copy();
    let (output, stdout) = check_on(&dir);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("recipe") && stdout.contains("fridge") && stdout.contains("0 problem"));
}

#[test]
fn check_fails_and_names_a_broken_prompt() {
    let dir = prompts_copy();
    std::fs::write(
        dir.join("broken.toml"),
        "output = \"recipe\"\n[messages]\nuser = \"{{ x \"\n",
    )
    .expect("write");
    let (output, stdout) = check_on(&dir);
    assert!(!output.status.success());
    assert!(stdout.contains("BROKEN  broken"), "{stdout}");
}

#[test]
fn an_invalid_setting_stops_start_up_naming_the_key() {
    let output = ladle_command()
        .arg("serve")
        .env("LADLE_IDLE_TIMEOUT_MS", "soon")
        .env("LADLE_UPSTREAM_URL", "http://127.0.0.1:9")
        .output()
        .expect("run ladle");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("LADLE_IDLE_TIMEOUT_MS"));
    for command in ["serve", "check"] {
        let unknown_dialect = ladle_command()
            .arg(command)
            .env("LADLE_PROMPTS_DIR", prompts_copy())
            .env(
                "LADLE_UPSTREAMS",
                r#"[{"name": "a", "url": "http://127.0.0.1:9/v1", "continuation": "Prefix"}]"#,
            )
            .output()
            .expect("run ladle");
        assert!(!unknown_dialect.status.success(), "{command}");
        let said = String::from_utf8_lossy(&unknown_dialect.stderr);
        assert!(
            said.contains("LADLE_UPSTREAMS") && said.contains("`continuation`"),
            "{said}"
        );
    }
    let missing_url = ladle_command().arg("serve").output().expect("run ladle");
    assert!(!missing_url.status.success());
    assert!(String::from_utf8_lossy(&missing_url.stderr).contains("LADLE_UPSTREAM_URL"));
}

#[test]
fn check_builds_the_upstream_client_and_names_a_bad_ca_file_or_proxy() {
    let dir = prompts_copy();
    let empty = not_a_certificate();
    let cases: [(&str, &str, &str); 3] = [
        (
            "LADLE_UPSTREAM_CA_FILE",
            "/nonexistent/ca.pem",
            "cannot read",
        ),
        (
            "LADLE_UPSTREAM_CA_FILE",
            empty.to_str().expect("utf-8 path"),
            "no PEM certificate",
        ),
        (
            "LADLE_UPSTREAM_PROXY",
            "ftp://user:hunter2@proxy:21",
            "LADLE_UPSTREAM_PROXY",
        ),
    ];
    for (key, value, why) in cases {
        let output = ladle_command()
            .arg("check")
            .env("LADLE_PROMPTS_DIR", &dir)
            .env("LADLE_UPSTREAM_URL", "https://127.0.0.1:9/v1")
            .env(key, value)
            .output()
            .expect("run ladle check");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !output.status.success(),
            "{key}={value} passed check: {said}"
        );
        assert!(said.contains(key) && said.contains(why), "{said}");
        assert!(
            !said.contains("hunter2"),
            "the proxy password leaked: {said}"
        );
    }
}

#[test]
fn serve_stops_before_listening_when_the_ca_file_is_unusable() {
    let empty = not_a_certificate();
    for path in ["/nonexistent/ca.pem", empty.to_str().expect("utf-8 path")] {
        let output = ladle_command()
            .arg("serve")
            .env("LADLE_LISTEN", "127.0.0.1:0")
            .env("LADLE_UPSTREAM_URL", "https://127.0.0.1:9/v1")
            .env("LADLE_UPSTREAM_CA_FILE", path)
            .output()
            .expect("run ladle");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(stderr.contains("LADLE_UPSTREAM_CA_FILE"), "{stderr}");
        assert!(!stderr.contains("listening on"), "{stderr}");
    }
}

#[test]
fn demo_prints_curl_lines_for_its_bound_address_and_serves() {
    let mut child = ladle_command()
        .arg("demo")
        .env("LADLE_LISTEN", "127.0.0.1:0")
        .env("LADLE_PROMPTS_DIR", prompts_copy())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ladle demo");
    let stdout = child.stdout.take().expect("stdout");
    let printed: Vec<String> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .take_while(|line| !line.contains("/metrics"))
        .collect();
    let curl = printed
        .iter()
        .find(|line| line.starts_with("curl -s http://127.0.0.1:"))
        .expect("a curl line");
    let base = curl
        .split_whitespace()
        .nth(2)
        .expect("url")
        .split("/v1")
        .next()
        .expect("base")
        .to_owned();
    let health = blocking_get(base.trim_start_matches("http://"), "/healthz");
    // The recipe is asked twice, the same way: the second is the cache's hit.
    let recipes: Vec<&String> = printed
        .iter()
        .filter(|l| l.starts_with("curl -s ") && l.contains("/v1/tasks/recipe"))
        .collect();
    assert_eq!(recipes.len(), 2, "{printed:?}");
    assert_eq!(recipes[0], recipes[1]);
    // The job's two lines, pasted into a shell as they are printed.
    let submit = printed
        .iter()
        .position(|l| l.starts_with("JOB="))
        .expect("a job line");
    let job = Command::new("sh")
        .arg("-c")
        .arg(printed[submit..=submit + 1].join("\n"))
        .output()
        .expect("sh runs");
    // The watched recipe's three lines: dropped after 30 events, resumed after
    // the last id seen, on to the end.
    let watch = printed
        .iter()
        .position(|l| l.contains("ladle-events.txt; tail"))
        .expect("a watch line");
    let folder = temp_dir("demo-watch");
    let watched = Command::new("sh")
        .arg("-c")
        .arg(printed[watch..=watch + 2].join("\n"))
        .current_dir(&folder)
        .output()
        .expect("sh runs");
    let _ = child.kill();
    let _ = child.wait();
    let cut = std::fs::read_to_string(folder.join("ladle-events.txt")).expect("the cut stream");
    let last = cut
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back()
        .expect("an id");
    assert_eq!(
        cut.lines().filter(|l| l.starts_with("id: ")).count(),
        30,
        "{cut}"
    );
    // What the shell printed: the cut stream's last event (`tail -n 4`), then the
    // resumed stream.
    let printed_out = String::from_utf8_lossy(&watched.stdout);
    let resumed: String = printed_out.split_inclusive('\n').skip(4).collect();
    let (run, seq) = last.split_once('.').expect("{run}.{seq}");
    let next = format!("{run}.{}", seq.parse::<u32>().expect("a seq") + 1);
    assert!(resumed.contains(&format!("id: {next}\n")), "{resumed}");
    assert!(
        !resumed.contains(&format!("id: {last}\n")),
        "nothing seen is sent again"
    );
    let final_job = resumed.trim_end().lines().last().expect("the final event");
    assert!(final_job.contains(r#""status":"succeeded""#), "{final_job}");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.ends_with("ok"), "{health}");
    let job: serde_json::Value = serde_json::from_slice(&job.stdout).expect("the job as JSON");
    assert_eq!(job["status"], "succeeded", "{job}");
    assert!(job["result"]["output"]["ideas"].is_array(), "{job}");
}

#[tokio::test]
async fn the_demo_upstream_gives_normalized_recipes_even_when_it_is_busy_or_writes_words() {
    let gateway = demo_gateway().await;
    let mut attempts = Vec::new();
    for servings in 1..=6 {
        // Another request each time: none is answered from the cache.
        let asked = json!({"dish": "香酥鸭", "servings": servings});
        let response = gateway.task("recipe", &asked).await;
        assert_eq!(response.status(), 200);
        let body: serde_json::Value = response.json().await.expect("JSON");
        assert_eq!(body["output"]["title"], "香酥鸭");
        assert_eq!(
            body["output"]["nutrition"]["protein"], "48克",
            "forty-eight 克 is mended"
        );
        attempts.push(body["meta"]["attempts"].as_u64().expect("attempts"));
    }
    assert!(
        attempts.contains(&2),
        "the demo is busy now and then: {attempts:?}"
    );
}

#[tokio::test]
async fn the_demo_streamed_recipe_shows_a_retry_when_asked_in_the_printed_order() {
    let gateway = demo_gateway().await;
    // As `demo` prints them: a recipe, the same again (the cache answers it, no
    // upstream request), then a streamed recipe: the upstream's second request.
    let first = json!({"dish": "香酥鸭", "servings": 2});
    for _ in 0..2 {
        assert_eq!(gateway.task("recipe", &first).await.status(), 200);
    }
    let streamed = gateway
        .post_events("/v1/tasks/recipe", &json!({"dish": "番茄炒蛋"}))
        .await;
    let events = streamed.text().await.expect("the events");
    assert!(
        events.contains("event: retry") && events.contains(r#""reason":"busy""#),
        "{events}"
    );
    assert!(events.contains("event: result"), "{events}");
}

#[tokio::test]
async fn the_demo_cuts_its_mapo_tofu_recipe_and_ladle_continues_it_whole() {
    let gateway = demo_gateway().await;
    let streamed = gateway
        .post_events("/v1/tasks/recipe", &json!({"dish": demo::CUT_DISH}))
        .await;
    let events = task_events(&streamed.text().await.expect("the events"));
    assert_eq!(
        event_names(&events),
        ["attempt", "delta", "attempt", "continue", "delta", "result"]
    );
    let result = &events.last().expect("a result").1;
    assert_eq!(result["output"]["title"], demo::CUT_DISH);
    assert!(
        result["output"]["steps"]
            .as_array()
            .is_some_and(|s| s.len() > 1),
        "{result}"
    );
}

/// A gateway in front of the demo's upstream, which streams without pauses, as
/// the demo sets it up (it continues a `prefix`).
async fn demo_gateway() -> Gateway {
    let url = demo::start(DemoOptions {
        chunk_gap: millis(0),
        ..DemoOptions::default()
    })
    .await
    .expect("demo upstream starts");
    let demo_upstream = ladle::config::UpstreamSettings {
        continuation: Continuation::Prefix,
        ..upstream("default", &url, 0, 1)
    };
    Gateway::options()
        .upstreams(vec![demo_upstream])
        .start()
        .await
}
