//! Usage (contract 6.8) and `x-should-retry` (6.3): what ladle asks for when it
//! assembles an answer itself, what it counts, and how it tells a caller's SDK
//! whether to retry.

use crate::support::mock_upstream::*;
use crate::support::scripts::answer_with_usage;
use crate::support::*;

#[tokio::test]
async fn a_whole_chat_answer_asks_for_usage_returns_it_and_counts_tokens() {
    let app = Gateway::start().await;
    app.upstream().push([answer_with_usage("红烧肉")]);
    let body = json_of(app.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "红烧肉");
    assert_eq!(body["usage"]["prompt_tokens"], 12);
    assert_eq!(body["usage"]["completion_tokens"], 34);
    let sent = &app.upstream().requests()[0].body;
    assert_eq!(
        sent["stream_options"],
        serde_json::json!({"include_usage": true})
    );
    // Chat has no task; without client keys, no client.
    let series = |kind: &str| {
        format!(
            "ladle_tokens_total{{upstream=\"default\",model=\"test-model\",kind=\"{kind}\",task=\"\",client=\"\"}}"
        )
    };
    assert_eq!(app.metric(&series("prompt")).await, 12.0);
    assert_eq!(app.metric(&series("completion")).await, 34.0);
}

#[tokio::test]
async fn a_relayed_stream_is_sent_as_the_caller_wrote_it() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["a"])]);
    assert_eq!(app.chat(true).await.status(), 200);
    assert!(
        app.upstream().requests()[0]
            .body
            .get("stream_options")
            .is_none()
    );
}

#[tokio::test]
async fn a_task_asks_for_usage_and_reports_it_in_meta() {
    let app = Gateway::start().await;
    app.upstream()
        .push([answer_with_usage(r#"{"ideas": ["番茄炒蛋"]}"#)]);
    let response = app
        .post(
            "/v1/tasks/fridge",
            &serde_json::json!({"ingredients": ["鸡蛋", "番茄"]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    assert_eq!(body["meta"]["usage"]["total_tokens"], 46, "{body}");
    let sent = &app.upstream().requests()[0].body;
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn after_ladles_own_retries_the_caller_is_told_not_to_retry() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(status(529, r#"{"error":{"message":"overloaded"}}"#));
    let response = app.chat(false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(should_retry(&response), "false");
    assert!(app.upstream().requests().len() > 1, "529 is busy: retried");
}

#[tokio::test]
async fn a_lone_busy_attempt_with_no_time_to_retry_lets_the_caller_retry() {
    // 3000 ms deadline, 2990 ms to keep after a 20 ms back-off: no retry fits.
    let app = Gateway::with(|config| config.retry.min_remaining = millis(2990)).await;
    app.upstream()
        .fallback(status(503, r#"{"error":{"message":"busy"}}"#));
    let response = app.chat(false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(should_retry(&response), "true");
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn errors_that_asking_again_cannot_fix_say_false_before_any_attempt() {
    let app = Gateway::start().await;
    let bad = app
        .post("/v1/chat/completions", &serde_json::json!({"messages": []}))
        .await;
    assert_eq!(bad.status(), 400);
    assert_eq!(should_retry(&bad), "false");
    let unknown = app.post("/v1/tasks/nope", &serde_json::json!({})).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(should_retry(&unknown), "false");
    app.upstream()
        .fallback(status(401, r#"{"error":{"message":"bad key"}}"#));
    let rejected = app.chat(true).await;
    assert_eq!(rejected.status(), 502);
    assert_eq!(should_retry(&rejected), "false");
    let health = app.get("/healthz").await;
    assert!(health.headers().get("x-should-retry").is_none());
}

#[tokio::test]
async fn a_full_queue_lets_the_caller_retry() {
    let app = Gateway::with(|config| config.max_inflight = 1).await;
    app.upstream()
        .push([sse(vec![Step::Pause(millis(800)), data(&content("x"))])]);
    let first = app.chat(false);
    let second = async {
        requests_arrive(app.upstream(), 1).await;
        app.chat(false).await
    };
    let (_, second) = tokio::join!(first, second);
    assert_eq!(second.status(), 503);
    assert_eq!(should_retry(&second), "true");
    assert_eq!(json_of(second).await["error"]["code"], "overloaded");
}
