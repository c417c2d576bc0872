//! Log lines that say what happened: the real binary's JSON lines, read back.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mock_upstream::*;
use crate::process::Gateway;

/// The gateway's log lines for one request id and message.
fn lines_of(gateway: &mut Gateway, request_id: &str, message: &str) -> Vec<Value> {
    gateway
        .all_lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|l| l["request_id"] == request_id && l["message"] == message)
        .collect()
}

async fn chat(gateway: &Gateway, request_id: &str, stream: bool) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .header("x-request-id", request_id)
        .json(&json!({"stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("answer")
}

#[tokio::test]
async fn a_committed_stream_that_ends_with_an_error_event_is_logged_as_that_error() {
    let upstream = MockUpstream::start().await;
    upstream.push([sse(vec![
        data(&content("半")),
        data(r#"{"error": {"message": "content filter"}}"#),
    ])]);
    let mut gateway = Gateway::start(&upstream.url, &[]).await;
    let response = chat(&gateway, "late-error", true).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("body");
    assert!(body.contains("upstream_failed"), "{body}");
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let answered = lines_of(&mut gateway, "late-error", "request answered");
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
    let mut gateway = Gateway::start(&upstream.url, &env).await;
    let gone = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .header("x-request-id", "cancelled-wait")
        .timeout(Duration::from_millis(300))
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up first");
    tokio::time::sleep(Duration::from_millis(100)).await;
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let ended = lines_of(&mut gateway, "cancelled-wait", "completion ended");
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
    let mut gateway = Gateway::start(&upstream.url, &env).await;
    assert_eq!(chat(&gateway, "why", false).await.status(), 200);
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let attempts = lines_of(&mut gateway, "why", "attempt ended");
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    for failed in &attempts[..2] {
        let detail = failed["detail"].as_str().unwrap_or_default();
        assert!(!detail.is_empty(), "no detail in {failed}");
    }
}
