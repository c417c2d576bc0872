//! Each dialect's continuation body, exactly: the first attempt's body with
//! `P` (every character received, Chinese split across reads included, never
//! the reasoning) as a trailing assistant message of that dialect.

use ladle::engine::upstream::continuation::Continuation;
use serde_json::{Value, json};

use super::{TEXT, assert_one_whole_stream, gateway_over, written};
use crate::support::continuing::{CutBy, cut_after, speaks};
use crate::support::mock_upstream::*;
use crate::support::*;

/// The body a continuation in `dialect` must send after `first`, with `prefix`.
fn expected_body(first: &Value, dialect: &str, prefix: &str) -> Value {
    let mut body = first.clone();
    let message = match dialect {
        "prefix" => json!({"role": "assistant", "content": prefix, "prefix": true}),
        "partial" => json!({"role": "assistant", "content": prefix, "partial": true}),
        _ => json!({"role": "assistant", "content": prefix}),
    };
    body["messages"]
        .as_array_mut()
        .expect("messages")
        .push(message);
    if dialect == "continue_final_message" {
        body["continue_final_message"] = true.into();
        body["add_generation_prompt"] = false.into();
    }
    body
}

#[tokio::test]
async fn each_dialect_gets_p_byte_for_byte_and_the_stream_goes_on_as_one() {
    for dialect in Continuation::WORDS.into_iter().filter(|w| *w != "none") {
        let mock = MockUpstream::start().await;
        let prefix = written(13);
        mock.push([cut_after(&prefix, CutBy::Reset)]);
        speaks(&mock, dialect, TEXT);
        let gateway = gateway_over(&mock, Continuation::parse(dialect).expect("a word")).await;
        let response = gateway.chat(true).await;
        assert_eq!(response.status(), 200);
        let body = response.text().await.expect("body");
        assert_one_whole_stream(&body, TEXT);
        let sent = mock.requests();
        assert_eq!(sent.len(), 2, "{dialect}");
        assert_eq!(
            sent[1].body,
            expected_body(&sent[0].body, dialect, &prefix),
            "{dialect}"
        );
    }
}

#[tokio::test]
async fn the_reasoning_is_never_in_p() {
    let mock = MockUpstream::start().await;
    mock.push([sse(vec![
        data(&role()),
        data(&reasoning("先想想火候")),
        data(&content("番茄炒蛋")),
        data(&reasoning("再想想调味")),
        data(&content("：先把")),
        Step::Reset,
    ])]);
    speaks(&mock, "prefix", TEXT);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let body = json_of(gateway.chat(false).await).await;
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], TEXT);
    assert_eq!(message["reasoning_content"], "先想想火候再想想调味");
    let sent = mock.requests();
    let last = sent[1].body["messages"]
        .as_array()
        .and_then(|m| m.last().cloned());
    assert_eq!(
        last,
        Some(json!({"role": "assistant", "content": "番茄炒蛋：先把", "prefix": true}))
    );
}
