//! Tidy checks over `src/`, run by `cargo test` (as rust-analyzer does): the
//! architecture's invariants, stated as absences, checked by reading the code;
//! `imports` checks the module graph, `docs` the documentation against the code.

mod docs;
mod imports;

use std::path::{Path, PathBuf};

pub fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Every source file under `src/`, with its path relative to `src/` and its code
/// (the part before any `#[cfg(test)]`, comments left out).
pub fn code() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files
        .into_iter()
        // A `tests.rs` is a unit test module of its folder, and the files of a
        // `tests/` folder beside it are its parts: test code, whole.
        .filter(|path| {
            let under_src = path.strip_prefix(&root).unwrap_or(path);
            path.file_name().is_none_or(|name| name != "tests.rs")
                && !under_src
                    .components()
                    .any(|part| part.as_os_str() == "tests")
        })
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read source");
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .map(|line| format!("{line}\n"))
                .collect();
            let relative = path
                .strip_prefix(&root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            (relative, code)
        })
        .collect()
}

/// The paths a check lists, each of which must exist under `src/` (a check
/// whose file was moved or deleted would otherwise pass without checking).
fn listed<'a>(paths: &[&'a str]) -> Vec<&'a str> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for path in paths {
        assert!(
            root.join(path).exists(),
            "tidy lists src/{path}, which does not exist"
        );
    }
    paths.to_vec()
}

fn offenders(pattern: &str, allowed: &[&str]) -> Vec<String> {
    let allowed = listed(allowed);
    code()
        .into_iter()
        .filter(|(path, code)| {
            code.contains(pattern) && !allowed.iter().any(|a| path.starts_with(a))
        })
        .map(|(path, _)| path)
        .collect()
}

/// The names a file takes from `module`, in any form: `module::Name`,
/// `module::{A, B}` (across lines too) or `module::sub::Name`.
fn names_from(code: &str, module: &str) -> Vec<String> {
    let prefix = format!("{module}::");
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(&prefix) {
        rest = &rest[at + prefix.len()..];
        let taken = if let Some(group) = rest.strip_prefix('{') {
            &group[..group.find('}').unwrap_or(group.len())]
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            &rest[..end]
        };
        names.extend(
            taken
                .split([',', ':'])
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned),
        );
    }
    names
}

#[test]
fn std_instant_is_not_used_so_there_is_one_clock() {
    let users: Vec<String> = code()
        .into_iter()
        .filter(|(_, code)| names_from(code, "std::time").iter().any(|n| n == "Instant"))
        .map(|(path, _)| path)
        .collect();
    assert_eq!(users, Vec::<String>::new());
}

#[test]
fn the_import_reader_sees_every_form() {
    let forms = [
        "use std::time::Instant;",
        "use std::time::{Duration, Instant};",
        "use std::time::{\n    Duration,\n    Instant,\n};",
        "let t = std::time::Instant::now();",
    ];
    for form in forms {
        assert!(
            names_from(form, "std::time").iter().any(|n| n == "Instant"),
            "{form}"
        );
    }
    assert!(!names_from("use std::time::Duration;", "std::time").contains(&"Instant".into()));
}

#[test]
fn only_the_attempt_loop_sleeps() {
    // The retry waits live in `completion`. Besides it, only timers that guard the
    // server's own sockets may wait (a pause after a failed accept, a client's body
    // deadline, a stream's connection past its deadline), and what paces its own output: the demo's simulated upstream and
    // the keep-alive comments of a waiting stream. And what paces background
    // rounds (the one owner of background work runs every loop), a repeat's
    // polls of a run on another replica in Redis, and a job read's `wait_ms`; a
    // job event stream's pings and long-poll wait, and the rounds of the Redis
    // event log's follower and the retries of its writer; a Responses stream's
    // pings.
    let allowed = [
        "engine/completion/",
        "background.rs",
        "idempotency/redis.rs",
        "demo/",
        "server/accept.rs",
        "ops/connection.rs",
        "jobs/runner.rs",
        "jobs/waiters.rs",
        "jobs/events/read.rs",
        "jobs/events/redis.rs",
        "ops/request_body.rs",
        "relay/commit.rs",
        "relay/responses/mod.rs",
    ];
    assert_eq!(offenders("sleep", &allowed), Vec::<String>::new());
}

