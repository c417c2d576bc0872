//! Idempotency keys (contract 6.6): replays in every form, a repeat joining a run
//! in progress, the run outliving its client while a repeat waits, failures not
//! kept, another request under the key refused. Across replicas: `replicas.rs`.

mod replicas;

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_upstream::*;
use crate::support::scripts::late_answer;
use crate::support::*;

#[tokio::test]
async fn a_kept_chat_answer_is_replayed_as_json_and_as_a_stream_without_an_upstream_call() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["红烧", "肉"])]);
    let path = "/v1/chat/completions";
    let first = app
        .post_keyed(path, "chat-1", &chat_body(false), false)
        .await;
    assert!(!replayed(&first), "a fresh run is never marked");
    let first = json_of(first).await;
    assert_eq!(first["choices"][0]["message"]["content"], "红烧肉");

    let again = app
        .post_keyed(path, "chat-1", &chat_body(false), false)
        .await;
    assert!(replayed(&again));
    assert_eq!(json_of(again).await, first, "the kept body, unchanged");

    let streamed = app
        .post_keyed(path, "chat-1", &chat_body(true), false)
        .await;
    assert!(replayed(&streamed));
    let text = streamed.text().await.expect("body");
    let events = sse_events(&text);
    let first_chunk: Value = serde_json::from_str(&events[0].1).expect("a chunk");
    assert_eq!(first_chunk["choices"][0]["delta"]["content"], "红烧肉");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(app.upstream().requests().len(), 1);
    assert_eq!(
        app.metric("ladle_idempotency_total{outcome=\"replayed\"}")
            .await,
        2.0
    );
}

#[tokio::test]
async fn a_chat_stream_under_a_key_is_kept_whole_and_replayed_as_json_and_as_a_stream() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["番茄", "炒", "蛋"])]);
    let path = "/v1/chat/completions";
    let streamed = app
        .post_keyed(path, "stream-1", &chat_body(true), false)
        .await;
    assert!(!replayed(&streamed));
    let text = streamed.text().await.expect("the stream");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");

    let as_json = app
        .post_keyed(path, "stream-1", &chat_body(false), false)
        .await;
    assert!(replayed(&as_json));
    let body = json_of(as_json).await;
    assert_eq!(
        body["choices"][0]["message"]["content"], "番茄炒蛋",
        "{body}"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");

    let again = app
        .post_keyed(path, "stream-1", &chat_body(true), false)
        .await;
    assert!(replayed(&again));
    let text = again.text().await.expect("the replayed stream");
    let said: String = sse_events(&text)
        .iter()
        .filter_map(|(_, data)| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(said, "番茄炒蛋");
    assert_eq!(app.upstream().requests().len(), 1);
}

/// A stream with all a choice can hold besides text: reasoning, a tool call,
/// log-probabilities, two choices, a fingerprint and usage.
fn everything() -> Script {
    let chunk = |choices: Value| {
        json!({"id": "chatcmpl-up", "model": "glm-4-plus-0111", "system_fingerprint": "fp_1",
               "choices": choices})
        .to_string()
    };
    let logprob =
        json!({"content": [{"token": "番", "logprob": -0.2, "bytes": [1], "top_logprobs": []}]});
    sse(vec![
        data(&chunk(
            json!([{"index": 0, "delta": {"reasoning_content": "先想"}}]),
        )),
        data(&chunk(
            json!([{"index": 0, "delta": {"content": "番茄"}, "logprobs": logprob}]),
        )),
        data(&chunk(
            json!([{"index": 1, "delta": {"tool_calls": [{"index": 0, "id": "call_a",
            "type": "function", "function": {"name": "fridge", "arguments": "{\"room\":"}}]}}]),
        )),
        data(&chunk(
            json!([{"index": 1, "delta": {"tool_calls": [{"index": 0,
            "function": {"arguments": "\"厨房\"}"}}]}}]),
        )),
        data(&chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "stop"},
                           {"index": 1, "delta": {}, "finish_reason": "tool_calls"}]),
        )),
        data(
            &json!({"id": "chatcmpl-up", "choices": [],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}})
            .to_string(),
        ),
        data("[DONE]"),
    ])
}

