//! Numbers and lines an operator can read (contract 5, 6.8): tokens by task and
//! client key (a job run's counted under its job's key), every metric with a
//! HELP line, and log lines whose level says what happened, whose fields keep one
//! JSON type, and whose request line carries the answer's usage.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::clients::{KEY_A, keyed_gateway, keys_file, post_as};
use crate::jobs::{fridge, job_id};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::scripts::{BUSY_CHUNK, answer_with_usage};
use crate::support::*;

const IDEAS: &str = r#"{"ideas": ["番茄炒蛋"]}"#;

fn tokens(task: &str, client: &str, kind: &str) -> String {
    format!(
        "ladle_tokens_total{{upstream=\"default\",model=\"test-model\",kind=\"{kind}\",task=\"{task}\",client=\"{client}\"}}"
    )
}

#[tokio::test]
async fn tokens_are_counted_by_task_and_client_key_and_a_job_run_under_its_jobs_key() {
    let path = keys_file(&[("alpha", KEY_A, "")]);
    let app = keyed_gateway(&path).await;
    app.upstream()
        .push([answer_with_usage(IDEAS), answer_with_usage(IDEAS)]);
    let answered = post_as(&app, KEY_A, "/v1/tasks/fridge", &fridge("a")).await;
    assert_eq!(answered.status(), 200);
    assert_eq!(app.metric(&tokens("fridge", "alpha", "prompt")).await, 12.0);
    assert_eq!(
        app.metric(&tokens("fridge", "alpha", "completion")).await,
        34.0
    );
    let submitted = post_as(&app, KEY_A, "/v1/tasks/fridge?async=true", &fridge("b")).await;
    let id = job_id(submitted).await;
    let waited = app
        .client
        .get(app.url(&format!("/v1/jobs/{id}?wait_ms=2000")))
        .bearer_auth(KEY_A)
        .send()
        .await
        .expect("the job");
    assert_eq!(json_of(waited).await["status"], "succeeded");
    assert_eq!(app.metric(&tokens("fridge", "alpha", "prompt")).await, 24.0);
}

#[tokio::test]
async fn every_metric_has_a_help_line() {
    let app = Gateway::options().admin().start().await;
    app.upstream().push([
        answer_with_usage("好"),
        status(503, "{}"),
        sse_answer(&["好"]),
    ]);
    assert_eq!(app.chat(false).await.status(), 200);
    assert_eq!(app.chat_keyed("k1").await.status(), 200);
    let _ = app.get("/v1/models").await;
    let text = app.metrics().await;
    let typed: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let helped: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(typed.contains("ladle_idempotency_total"), "{text}");
    let missing: Vec<&&str> = typed.difference(&helped).collect();
    assert!(missing.is_empty(), "no HELP for {missing:?}");
}

/// The JSON type of a value, as a log reader sees it (`null` counts as absent).
fn kind(value: &Value) -> Option<&'static str> {
    match value {
        Value::Null => None,
        Value::Bool(_) => Some("bool"),
        Value::Number(_) => Some("number"),
        Value::String(_) => Some("string"),
        Value::Array(_) => Some("array"),
        Value::Object(_) => Some("object"),
    }
}

#[tokio::test]
async fn levels_say_what_happened_fields_keep_one_type_and_the_request_line_has_usage() {
    let upstream = MockUpstream::start().await;
    upstream.push([
        answer_with_usage("好"),
        sse(vec![data(BUSY_CHUNK)]),
        sse_answer(&["好"]),
        status(401, r#"{"error": {"message": "bad key"}}"#),
        status(400, r#"{"error": {"message": "too long"}}"#),
    ]);
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    for (id, expected) in [
        ("usage", 200),
        ("busy-then-ok", 200),
        ("bad-key", 502),
        ("too-long", 400),
    ] {
        let response = gateway.chat_as(id, false).await;
        assert_eq!(response.status(), expected, "{id}");
    }
    let invalid = gateway
        .post_request("/v1/chat/completions", &json!({"messages": []}))
        .header("x-request-id", "invalid")
        .send()
        .await
        .expect("answers");
    assert_eq!(invalid.status(), 400);
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let all = gateway.all_lines();
    let level = |id: &str, message: &str| -> Vec<String> {
        let lines = gateway.logged(id, message);
        lines
            .iter()
            .map(|l| l["level"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    assert_eq!(level("usage", "attempt ended"), ["INFO"]);
    assert_eq!(level("usage", "request answered"), ["INFO"]);
    assert_eq!(level("busy-then-ok", "attempt ended"), ["WARN", "INFO"]);
    assert_eq!(level("busy-then-ok", "request answered"), ["INFO"]);
    assert_eq!(level("bad-key", "request answered"), ["WARN"], "a 5xx");
    assert_eq!(
        level("too-long", "attempt ended"),
        ["WARN"],
        "a rejected attempt"
    );
    assert_eq!(level("too-long", "request answered"), ["INFO"], "a 4xx");
    assert_eq!(level("invalid", "request answered"), ["INFO"]);
    let line = &gateway.logged("usage", "request answered")[0];
    assert_eq!(
        (
            line["prompt_tokens"].as_u64(),
            line["completion_tokens"].as_u64()
        ),
        (Some(12), Some(34))
    );
    let mut types: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    let lines: Vec<Value> = all
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for line in &lines {
        for (field, value) in line.as_object().into_iter().flatten() {
            types.entry(field.clone()).or_default().extend(kind(value));
        }
    }
    let mixed: Vec<_> = types.iter().filter(|(_, kinds)| kinds.len() > 1).collect();
    assert!(mixed.is_empty(), "fields of more than one type: {mixed:?}");
    assert_eq!(types["status"], BTreeSet::from(["number"]));
}
