//! Answers ladle assembles itself: `LADLE_MAX_ANSWER_BYTES` ends a flooded
//! attempt at once and the request fails, not retried, in every assembled form;
//! the real binary's memory stays bounded while upstreams flood it; and a request
//! for `n` choices gets every choice apart.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::flood::flood;
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

/// The cap these tests set: 64 KiB per choice.
const CAP: usize = 64 << 10;

/// A gateway that assembles at most `CAP` bytes per choice, with the `tiny` task,
/// in front of a mock whose first attempt floods and whose second would answer.
async fn capped() -> Gateway {
    let app = Gateway::options()
        .prompt("tiny", &small_prompt("标记"))
        .adjust(|config| config.max_answer_bytes = CAP)
        .start()
        .await;
    app.upstream().push([flood(), sse_answer(&["好"])]);
    app
}

/// Asserts the error is the answer cap's: `upstream_failed`, not retryable,
/// naming the setting.
fn assert_too_large(error: &Value) {
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert_eq!(error["retryable"], false, "{error}");
    let message = error["message"].as_str().expect("a message");
    assert!(message.contains("LADLE_MAX_ANSWER_BYTES"), "{message}");
}

/// Asserts the mock saw exactly one attempt, and that its socket was closed.
async fn assert_one_attempt_dropped(app: &Gateway) {
    assert_eq!(app.upstream().requests().len(), 1, "not retried");
    let closed = app.upstream().closed_at(0).await;
    assert!(closed.is_some(), "the flooded attempt was dropped");
}

#[tokio::test]
async fn a_chat_answer_past_max_answer_bytes_is_502_upstream_failed_after_one_attempt() {
    let app = capped().await;
    let started = Instant::now();
    let (status, error) = error_of(app.chat(false).await).await;
    assert_eq!(status, 502);
    assert_too_large(&error);
    assert!(
        started.elapsed() < millis(1500),
        "the attempt ends at the cap, not at the 3 s deadline: {:?}",
        started.elapsed()
    );
    assert_one_attempt_dropped(&app).await;
}

#[tokio::test]
async fn a_task_answer_past_max_answer_bytes_is_502_upstream_failed_after_one_attempt() {
    let app = capped().await;
    let (status, error) = error_of(app.task("tiny", &json!({"dish": "鱼"})).await).await;
    assert_eq!(status, 502);
    assert_too_large(&error);
    assert_one_attempt_dropped(&app).await;
}

#[tokio::test]
async fn a_task_event_stream_past_max_answer_bytes_ends_with_its_error_event_after_one_attempt() {
    let app = capped().await;
    let response = app
        .post_events("/v1/tasks/tiny", &json!({"dish": "鱼"}))
        .await;
    assert_eq!(response.status(), 200);
    let events = task_events(&response.text().await.expect("the events"));
    let names = event_names(&events);
    assert_eq!(names, ["attempt", "delta", "error"], "no retry, no reset");
    let (_, error) = events.last().expect("an error event");
    assert_too_large(&error["error"]);
    let written: usize = events
        .iter()
        .filter_map(|(_, data)| data["content"].as_str())
        .map(str::len)
        .sum();
    assert!(written <= CAP, "{written} bytes of deltas");
    assert_one_attempt_dropped(&app).await;
}

#[tokio::test]
async fn a_relayed_chat_stream_is_not_assembled_and_has_no_answer_cap() {
    let app = Gateway::with(|config| config.max_answer_bytes = CAP).await;
    let pieces: Vec<String> = (0..4 * CAP / 1000).map(|n| format!("{n:0>1000}")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    app.upstream().push([sse_answer(&pieces)]);
    let response = app.chat(true).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("the stream");
    assert!(body.ends_with("data: [DONE]\n\n"), "a whole stream");
    assert_eq!(
        streamed_text(&body),
        pieces.concat(),
        "4 × the cap, relayed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binarys_memory_stays_bounded_while_upstreams_flood_it() {
    // Arrange: the default cap (4 MiB); a warm-up answer first, so that the base
    // counts the allocator's and the pools' first growth.
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["热身"])]);
    upstream.fallback(flood());
    let gateway = LadleProcess::start(&upstream.url, &[]).await;
    assert_eq!(gateway.chat(false).await.status(), 200);
    let base = gateway.rss_kib();
    // Act: 2 clients, each asking 12 times in turn, every answer flooded.
    let started = Instant::now();
    let clients = (0..2).map(|_| async {
        let mut peak = 0;
        for _ in 0..12 {
            let (status, error) = error_of(gateway.chat(false).await).await;
            assert_eq!(status, 502, "{error}");
            assert_too_large(&error);
            peak = peak.max(gateway.rss_kib());
        }
        peak
    });
    let peaks = futures_util::future::join_all(clients).await;
    let took = started.elapsed();
    // Assert
    let peak = peaks.into_iter().max().unwrap_or_default();
    let flooded = upstream.requests().len() - 1;
    eprintln!(
        "flood: {flooded} flooded requests in {took:?}; VmRSS {base} kB at rest, at most {peak} kB"
    );
    assert_eq!(flooded, 24, "one attempt each");
    assert!(
        peak <= base + 100 * 1024,
        "VmRSS {base} kB → {peak} kB while flooded"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// The deltas of one chunk, for the choices given as (index, content, finish).
fn choices_chunk(choices: &[(u32, &str, Option<&str>)]) -> Step {
    let choices: Vec<Value> = choices
        .iter()
        .map(|(index, text, finish)| {
            json!({"index": index, "delta": {"content": text}, "finish_reason": finish})
        })
        .collect();
    data(&json!({ "choices": choices }).to_string())
}

#[tokio::test]
async fn two_choices_are_assembled_apart_by_index_each_with_its_own_finish_reason() {
    let app = Gateway::start().await;
    app.upstream().push([sse(vec![
        choices_chunk(&[(1, "aaa", None)]),
        choices_chunk(&[(0, "AAA", None)]),
        choices_chunk(&[(0, " BBB", None), (1, " bbb", None)]),
        choices_chunk(&[(1, "", Some("length"))]),
        choices_chunk(&[(0, "", Some("stop"))]),
        data("[DONE]"),
    ])]);
    let body = json!({"n": 2, "messages": [{"role": "user", "content": "两道菜"}]});
    let response = app.post("/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    let answer = json_of(response).await;
    let choices: Vec<(u64, &str, &str)> = answer["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .map(|c| {
            (
                c["index"].as_u64().expect("an index"),
                c["message"]["content"].as_str().expect("content"),
                c["finish_reason"].as_str().expect("a finish reason"),
            )
        })
        .collect();
    assert_eq!(
        choices,
        [(0, "AAA BBB", "stop"), (1, "aaa bbb", "length")],
        "{answer}"
    );
    assert_eq!(app.upstream().requests()[0].body["n"], 2);
}

#[tokio::test]
async fn more_than_8_choices_is_400_invalid_request_before_any_upstream_call() {
    let app = Gateway::start().await;
    app.upstream().fallback(sse_answer(&["好"]));
    let body = json!({"n": 9, "messages": [{"role": "user", "content": "九道菜"}]});
    let (status, error) = error_of(app.post("/v1/chat/completions", &body).await).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (400, Some("invalid_request"))
    );
    assert!(app.upstream().requests().is_empty());
}