#[tokio::test]
async fn a_kept_stream_is_replayed_as_the_very_json_a_json_request_gets() {
    // One record holds the answer whole: nothing a stream carried is lost on
    // the way to another shape.
    let app = Gateway::start().await;
    app.upstream().push([everything(), everything()]);
    let path = "/v1/chat/completions";
    let body = |stream: bool| {
        json!({"stream": stream, "n": 2, "logprobs": true,
        "messages": [{"role": "user", "content": "冰箱里有什么"}]})
    };
    let streamed = app.post_keyed(path, "whole-1", &body(true), false).await;
    assert!(
        streamed
            .text()
            .await
            .expect("the stream")
            .ends_with("data: [DONE]\n\n")
    );
    let replayed_json = app.post_keyed(path, "whole-1", &body(false), false).await;
    assert!(replayed(&replayed_json));
    let replayed_json = json_of(replayed_json).await;
    let fresh = json_of(app.post(path, &body(false)).await).await;
    for field in [
        "id",
        "object",
        "model",
        "system_fingerprint",
        "choices",
        "usage",
    ] {
        assert_eq!(
            replayed_json[field], fresh[field],
            "{field}: {replayed_json}"
        );
    }
    assert_eq!(
        fresh["choices"][1]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"room":"厨房"}"#
    );
    assert_eq!(fresh["choices"][0]["message"]["reasoning_content"], "先想");

    let again = app.post_keyed(path, "whole-1", &body(true), false).await;
    let text = again.text().await.expect("the replayed stream");
    let first: Value = serde_json::from_str(&sse_events(&text)[0].1).expect("a chunk");
    assert_eq!(first["choices"][0]["delta"]["reasoning_content"], "先想");
    assert_eq!(
        first["choices"][0]["logprobs"],
        fresh["choices"][0]["logprobs"]
    );
    assert_eq!(
        first["choices"][1]["delta"]["tool_calls"][0]["id"],
        "call_a"
    );
    assert_eq!(
        app.upstream().requests().len(),
        2,
        "one stream, one fresh JSON"
    );
}

