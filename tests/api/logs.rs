//! Log lines that say what happened: the real binary's JSON lines, read back.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

#[tokio::test]
async fn a_committed_stream_that_ends_with_an_error_event_is_logged_as_that_error() {
    let upstream = MockUpstream::start().await;
    upstream.push([sse(vec![
        data(&content("半")),
        data(r#"{"error": {"message": "content filter"}}"#),
    ])]);
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    let response = gateway.chat_as("late-error", true).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("body");
    assert!(body.contains("upstream_failed"), "{body}");
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let answered = gateway.lines_of("late-error", "request answered");
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["status"], 200);
    assert_eq!(answered[0]["outcome"], "upstream_failed");
}

#[tokio::test]
async fn a_request_cancelled_during_a_back_off_logs_the_time_it_actually_waited() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(status(503, "{}"));
    let env = [
        ("LADLE_BACKOFF_BASE_MS", "5000"),
        ("LADLE_BACKOFF_MAX_MS", "5000"),
        ("LADLE_DEADLINE_MS", "20000"),
    ];
    let mut gateway = LadleProcess::start(&upstream.url, &env).await;
    let gone = gateway
        .chat_request(false)
        .header("x-request-id", "cancelled-wait")
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up first");
    let what = "the cancelled request's `completion ended` line";
    eventually(Duration::from_secs(2), what, async || {
        !gateway
            .logged("cancelled-wait", "completion ended")
            .is_empty()
    })
    .await;
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let ended = gateway.lines_of("cancelled-wait", "completion ended");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["outcome"], "cancelled");
    let waited = ended[0]["wait_ms"].as_u64().expect("wait_ms");
    let elapsed = ended[0]["elapsed_ms"].as_u64().expect("elapsed_ms");
    assert!(
        waited <= elapsed && waited < 1000,
        "waited {waited} of {elapsed} ms"
    );
}

#[tokio::test]
async fn every_failed_attempt_line_says_why() {
    let upstream = MockUpstream::start().await;
    // Ended without a word (ended early), then silent (idle timeout): both not
    // started, so both retried.
    upstream.push([
        sse(vec![data(&role())]),
        sse(vec![Step::Stall]),
        sse_answer(&["好"]),
    ]);
    let env = [("LADLE_IDLE_TIMEOUT_MS", "100")];
    let mut gateway = LadleProcess::start(&upstream.url, &env).await;
    assert_eq!(gateway.chat_as("why", false).await.status(), 200);
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let attempts = gateway.lines_of("why", "attempt ended");
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    for failed in &attempts[..2] {
        let detail = failed["detail"].as_str().unwrap_or_default();
        assert!(!detail.is_empty(), "no detail in {failed}");
    }
}

#[tokio::test]
async fn json_logs_have_one_line_per_attempt_and_per_request_with_the_contract_fields() {
    // Arrange
    let upstream = MockUpstream::start().await;
    upstream.push([status(503, "{}"), sse_answer(&["好"])]);
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    // Act
    let response = gateway.chat_as("log-fields-1", false).await;
    assert_eq!(response.status(), 200);
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    // Assert
    let lines: Vec<Value> = gateway
        .all_lines()
        .iter()
        .map(|line| serde_json::from_str(line).expect("every line is one JSON object"))
        .collect();
    let ours: Vec<&Value> = lines
        .iter()
        .filter(|l| l["request_id"] == "log-fields-1")
        .collect();
    let with_message = |message: &str| -> Vec<&Value> {
        ours.iter()
            .copied()
            .filter(|l| l["message"] == message)
            .collect()
    };
    let attempts = with_message("attempt ended");
    assert_eq!(attempts.len(), 2, "attempt lines: {attempts:?}");
    assert_eq!(
        (
            &attempts[0]["attempt"],
            &attempts[0]["outcome"],
            &attempts[0]["decision"]
        ),
        (&json!(1), &json!("busy"), &json!("retry"))
    );
    assert!(attempts[0]["wait_ms"].as_u64().expect("wait_ms") >= 20);
    assert_eq!(
        (
            &attempts[1]["attempt"],
            &attempts[1]["outcome"],
            &attempts[1]["decision"]
        ),
        (&json!(2), &json!("ok"), &json!("stop"))
    );
    let summary = with_message("completion ended");
    assert_eq!(summary.len(), 1, "summary lines: {summary:?}");
    assert_eq!(summary[0]["attempt"], 2);
    assert_eq!(summary[0]["outcome"], "ok");
    assert!(summary[0]["wait_ms"].as_u64().expect("wait_ms") >= 20);
    let request = with_message("request answered");
    assert_eq!(request.len(), 1, "request lines: {request:?}");
    assert_eq!(request[0]["status"], 200);
    assert_eq!(request[0]["outcome"], "ok");
    for line in attempts.iter().chain(&summary) {
        for field in ["route", "attempt", "elapsed_ms", "outcome", "wait_ms"] {
            assert!(!line[field].is_null(), "`{field}` missing in {line}");
        }
        assert_eq!(line["route"], "/v1/chat/completions");
    }
    for field in ["route", "elapsed_ms", "outcome", "status"] {
        assert!(!request[0][field].is_null(), "`{field}` missing");
    }
}

