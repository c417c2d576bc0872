//! What an upstream says reaches the logs, the messages and the headers bounded:
//! its error text cut at 1 KiB, its `Retry-After` at most 3600 s.

use std::time::Duration;

use serde_json::json;

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

#[tokio::test]
async fn a_1_mib_upstream_error_message_is_cut_at_1_kib_in_the_log_and_the_answer() {
    // Arrange: every attempt answers 500 with a 1 MiB message.
    let upstream = MockUpstream::start().await;
    let huge = json!({"error": {"message": "e".repeat(1 << 20)}}).to_string();
    upstream.fallback(status(500, &huge));
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    // Act
    let response = gateway.chat_as("huge-error", false).await;
    let (status, error) = error_of(response).await;
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    // Assert
    assert_eq!(
        (status, error["code"].as_str()),
        (502, Some("upstream_failed"))
    );
    let message = error["message"].as_str().expect("a message");
    assert!(message.len() <= 1100, "a {} byte message", message.len());
    let attempts = gateway.lines_of("huge-error", "attempt ended");
    assert!(!attempts.is_empty(), "attempt lines");
    for attempt in &attempts {
        let detail = attempt["detail"].as_str().expect("a detail");
        eprintln!("attempt detail: {} bytes", detail.len());
        assert!(detail.len() <= 1100, "a {} byte detail", detail.len());
        assert!(
            detail.contains(&"e".repeat(500)),
            "the upstream's words: {detail}"
        );
    }
    let longest = gateway.all_lines().iter().map(String::len).max();
    assert!(
        longest.is_some_and(|n| n < 4096),
        "the longest log line: {longest:?} bytes"
    );
}

#[tokio::test]
async fn an_upstreams_huge_retry_after_reaches_the_client_as_3600() {
    let app = Gateway::start().await;
    for asked in ["99999999999", "Fri, 31 Dec 9999 23:59:59 GMT"] {
        app.upstream().push([Script(vec![
            head(
                503,
                "application/json",
                &format!("retry-after: {asked}\r\n"),
            ),
            Step::Send(br#"{"error":{"message":"overloaded"}}"#.to_vec()),
        ])]);
        let response = app.chat(false).await;
        assert_eq!(response.status(), 503, "{asked}");
        assert_eq!(response.headers()["retry-after"], "3600", "{asked}");
        let (_, error) = error_of(response).await;
        assert_eq!(error["code"], "upstream_busy", "{asked}");
    }
    assert_eq!(app.upstream().requests().len(), 2, "one attempt each");
}