#[tokio::test]
async fn a_repeat_waiting_on_a_chat_stream_whose_client_left_gets_its_whole_text() {
    let app = Gateway::start().await;
    app.upstream().push([late_answer()]);
    let leaver = app
        .chat_request(true)
        .header("idempotency-key", "stream-stay")
        .timeout(Duration::from_millis(100))
        .send();
    let waiter = async {
        requests_arrive(app.upstream(), 1).await;
        let path = "/v1/chat/completions";
        app.post_keyed(path, "stream-stay", &chat_body(true), false)
            .await
    };
    let (left, waited) = tokio::join!(leaver, waiter);
    assert!(left.is_err(), "the first client gave up");
    assert!(replayed(&waited));
    let text = waited.text().await.expect("the waiter's stream");
    assert!(text.contains(r#""content":"慢""#), "{text}");
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_kept_task_result_is_replayed_as_json_and_as_one_result_event() {
    let app = Gateway::start().await;
    app.upstream()
        .push([sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])]);
    let body = json!({"ingredients": ["鸡蛋"]});
    let first = json_of(
        app.post_keyed("/v1/tasks/fridge", "task-1", &body, false)
            .await,
    )
    .await;
    let again = app
        .post_keyed("/v1/tasks/fridge", "task-1", &body, true)
        .await;
    assert!(replayed(&again));
    let events = sse_events(&again.text().await.expect("body"));
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "result");
    let result: Value = serde_json::from_str(&events[0].1).expect("JSON");
    assert_eq!(result, first);
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn two_requests_with_one_key_make_one_upstream_call() {
    let app = Gateway::start().await;
    app.upstream().push([late_answer()]);
    let path = "/v1/chat/completions";
    let body = chat_body(false);
    let (a, b) = tokio::join!(app.post_keyed(path, "same", &body, false), async {
        requests_arrive(app.upstream(), 1).await;
        app.post_keyed(path, "same", &body, false).await
    });
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    assert!(!replayed(&a) && replayed(&b));
    assert_eq!(json_of(a).await, json_of(b).await);
    assert_eq!(app.upstream().requests().len(), 1);
    assert_eq!(
        app.metric("ladle_idempotency_total{outcome=\"joined\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn the_run_goes_on_for_a_waiting_repeat_when_its_own_client_leaves() {
    let app = Gateway::start().await;
    app.upstream().push([late_answer()]);
    let leaver = app
        .chat_request(false)
        .header("idempotency-key", "stay")
        .timeout(Duration::from_millis(100))
        .send();
    let waiter = async {
        requests_arrive(app.upstream(), 1).await;
        app.post_keyed("/v1/chat/completions", "stay", &chat_body(false), false)
            .await
    };
    let (left, waited) = tokio::join!(leaver, waiter);
    assert!(left.is_err(), "the first client gave up");
    assert_eq!(waited.status(), 200);
    assert!(replayed(&waited));
    assert_eq!(
        json_of(waited).await["choices"][0]["message"]["content"],
        "慢"
    );
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_run_whose_client_leaves_with_no_one_waiting_is_dropped() {
    let app = Gateway::start().await;
    app.upstream().push([late_answer(), sse_answer(&["新"])]);
    let gone = app
        .chat_request(false)
        .header("idempotency-key", "alone")
        .timeout(Duration::from_millis(100))
        .send()
        .await;
    assert!(gone.is_err());
    assert!(
        app.upstream().closed_at(0).await.is_some(),
        "the upstream call was dropped"
    );
    let again = app
        .post_keyed("/v1/chat/completions", "alone", &chat_body(false), false)
        .await;
    assert!(!replayed(&again), "nothing was kept: it runs anew");
    assert_eq!(
        json_of(again).await["choices"][0]["message"]["content"],
        "新"
    );
}

#[tokio::test]
async fn a_failed_run_is_not_kept_and_another_request_under_the_key_is_422() {
    let app = Gateway::start().await;
    app.upstream()
        .push([status(401, "{}"), sse_answer(&["好"])]);
    let path = "/v1/chat/completions";
    assert_eq!(
        app.post_keyed(path, "k", &chat_body(false), false)
            .await
            .status(),
        502
    );
    let second = app.post_keyed(path, "k", &chat_body(false), false).await;
    assert_eq!(second.status(), 200, "the failure was not kept");
    assert!(!replayed(&second));
    let other = json!({"messages": [{"role": "user", "content": "别的"}]});
    let reused = app.post_keyed(path, "k", &other, false).await;
    assert_eq!(reused.status(), 422);
    let error = json_of(reused).await["error"].clone();
    assert_eq!(error["code"], "idempotency_key_reused");
    assert_eq!(error["retryable"], false);
    assert_eq!(app.upstream().requests().len(), 2);
}

#[tokio::test]
async fn a_bad_key_is_400_before_anything_else() {
    let app = Gateway::start().await;
    let long = "k".repeat(256);
    for bad in ["has space", long.as_str()] {
        let response = app
            .post_keyed("/v1/chat/completions", bad, &chat_body(false), false)
            .await;
        assert_eq!(response.status(), 400, "{bad}");
    }
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn a_waiting_chat_stream_sends_only_keep_alive_comments_until_the_outcome() {
    let app =
        Gateway::with(|config| config.stream_keepalive = Some(Duration::from_millis(50))).await;
    app.upstream().push([late_answer()]);
    let path = "/v1/chat/completions";
    let (whole, streamed) = (chat_body(false), chat_body(true));
    let (first, waiter) = tokio::join!(app.post_keyed(path, "ka", &whole, false), async {
        requests_arrive(app.upstream(), 1).await;
        app.post_keyed(path, "ka", &streamed, false).await
    });
    assert_eq!(first.status(), 200);
    assert_eq!(waiter.status(), 200);
    assert!(replayed(&waiter));
    let text = waiter.text().await.expect("body");
    let events = sse_events(&text);
    assert_eq!(
        events[0],
        (":".to_owned(), "keep-alive".to_owned()),
        "{text}"
    );
    assert!(
        text.contains("慢") && text.ends_with("data: [DONE]\n\n"),
        "{text}"
    );
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_waiter_is_told_not_to_retry_when_the_run_it_joined_retried_already() {
    let app = Gateway::start().await;
    app.upstream().fallback(sse(vec![
        Step::Pause(Duration::from_millis(100)),
        data(r#"{"error":{"message":"busy"}}"#),
    ]));
    let path = "/v1/chat/completions";
    let body = chat_body(false);
    let (first, waiter) = tokio::join!(app.post_keyed(path, "busy-run", &body, false), async {
        requests_arrive(app.upstream(), 1).await;
        app.post_keyed(path, "busy-run", &body, false).await
    });
    assert_eq!(
        (first.status().as_u16(), waiter.status().as_u16()),
        (503, 503)
    );
    assert!(replayed(&waiter));
    assert_eq!(
        waiter.headers()["x-should-retry"],
        "false",
        "the run made several attempts"
    );
    assert_eq!(first.headers()["x-should-retry"], "false");
}
