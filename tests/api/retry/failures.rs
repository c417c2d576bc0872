//! How failed attempts on the chat route are retried, or end the request
//! (contract section 2).

use serde_json::Value;

use crate::support::mock_upstream::*;
use crate::support::scripts::BUSY_CHUNK;
use crate::support::*;

#[tokio::test]
async fn busy_503_twice_then_success_waits_the_backoff_between_attempts() {
    let app = Gateway::start().await;
    app.upstream()
        .push([status(503, "{}"), status(503, "{}"), sse_answer(&["ok"])]);
    let response = app.chat(false).await;
    assert_eq!(response.status(), 200);
    let requests = app.upstream().requests();
    assert_eq!(requests.len(), 3);
    // Back-off base 20 ms doubles: at least 20 ms, then at least 40 ms.
    assert!(ms(requests[0].arrived, requests[1].arrived) >= 20);
    assert!(ms(requests[1].arrived, requests[2].arrived) >= 40);
    assert_eq!(
        app.metric("ladle_retries_total{reason=\"busy\"}").await,
        2.0
    );
    assert_eq!(
        app.metric("ladle_upstream_attempts_total{outcome=\"ok\",upstream=\"default\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_busy_keyword_in_an_error_chunk_is_retried_as_busy() {
    let app = Gateway::start().await;
    app.upstream().push([
        sse(vec![data(&role()), data(BUSY_CHUNK)]),
        sse_answer(&["好"]),
    ]);
    assert_answered_after_one_retry(&app, "busy").await;
}

#[tokio::test]
async fn a_role_only_delta_then_a_stall_past_the_early_window_is_still_retried() {
    // Early window 100 ms, idle 300 ms: the stall is noticed after the window, but a
    // role-only delta is not output, so the attempt never started.
    let app = Gateway::with(|c| c.retry.early_retry_window = millis(100)).await;
    app.upstream()
        .push([sse(vec![data(&role()), Step::Stall]), sse_answer(&["好"])]);
    assert_answered_after_one_retry(&app, "not_started").await;
}

#[tokio::test]
async fn reasoning_then_a_stall_past_the_early_window_is_not_retried() {
    let app = Gateway::with(|c| c.retry.early_retry_window = millis(100)).await;
    app.upstream().push([
        sse(vec![data(&reasoning("想一想")), Step::Stall]),
        sse_answer(&["好"]),
    ]);
    let response = app.chat(false).await;
    assert_error(response, 502, "upstream_failed").await;
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn content_then_a_stall_in_a_committed_stream_ends_with_one_error_event() {
    let app = Gateway::start().await;
    app.upstream().push([
        sse(vec![data(&content("半")), Step::Stall]),
        sse_answer(&["好"]),
    ]);
    let response = app.chat(true).await;
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .expect("id")
        .to_owned();
    let events = sse_events(&response.text().await.expect("body"));
    let last: Value = serde_json::from_str(&events.last().expect("events").1).expect("error JSON");
    assert_eq!(last["error"]["code"], "upstream_failed");
    assert_eq!(last["error"]["request_id"], request_id.as_str());
    assert!(events.iter().all(|(_, d)| d != "[DONE]"));
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn slow_503s_give_up_when_the_wait_would_leave_less_than_min_remaining() {
    // Deadline 1000 ms, keep 600 ms: attempt 1 fails at ~200 ms and may wait 20 ms
    // (780 ms left); attempt 2 fails at ~420 ms, and after its 40 ms wait only
    // ~540 ms would be left, so it gives up at once.
    let app = Gateway::with(|c| {
        c.deadline = millis(1000);
        c.retry.min_remaining = millis(600);
    })
    .await;
    let slow_503 = Script(vec![
        Step::Pause(millis(200)),
        head(503, "application/json", ""),
        Step::Send(b"{}".to_vec()),
    ]);
    app.upstream().fallback(slow_503);
    let response = app.chat(false).await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(json_of(response).await["error"]["code"], "upstream_busy");
    assert_eq!(app.upstream().requests().len(), 2);
}

#[tokio::test]
async fn a_429_whose_retry_after_exceeds_the_time_left_fails_at_once() {
    let app = Gateway::start().await;
    app.upstream().push([Script(vec![
        head(429, "application/json", "retry-after: 60\r\n"),
        Step::Send(b"{}".to_vec()),
    ])]);
    let started = tokio::time::Instant::now();
    let response = app.chat(false).await;
    assert_error(response, 503, "upstream_busy").await;
    assert_eq!(app.upstream().requests().len(), 1);
    assert!(
        started.elapsed() < millis(1000),
        "it must not wait for the deadline"
    );
}

#[tokio::test]
async fn a_401_is_final_and_never_echoes_the_api_key() {
    let app = Gateway::start().await;
    let echo = format!(r#"{{"error":{{"message":"Incorrect API key provided: {API_KEY}"}}}}"#);
    app.upstream().push([status(401, &echo)]);
    let response = app.chat(false).await;
    assert_eq!(response.status(), 502);
    let text = response.text().await.expect("body");
    assert!(!text.contains(API_KEY));
    let body: Value = serde_json::from_str(&text).expect("JSON error");
    assert_eq!(body["error"]["code"], "upstream_rejected");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("401")
    );
    assert_eq!(body["error"]["retryable"], false);
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_500_twice_early_makes_exactly_two_attempts() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(status(500, r#"{"error":{"message":"internal"}}"#));
    let response = app.chat(false).await;
    assert_error(response, 502, "upstream_failed").await;
    assert_eq!(app.upstream().requests().len(), 2);
}

#[tokio::test]
async fn no_copy_of_the_api_key_reaches_the_client_upper_cased_base64_or_cut() {
    use base64::Engine as _;
    let app = Gateway::start().await;
    let base64 = base64::engine::general_purpose::STANDARD.encode(API_KEY);
    let copies = [
        API_KEY.to_uppercase(),
        base64.clone(),
        format!("{}…", &API_KEY[..10]),
        format!("…{}", &API_KEY[API_KEY.len() - 9..]),
    ];
    for copy in &copies {
        let echo = format!(r#"{{"error":{{"message":"key {copy} is not valid"}}}}"#);
        app.upstream().push([status(401, &echo)]);
        let text = app.chat(false).await.text().await.expect("body");
        let lower = text.to_lowercase();
        assert!(!lower.contains(&API_KEY.to_lowercase()[..8]), "{text}");
        assert!(!text.contains(&base64[..12]), "{text}");
        assert!(!text.contains(&API_KEY[API_KEY.len() - 8..]), "{text}");
    }
}
