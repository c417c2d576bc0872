//! `POST /v1/chat/completions` against a misbehaving upstream.

use serde_json::json;

use crate::support::mock_upstream::*;
use crate::support::scripts::drip;
use crate::support::*;

#[tokio::test]
async fn a_non_streaming_request_gets_one_chat_completion_and_the_upstream_always_streams() {
    // Arrange
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["你", "好"])]);
    // Act
    let response = app.chat(false).await;
    // Assert
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], "你好");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let sent = &app.upstream().requests()[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["model"], "test-model");
    assert!(
        sent.head.contains(&format!("Bearer {API_KEY}"))
            || sent.head.contains(&format!("bearer {API_KEY}"))
    );
}

#[tokio::test]
async fn a_streaming_request_relays_chunks_and_ends_with_done() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["香酥", "鸭"])]);
    let response = app.chat(true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = response.text().await.expect("body");
    let events = sse_events(&body);
    let data: Vec<&str> = events.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    assert_eq!(streamed_text(&body), "香酥鸭");
    // The role-only chunk held back before the first output is sent first, in order.
    assert!(data[0].contains("\"role\""), "first event was {}", data[0]);
}

#[tokio::test]
async fn an_upstream_that_ignores_stream_is_read_as_one_completion_for_both_kinds_of_client() {
    let app = Gateway::start().await;
    let whole = r#"{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"整段"},"finish_reason":"stop"}],"usage":{"total_tokens":5}}"#;
    app.upstream()
        .push([status(200, whole), status(200, whole)]);
    let plain = json_of(app.chat(false).await).await;
    assert_eq!(plain["choices"][0]["message"]["content"], "整段");
    assert_eq!(plain["usage"]["total_tokens"], 5);
    let streamed = app.chat(true).await;
    assert_eq!(streamed.headers()["content-type"], "text/event-stream");
    let events = sse_events(&streamed.text().await.expect("body"));
    assert!(events[0].1.contains("整段"));
    assert_eq!(events.last().expect("events").1, "[DONE]");
}

#[tokio::test]
async fn an_upstream_whose_port_is_closed_ends_in_upstream_timeout() {
    // Point the gateway at a port nobody listens on.
    let url = format!("http://127.0.0.1:{}/v1", free_port());
    let gateway = Gateway::options().url(&url).start().await;
    let response = gateway.chat(false).await;
    assert_error(response, 504, "upstream_timeout").await;
}

#[tokio::test]
async fn an_endless_slow_stream_hits_the_deadline_and_the_upstream_socket_is_closed() {
    let app = Gateway::with(|c| {
        c.deadline = millis(600);
        c.retry.min_remaining = millis(100);
    })
    .await;
    app.upstream().push([drip("滴", millis(20))]);
    let response = app.chat(false).await;
    let answered = tokio::time::Instant::now();
    assert_deadline_exceeded(response).await;
    let closed = app
        .upstream()
        .closed_at(0)
        .await
        .expect("the upstream socket was closed");
    assert!(ms(app.upstream().requests()[0].arrived, closed) < 1500);
    assert!(closed <= answered + millis(500));
}