#[test]
fn only_the_upstream_module_is_an_http_client() {
    // And the webhook sender, whose client is reqwest too (contract 7.2).
    for client in ["hyper::client", "tokio_rustls", "reqwest"] {
        let allowed = ["engine/upstream/", "jobs/webhooks/send.rs"];
        assert_eq!(offenders(client, &allowed), Vec::<String>::new());
    }
}

#[test]
fn pure_modules_do_no_io_and_read_no_clock() {
    let pure = listed(&[
        "engine/retry/",
        "engine/failure/",
        "engine/breaker/",
        "engine/budget/mod.rs",
        "engine/budget/local.rs",
        "engine/upstream/sse.rs",
        "engine/upstream/chunk.rs",
        "engine/upstream/order.rs",
        "engine/normalize/",
        "prompts/spec.rs",
        "prompts/render.rs",
        "config/",
    ]);
    for (path, code) in code() {
        if !pure.iter().any(|p| path.starts_with(p)) {
            continue;
        }
        for banned in [
            "std::fs",
            "tokio::fs",
            "Instant::now",
            "SystemTime",
            "tokio::net",
        ] {
            assert!(!code.contains(banned), "{path} uses {banned}");
        }
    }
}

#[test]
fn nothing_on_the_request_path_spawns_tasks() {
    // Serving itself may spawn (the prompt reloader, the demo upstream); handlers,
    // relays and the attempt loop must not, so no task outlives its request.
    // Any spawn counts: `tokio::spawn`, `task::spawn`, `spawn_local`,
    // `spawn_blocking`, a `JoinSet`'s `spawn`. The one exception is the admin API's
    // file I/O on the blocking pool: a save that has begun finishes even if its
    // client leaves, so a prompt file is never left half-replaced.
    // A task's template renders on the blocking pool too (`prompts/render.rs`):
    // its step budget bounds it, and the event loop must not wait for it.
    let request_path = listed(&[
        "routes/",
        "request/",
        "relay/",
        "engine/completion/",
        "engine/upstream/",
    ]);
    for (path, code) in code() {
        if path == listed(&["prompts/render.rs"])[0] {
            assert_eq!(code.matches("spawn").count(), 1, "{path}: only the render");
            continue;
        }
        if path == listed(&["routes/admin/mod.rs"])[0] {
            assert_eq!(
                code.matches("spawn").count(),
                1,
                "{path}: only its file I/O"
            );
            continue;
        }
        if request_path.iter().any(|p| path.starts_with(p)) {
            assert!(!code.contains("spawn"), "{path} spawns a task");
        }
    }
}

#[test]
fn every_background_loop_is_started_by_the_one_start() {
    // The loops live with their concepts; `start.rs` alone starts them (and
    // `server::serve` calls it once), so what runs beside the requests is listed
    // in one place.
    let loops = [
        "background.rs",
        "budget/redis.rs",
        "clients/redis.rs",
        "fleet.rs",
        "idempotency/redis.rs",
        "jobs/webhooks/send.rs",
        "start.rs",
    ];
    assert_eq!(offenders(".every(", &loops), Vec::<String>::new());
    for starter in [
        "shared::share(",
        "fleet::watch_persistence(",
        "send::start(",
        "RunsTasks::of(",
        "idempotency.start(",
    ] {
        assert_eq!(
            offenders(starter, &["start.rs"]),
            Vec::<String>::new(),
            "{starter}"
        );
    }
}

#[test]
fn a_lint_is_silenced_only_with_expect_and_a_reason() {
    // `#[expect]` fails the build once the lint no longer fires; `#[allow]` would
    // stay behind, silencing whatever comes next.
    assert_eq!(offenders("#[allow(", &[]), Vec::<String>::new());
}

#[test]
fn no_unwrap_outside_tests() {
    assert_eq!(offenders(".unwrap()", &[]), Vec::<String>::new());
}

#[test]
fn every_source_and_test_file_stays_under_400_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("tests"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            (lines > 400).then(|| format!("{} ({lines})", path.display()))
        })
        .collect();
    assert_eq!(long, Vec::<String>::new(), "split them by what they own");
}
