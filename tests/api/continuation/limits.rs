//! Every limit of 11.4: `MAX_CONTINUATIONS`, `MAX_ATTEMPTS`,
//! `CONTINUE_MIN_REMAINING_MS`, `n`, a tool call begun, reasoning only; a busy
//! continuation backed off; a refused one moving on; and a continuing request
//! that can go no further ending with its first cut's code.

use std::time::Duration;

use ladle::engine::upstream::continuation::Continuation;
use serde_json::{Value, json};

use super::{TEXT, continuing, gateway_over, gateway_over_two, written};
use crate::support::continuing::{CutBy, cut_after, rest_of, speaks, sse_chunks};
use crate::support::mock_upstream::*;
use crate::support::*;

/// A continuation's own stream that writes `text` and is then reset.
fn continuation_cut(text: &str) -> Script {
    sse(vec![data(&role()), data(&content(text)), Step::Reset])
}

/// The code of the error event a chat stream ended with.
fn error_event_code(body: &str) -> Value {
    let chunks = sse_chunks(body);
    let last = chunks.last().expect("an event");
    last["error"]["code"].clone()
}

#[tokio::test]
async fn past_max_continuations_the_request_ends_with_its_first_cuts_code() {
    let mock = MockUpstream::start().await;
    let second: String = TEXT.chars().skip(5).take(3).collect();
    mock.push([
        cut_after(&written(5), CutBy::BusyChunk),
        continuation_cut(&second),
    ]);
    let gateway = Gateway::options()
        .upstreams(vec![continuing("a", &mock, 0, Continuation::Prefix)])
        .adjust(|c| c.retry.max_continuations = 1)
        .start()
        .await;
    let body = gateway.chat(true).await.text().await.expect("body");
    assert_eq!(error_event_code(&body), "upstream_busy", "{body}");
    assert_eq!(streamed_text(&body), written(8));
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_continuation_cut_again_is_continued_again_with_the_longer_p() {
    let mock = MockUpstream::start().await;
    let second: String = TEXT.chars().skip(5).take(4).collect();
    mock.push([
        cut_after(&written(5), CutBy::Reset),
        continuation_cut(&second),
    ]);
    speaks(&mock, "prefix", TEXT);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], TEXT);
    let sent = mock.requests();
    assert_eq!(sent.len(), 3);
    let prefix_of = |i: usize| sent[i].body["messages"][1]["content"].clone();
    assert_eq!(
        (prefix_of(1), prefix_of(2)),
        (json!(written(5)), json!(written(9)))
    );
}

/// A change to a gateway's configuration.
type Adjust = fn(&mut ladle::config::Config);

#[tokio::test]
async fn no_continuation_past_max_attempts_min_remaining_or_with_none_allowed() {
    let limits: [(&str, Adjust); 3] = [
        ("max_attempts", |c| c.retry.max_attempts = 1),
        ("min_remaining", |c| {
            c.retry.continue_min_remaining = Duration::from_millis(2_900)
        }),
        ("max_continuations", |c| c.retry.max_continuations = 0),
    ];
    for (limit, adjust) in limits {
        let mock = MockUpstream::start().await;
        mock.push([cut_after(&written(5), CutBy::Reset)]);
        speaks(&mock, "prefix", TEXT);
        let gateway = Gateway::options()
            .upstreams(vec![continuing("a", &mock, 0, Continuation::Prefix)])
            .adjust(adjust)
            .start()
            .await;
        let body = gateway.chat(true).await.text().await.expect("body");
        assert_eq!(error_event_code(&body), "upstream_failed", "{limit}");
        assert_eq!(mock.requests().len(), 1, "{limit}");
    }
}

#[tokio::test]
async fn more_choices_a_tool_call_or_reasoning_only_are_never_continued() {
    let tool_call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function",
         "function": {"name": "find_recipe", "arguments": "{\"dish\":"}}]}}]});
    let cases = [
        (
            "n = 2",
            sse(vec![data(&content("番茄")), Step::Reset]),
            json!(2),
        ),
        (
            "a tool call",
            sse(vec![
                data(&content("我查一下")),
                data(&tool_call.to_string()),
                Step::Reset,
            ]),
            json!(1),
        ),
        (
            "reasoning only",
            sse(vec![data(&reasoning("先想想")), Step::Reset]),
            json!(1),
        ),
    ];
    for (case, cut, n) in cases {
        let mock = MockUpstream::start().await;
        mock.push([cut]);
        speaks(&mock, "prefix", TEXT);
        let gateway = gateway_over(&mock, Continuation::Prefix).await;
        let mut request = chat_body(true);
        request["n"] = n;
        let body = gateway
            .post("/v1/chat/completions", &request)
            .await
            .text()
            .await
            .expect("body");
        assert_eq!(error_event_code(&body), "upstream_failed", "{case}: {body}");
        assert_eq!(mock.requests().len(), 1, "{case}");
    }
}