#[tokio::test]
async fn a_client_that_disconnects_closes_the_upstream_socket() {
    let app = Gateway::start().await;
    app.upstream().push([drip("滴", millis(20))]);
    let (response, first) = app.chat_streaming().await;
    assert!(!first.is_empty());
    drop(response);
    assert_upstream_closed_soon(&app).await;
    assert_eq!(
        app.metric("ladle_upstream_attempts_total{outcome=\"cancelled\",upstream=\"default\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn crlf_line_ends_and_a_utf8_character_split_across_writes_arrive_intact() {
    let app = Gateway::start().await;
    let chunk = format!("data: {}\r\n\r\n", content("香酥鸭"));
    let bytes = chunk.as_bytes();
    let cut = chunk.find("香").expect("has 香") + 1; // inside the character
    app.upstream().push([sse(vec![
        Step::Send(format!("data: {}\r\n\r\n", role()).into_bytes()),
        Step::Send(bytes[..cut].to_vec()),
        Step::Pause(millis(30)),
        Step::Send(bytes[cut..].to_vec()),
        Step::Send(format!("data: {}\r\n\r\ndata: [DONE]\r\n\r\n", finish()).into_bytes()),
    ])]);
    let body = json_of(app.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "香酥鸭");
}

#[tokio::test]
async fn an_upstream_that_lies_about_its_content_type_is_still_understood() {
    let app = Gateway::start().await;
    // SSE bytes declared as JSON, and a JSON answer declared as HTML.
    let sse_as_json = Script(vec![
        head(200, "application/json", ""),
        data(&content("流")),
        data(&finish()),
        data("[DONE]"),
    ]);
    let json_as_html = Script(vec![
        head(200, "text/html", ""),
        Step::Send(
            r#"{"choices":[{"message":{"content":"整"},"finish_reason":"stop"}]}"#
                .as_bytes()
                .to_vec(),
        ),
    ]);
    app.upstream().push([sse_as_json, json_as_html]);
    let first = json_of(app.chat(false).await).await;
    assert_eq!(first["choices"][0]["message"]["content"], "流");
    let second = json_of(app.chat(false).await).await;
    assert_eq!(second["choices"][0]["message"]["content"], "整");
}

#[tokio::test]
async fn garbage_in_a_declared_event_stream_fails_cleanly_as_upstream_failed() {
    let app = Gateway::start().await;
    let garbage = Script(vec![
        head(200, "text/event-stream", ""),
        data("<html>oops</html>"),
    ]);
    app.upstream().fallback(garbage);
    let response = app.chat(false).await;
    assert_error(response, 502, "upstream_failed").await;
    assert_eq!(
        app.upstream().requests().len(),
        2,
        "an early 'other' failure is retried once"
    );
}

#[tokio::test]
async fn a_connection_reset_before_output_is_retried_like_not_started() {
    let app = Gateway::start().await;
    app.upstream()
        .push([Script(vec![Step::Reset]), sse_answer(&["好"])]);
    assert_answered_after_one_retry(&app, "not_started").await;
}

#[tokio::test]
async fn a_stream_that_ends_without_done_or_finish_after_output_is_a_failure() {
    let app = Gateway::start().await;
    app.upstream().fallback(sse(vec![data(&content("半截"))]));
    let response = app.chat(false).await;
    assert_error(response, 502, "upstream_failed").await;
    assert_eq!(app.upstream().requests().len(), 2);
}

#[tokio::test]
async fn a_non_streaming_client_that_gives_up_closes_the_upstream_socket_too() {
    let app = Gateway::start().await;
    app.upstream().push([drip("滴", millis(20))]);
    let gave_up = tokio::time::timeout(millis(150), app.chat(false)).await;
    assert!(gave_up.is_err(), "the answer cannot be complete yet");
    assert_upstream_closed_soon(&app).await;
}

#[tokio::test]
async fn the_sample_stream_with_reasoning_usage_and_keep_alives_is_assembled_faithfully() {
    let app = Gateway::start().await;
    let sample = fixture("stream-reasoning-then-content.sse");
    app.upstream().push([sse(vec![Step::Send(sample)])]);
    let body = json_of(app.chat(false).await).await;
    let message = &body["choices"][0]["message"];
    assert_eq!(
        message["reasoning_content"],
        "用户想要香酥鸭，需要先腌后卤再炸，营养按每人份估算。"
    );
    assert!(
        message["content"]
            .as_str()
            .expect("content")
            .starts_with("{\"title\": \"香酥鸭\"")
    );
    assert_eq!(body["usage"]["total_tokens"], 2008);
    assert_eq!(body["model"], "glm-4-plus");
    assert_eq!(body["id"], "chatcmpl-7f3a");
}

#[tokio::test]
async fn the_sample_busy_error_stream_is_retried_as_busy() {
    let app = Gateway::start().await;
    let sample = fixture("stream-busy-error.sse");
    app.upstream()
        .push([sse(vec![Step::Send(sample)]), sse_answer(&["好"])]);
    assert_answered_after_one_retry(&app, "busy").await;
}

#[tokio::test]
async fn the_callers_fields_reach_the_upstream_unchanged_with_stream_forced_on() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["ok"])]);
    let body = json!({
        "model": "glm-4-plus",
        "stream": false,
        "temperature": 0.3,
        "messages": [{"role": "user", "content": "番茄\n\"炒蛋\""}],
        "response_format": {"type": "json_object"},
    });
    assert_eq!(app.post("/v1/chat/completions", &body).await.status(), 200);
    let mut expected = body.clone();
    expected["stream"] = json!(true);
    // A whole answer asks for usage (contract 6.8).
    expected["stream_options"] = json!({"include_usage": true});
    assert_eq!(app.upstream().requests()[0].body, expected);
}

/// Asserts the first request's upstream socket closes within 500 ms from now,
/// the moment the client left.
async fn assert_upstream_closed_soon(app: &Gateway) {
    let gone = tokio::time::Instant::now();
    let closed = app
        .upstream()
        .closed_at(0)
        .await
        .expect("the upstream socket was closed");
    assert!(
        ms(gone, closed) < 500,
        "closed {} ms after the client left",
        ms(gone, closed)
    );
}
