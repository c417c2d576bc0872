//! Configuration, on the real binary: `LADLE_WORKERS` above 256 stops start-up
//! naming it (`check` and `serve` alike); unknown `LADLE_*` variables are all
//! named in one warning line at start; a short admin token is warned about and
//! never printed.

use std::process::Command;

use serde_json::Value;

use crate::support::mock_upstream::MockUpstream;
use crate::support::process::{
    LadleProcess, finished, ladle_command, serve_before_a_closed_port, text_of,
};
use crate::support::*;

/// An admin token of 12 characters.
const SHORT_TOKEN: &str = "short-tok-12";

/// `ladle check` on a copy of the shipped prompts, with `env`.
fn check(env: &[(&str, &str)]) -> Command {
    let mut command = ladle_command();
    command
        .arg("check")
        .env("LADLE_PROMPTS_DIR", prompts_copy())
        .envs(env.iter().copied());
    command
}

/// `ladle serve` on any free port in front of a closed one, with `env`.
fn serve(env: &[(&str, &str)]) -> Command {
    let mut command = serve_before_a_closed_port();
    command.envs(env.iter().copied());
    command
}

#[tokio::test]
async fn more_than_256_workers_stops_check_and_serve_naming_ladle_workers() {
    for command in [check(&[]), serve(&[])] {
        let mut command = command;
        command.env("LADLE_WORKERS", "100000");
        let output = finished(command).await;
        let text = text_of(&output);
        assert!(!output.status.success(), "{text}");
        assert!(text.contains("LADLE_WORKERS"), "{text}");
    }
    let output = finished(check(&[("LADLE_WORKERS", "256")])).await;
    assert!(output.status.success(), "{}", text_of(&output));
}

/// The two misspelt settings the tests give.
const UNKNOWN: [(&str, &str); 2] = [("LADLE_FOO_BAR", "1"), ("LADLE_DEADLNE_MS", "5")];

/// The lines that name either unknown variable; there must be one, naming both.
fn the_one_line_naming_both(lines: &[String]) -> String {
    let naming: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("LADLE_FOO_BAR") || l.contains("LADLE_DEADLNE_MS"))
        .collect();
    assert_eq!(naming.len(), 1, "{lines:#?}");
    let line = naming[0];
    assert!(
        line.contains("LADLE_FOO_BAR") && line.contains("LADLE_DEADLNE_MS"),
        "{line}"
    );
    line.clone()
}

#[tokio::test]
async fn check_names_every_unknown_ladle_variable_in_one_warning_line() {
    let output = finished(check(&UNKNOWN)).await;
    let text = text_of(&output);
    assert!(
        output.status.success(),
        "unknown variables do not fail: {text}"
    );
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let line = the_one_line_naming_both(&lines);
    assert!(line.starts_with("warning"), "{line}");
}

#[tokio::test]
async fn serve_names_every_unknown_ladle_variable_in_one_warning_line_at_start() {
    let upstream = MockUpstream::start().await;
    let gateway = LadleProcess::start(&upstream.url, &UNKNOWN).await;
    let lines = gateway.lines();
    let line = the_one_line_naming_both(&lines);
    let logged: Value = serde_json::from_str(&line).expect("a JSON log line");
    assert_eq!(logged["level"], "WARN", "{line}");
    let listening = lines.iter().position(|l| l.contains("listening on"));
    let warned = lines.iter().position(|l| *l == line);
    assert!(warned < listening, "at start: {lines:#?}");
    assert_eq!(gateway.get("/healthz").await.status(), 200, "and it serves");
}

#[tokio::test]
async fn a_short_admin_token_is_warned_about_and_never_printed() {
    let token = [("LADLE_ADMIN_TOKEN", SHORT_TOKEN)];
    let checked = finished(check(&token)).await;
    let text = text_of(&checked);
    assert!(checked.status.success(), "{text}");
    let upstream = MockUpstream::start().await;
    let gateway = LadleProcess::start(&upstream.url, &token).await;
    let served = gateway.lines();
    for lines in [text.lines().map(str::to_owned).collect(), served] {
        let warned: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains("LADLE_ADMIN_TOKEN") && l.contains("16"))
            .collect();
        assert_eq!(warned.len(), 1, "{lines:#?}");
        assert!(
            !lines.iter().any(|l| l.contains(SHORT_TOKEN)),
            "the token was printed: {lines:#?}"
        );
    }
}