#[tokio::test]
async fn a_busy_continuation_is_backed_off_and_continued_again() {
    let mock = MockUpstream::start().await;
    let prefix = written(7);
    let rest: String = TEXT.chars().skip(7).collect();
    mock.push([
        continuation_cut(&prefix),
        status(503, r#"{"error":{"message":"overloaded"}}"#),
        rest_of(&rest, false),
    ]);
    let gateway = Gateway::options()
        .upstreams(vec![continuing("a", &mock, 0, Continuation::Prefix)])
        .adjust(back_offs(80))
        .start()
        .await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], TEXT);
    let sent = mock.requests();
    assert_eq!(sent.len(), 3);
    assert!(sent[2].arrived - sent[1].arrived >= Duration::from_millis(75));
    assert!(
        sent[1].arrived - sent[0].arrived < Duration::from_millis(75),
        "the cut: at once"
    );
    for i in [1, 2] {
        assert_eq!(
            sent[i].body["messages"][1]["content"],
            prefix.as_str(),
            "same P"
        );
    }
    let metrics = gateway.metrics().await;
    let series = |s: &str| metric_value(&metrics, s);
    assert_eq!(
        series(r#"ladle_continuations_total{upstream="a",outcome="failed"}"#),
        Some(1.0)
    );
    assert_eq!(
        series(r#"ladle_continuations_total{upstream="a",outcome="ok"}"#),
        Some(1.0)
    );
}

#[tokio::test]
async fn a_refused_continuation_moves_on_to_the_next_upstream_that_continues() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.push([
        cut_after(&written(10), CutBy::Eof),
        status(400, r#"{"error":{"message":"prefix is a beta feature"}}"#),
    ]);
    speaks(&b, "prefix", TEXT);
    let gateway = gateway_over_two(&a, Continuation::Prefix, &b, Continuation::Prefix).await;
    let body = gateway.chat(true).await.text().await.expect("body");
    super::assert_one_whole_stream(&body, TEXT);
    assert_eq!((a.requests().len(), b.requests().len()), (2, 1));
    let metrics = gateway.metrics().await;
    let series = |s: &str| metric_value(&metrics, s);
    assert_eq!(
        series(r#"ladle_continuations_total{upstream="a",outcome="rejected"}"#),
        Some(1.0)
    );
    assert_eq!(
        series(r#"ladle_continuations_total{upstream="b",outcome="ok"}"#),
        Some(1.0)
    );
    let retries = metric_value(&metrics, r#"ladle_retries_total{reason="failed"}"#);
    assert_eq!(
        retries.unwrap_or_default(),
        0.0,
        "a continuation is no retry"
    );
}

#[tokio::test]
async fn with_every_upstream_refusing_the_request_ends_with_the_cuts_code() {
    let mock = MockUpstream::start().await;
    mock.push([
        cut_after(&written(10), CutBy::Eof),
        status(422, r#"{"error":{"message":"unknown field prefix"}}"#),
    ]);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let body = gateway.chat(true).await.text().await.expect("body");
    assert_eq!(error_event_code(&body), "upstream_failed", "{body}");
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_continued_answer_that_does_not_parse_ends_as_invalid_output_not_as_the_cut() {
    let mock = MockUpstream::start().await;
    let broken = r#"{"ideas": ["番茄炒蛋", 青椒土豆丝]}"#;
    let prefix: String = broken.chars().take(12).collect();
    mock.push([cut_after(&prefix, CutBy::Reset)]);
    speaks(&mock, "prefix", broken);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let (status, error) = error_of(
        gateway
            .post("/v1/tasks/fridge", &json!({"ingredients": ["鸡蛋"]}))
            .await,
    )
    .await;
    assert_eq!(
        (status, error["code"].clone()),
        (502, json!("invalid_output"))
    );
    assert_eq!(
        mock.requests().len(),
        2,
        "no restart: attempt 2 is not early's"
    );
}
