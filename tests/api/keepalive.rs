//! `LADLE_STREAM_KEEPALIVE_MS` (contract 6.4): the head and `: keep-alive` comments
//! during a silence before the first output; retries still made; a failure after
//! the head as one `error` event. Streams get comments after 50 ms of silence;
//! back-offs last 150 ms.

use std::time::Duration;

use crate::support::mock_upstream::*;
use crate::support::*;

/// A gateway whose streams get comments after 50 ms of silence, back-offs 150 ms.
async fn keeping_alive() -> Gateway {
    Gateway::options()
        .adjust(|c| c.stream_keepalive = Some(Duration::from_millis(50)))
        .adjust(back_offs(150))
        .start()
        .await
}

#[tokio::test]
async fn comments_keep_a_backing_off_stream_alive_and_the_retry_is_still_made() {
    let app = keeping_alive().await;
    app.upstream()
        .push([status(503, "{}"), sse_answer(&["终于"])]);
    let response = app.chat(true).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("body");
    let events = sse_events(&body);
    let comments = events
        .iter()
        .filter(|(e, text)| e == ":" && text == "keep-alive")
        .count();
    assert!(
        comments >= 2,
        "a comment every 50 ms of a 150 ms wait: {body}"
    );
    assert!(
        body.contains("终于") && body.ends_with("data: [DONE]\n\n"),
        "{body}"
    );
    assert_eq!(app.upstream().requests().len(), 2);
}

#[tokio::test]
async fn a_failure_after_the_head_is_one_error_event_without_done() {
    let app = keeping_alive().await;
    app.upstream()
        .fallback(status(503, r#"{"error":{"message":"busy"}}"#));
    let response = app.chat(true).await;
    assert_eq!(
        response.status(),
        200,
        "the head went out during the back-off"
    );
    let body = response.text().await.expect("body");
    let events = sse_events(&body);
    let (last_event, last_data) = events.last().expect("events");
    assert_eq!(last_event, "message");
    let error: serde_json::Value = serde_json::from_str(last_data).expect("an error body");
    assert_eq!(error["error"]["code"], "upstream_busy");
    assert_eq!(error["error"]["retryable"], true);
    assert!(!body.contains("[DONE]"), "{body}");
    assert!(events.iter().any(|(e, _)| e == ":"));
}

#[tokio::test]
async fn nothing_is_added_when_output_comes_first() {
    let app = keeping_alive().await;
    app.upstream().push([sse_answer(&["快"])]);
    let body = app.chat(true).await.text().await.expect("body");
    assert!(!body.contains("keep-alive"), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn without_the_setting_a_failing_stream_is_still_a_plain_http_error() {
    let app = Gateway::with(back_offs(150)).await;
    app.upstream().fallback(status(503, "{}"));
    let response = app.chat(true).await;
    assert_error(response, 503, "upstream_busy").await;
}
