//! Does-not-fit rejections go to the next upstream at once; any other 4xx is
//! final everywhere; `upstream_rejected` says what the upstream said (contract 2).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::*;

use super::{a_then_b, assert_answer, calls, fridge_events, two_mocks};

fn error(code: Option<&str>, message: &str) -> String {
    let mut error = json!({"message": message, "type": "invalid_request_error"});
    if let Some(code) = code {
        error["code"] = json!(code);
    }
    json!({ "error": error }).to_string()
}

#[tokio::test]
async fn every_does_not_fit_form_is_tried_on_the_next_upstream_at_once() {
    let forms = [
        (400, error(Some("context_length_exceeded"), "too long")),
        (
            400,
            error(None, "This model's maximum context length is 8192 tokens"),
        ),
        (413, "payload too large".to_owned()),
        (404, error(Some("model_not_found"), "no such model")),
        (404, error(None, "The model `glm-9` does not exist")),
    ];
    for (code, body) in forms {
        let (a, b) = two_mocks().await;
        a.push([status(code, &body)]);
        b.push([sse_answer(&["装得下"])]);
        let gateway = a_then_b(&a, &b).await;
        let started = Instant::now();
        let answer = json_of(gateway.chat(false).await).await;
        assert_eq!(
            answer["choices"][0]["message"]["content"], "装得下",
            "{code} {body}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "at once: {code} {body}"
        );
        assert_eq!(calls(&a, &b), (1, 1));
        let rejected = "ladle_upstream_attempts_total{outcome=\"rejected\",upstream=\"a\"}";
        assert_eq!(gateway.metric(rejected).await, 1.0);
        let moved = "ladle_fallbacks_total{from=\"a\",to=\"b\"}";
        assert_eq!(gateway.metric(moved).await, 1.0);
        assert_eq!(
            gateway
                .metric("ladle_retries_total{reason=\"rejected\"}")
                .await,
            1.0
        );
    }
}

#[tokio::test]
async fn a_content_filter_rejection_is_final_and_the_second_upstream_is_never_called() {
    let (a, b) = two_mocks().await;
    a.push([status(
        400,
        &error(Some("content_filter"), "The response was filtered"),
    )]);
    b.push([sse_answer(&["不该到这"])]);
    let gateway = a_then_b(&a, &b).await;
    let response = gateway.chat(false).await;
    // On chat the upstream's 400 is kept: an OpenAI client raises BadRequestError.
    assert_eq!(response.status(), 400);
    let body = json_of(response).await;
    assert_eq!(body["error"]["code"], "upstream_rejected");
    assert_eq!(
        body["error"]["upstream"],
        json!({"status": 400, "code": "content_filter", "type": "invalid_request_error",
               "message": "The response was filtered"})
    );
    assert_eq!(calls(&a, &b), (1, 0));
}

#[tokio::test]
async fn with_no_untried_upstream_left_the_last_refusal_is_the_answer() {
    let (a, b) = two_mocks().await;
    a.push([status(413, "too big for a")]);
    b.push([status(
        400,
        &error(Some("context_length_exceeded"), "too long for b"),
    )]);
    let gateway = a_then_b(&a, &b).await;
    let response = gateway.chat(false).await;
    assert_eq!(response.status(), 400, "the last refusal's status, on chat");
    let body = json_of(response).await;
    assert_eq!(
        body["error"]["upstream"],
        json!({"status": 400, "code": "context_length_exceeded",
               "type": "invalid_request_error", "message": "too long for b"})
    );
    assert_eq!(calls(&a, &b), (1, 1));
}

#[tokio::test]
async fn the_upstreams_message_is_cut_at_500_characters_and_carries_no_secret() {
    let upstream = MockUpstream::start().await;
    let long = format!(
        "bad key {API_KEY}, admin {ADMIN_TOKEN}: {}",
        "x".repeat(600)
    );
    upstream.push([status(403, &error(Some("invalid_key"), &long))]);
    let gateway = Gateway::options().mock(&upstream).admin().start().await;
    let body = json_of(gateway.chat(false).await).await;
    let message = body["error"]["upstream"]["message"]
        .as_str()
        .expect("a message");
    assert_eq!(message.chars().count(), 500);
    assert!(
        message.starts_with("bad key [redacted], admin [redacted]: x"),
        "{message}"
    );
    assert!(!body.to_string().contains(API_KEY) && !body.to_string().contains(ADMIN_TOKEN));
    assert_eq!(body["error"]["upstream"]["code"], "invalid_key");
}

#[tokio::test]
async fn a_long_message_of_wide_characters_is_cut_on_a_character_boundary() {
    let upstream = MockUpstream::start().await;
    upstream.push([status(403, &error(None, &"长".repeat(600)))]);
    let gateway = Gateway::options().mock(&upstream).start().await;
    let body = json_of(gateway.chat(false).await).await;
    let message = body["error"]["upstream"]["message"]
        .as_str()
        .expect("a message");
    // Cut at 1 KiB first (every upstream text is), on a character boundary.
    assert!(
        message.len() <= 1024 && message.chars().count() <= 500,
        "{}",
        message.len()
    );
    assert!(
        message.trim_end_matches('…').chars().all(|c| c == '长'),
        "{message}"
    );
}

#[tokio::test]
async fn a_body_that_is_no_error_json_gives_only_the_status() {
    let upstream = MockUpstream::start().await;
    upstream.push([status(401, "<html>unauthorized</html>")]);
    let gateway = Gateway::options().mock(&upstream).start().await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["error"]["upstream"], json!({"status": 401}));
}

#[tokio::test]
async fn does_not_fit_rejections_do_not_count_against_the_breaker() {
    let (a, b) = two_mocks().await;
    a.push([
        status(413, "too big"),
        status(413, "too big"),
        sse_answer(&["回来了"]),
    ]);
    b.cycle([sse_answer(&["备用"])]);
    let gateway = Gateway::options()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(long_back_offs)
        .adjust(|c| c.breaker_settings = breaker(1, 60_000))
        .start()
        .await;
    for _ in 0..2 {
        assert_answer(&gateway, "备用").await;
    }
    // One failure would have opened `a` for a minute; two rejections did not.
    assert_answer(&gateway, "回来了").await;
    assert_eq!(
        gateway.metric("ladle_breaker_state{upstream=\"a\"}").await,
        0.0
    );
}

#[tokio::test]
async fn a_task_stream_names_a_does_not_fit_retry_rejected() {
    let (a, b) = two_mocks().await;
    a.push([status(
        400,
        &error(Some("context_length_exceeded"), "too long"),
    )]);
    b.push([sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])]);
    let gateway = a_then_b(&a, &b).await;
    let events = fridge_events(&gateway).await;
    let retry: Vec<Value> = events
        .iter()
        .filter(|(event, _)| event == "retry")
        .map(|(_, data)| serde_json::from_str(data).expect("JSON"))
        .collect();
    assert_eq!(
        retry,
        [json!({"attempt": 1, "reason": "rejected", "wait_ms": 0, "upstream": "b"})]
    );
}