#[tokio::test]
async fn logs_of_a_failing_run_never_contain_the_api_key_or_the_admin_token() {
    // Arrange: the upstream rejects the key and echoes it back.
    const KEY: &str = "sk-live-9f8e7d6c5b4a3210";
    const TOKEN: &str = "tok-admin-0a1b2c3d4e5f";
    let upstream = MockUpstream::start().await;
    let echo = format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#);
    upstream.fallback(status(401, &echo));
    let mut gateway = LadleProcess::start(
        &upstream.url,
        &[
            ("LADLE_UPSTREAM_API_KEY", KEY),
            ("LADLE_ADMIN_TOKEN", TOKEN),
            ("RUST_LOG", "debug"),
        ],
    )
    .await;
    // Act
    let chat = gateway.chat(false).await;
    let chat_status = chat.status();
    let chat_body = chat.text().await.expect("body");
    let wrong = gateway
        .client
        .get(gateway.url("/admin/prompts"))
        .bearer_auth("not-the-token")
        .send()
        .await
        .expect("answer");
    let right = gateway
        .client
        .get(gateway.url("/admin/prompts"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("answer");
    let (wrong_status, right_status) = (wrong.status().as_u16(), right.status().as_u16());
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let lines = gateway.all_lines();
    // Assert: the key was really in play, and refused.
    let sent = &upstream.requests()[0].head.to_ascii_lowercase();
    assert!(sent.contains(&format!("bearer {KEY}")), "head was {sent}");
    assert_eq!(chat_status, 502);
    assert!(!chat_body.contains(KEY));
    assert_eq!(wrong_status, 401, "wrong token");
    assert_eq!(right_status, 200, "right token");
    assert!(
        lines.iter().any(|l| l.contains("\"outcome\":\"rejected\"")),
        "the rejected attempt is logged"
    );
    for line in &lines {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        for secret in [KEY, TOKEN] {
            assert!(!line.contains(secret), "secret in log line: {line}");
        }
        assert!(
            !line.to_ascii_lowercase().contains("bearer sk-")
                && !line.to_ascii_lowercase().contains("bearer tok-"),
            "authorization in log line: {line}"
        );
    }
}

#[tokio::test]
async fn request_lines_name_the_budget_and_what_an_idempotency_key_led_to() {
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["好"])]);
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    let send = |id: &'static str, content: &'static str| {
        gateway
            .post_request(
                "/v1/chat/completions",
                &json!({"messages": [{"role": "user", "content": content}]}),
            )
            .header("x-request-id", id)
            .header("x-request-timeout-ms", "2500")
            .header("idempotency-key", "logged-key")
            .send()
    };
    assert_eq!(send("run", "hi").await.expect("answer").status(), 200);
    assert_eq!(send("again", "hi").await.expect("answer").status(), 200);
    assert_eq!(send("other", "bye").await.expect("answer").status(), 422);
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    for (id, outcome) in [
        ("run", "executed"),
        ("again", "replayed"),
        ("other", "reused"),
    ] {
        let lines = gateway.lines_of(id, "request answered");
        assert_eq!(lines.len(), 1, "{id}: {lines:?}");
        assert_eq!(lines[0]["idempotency"], outcome, "{id}");
        assert_eq!(lines[0]["idempotency_key"], "logged-key");
        assert_eq!(lines[0]["deadline_ms"], 2500, "{id}: the effective budget");
    }
}
