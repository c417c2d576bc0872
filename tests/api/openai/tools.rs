//! A `chat.completion` ladle assembles carries what the model did besides writing
//! text, as OpenAI assembles its own (contract 3.1): tool calls by index with
//! their arguments whole, a refusal, log-probabilities, the system fingerprint.

use std::time::Duration;

use serde_json::json;

use super::{finish_with, tool_chunk, tools_body, two_calls_assembled, two_tool_calls};
use crate::support::mock_upstream::*;
use crate::support::*;

/// The SSE text of `events`, sent in pieces cut every `every` bytes and once
/// inside the first `巴` (a three-byte character), each piece its own write.
fn cut_everywhere(events: &[String], every: usize) -> Script {
    let text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    let bytes = text.into_bytes();
    let inside = text_position(&bytes, "巴".as_bytes()) + 1;
    let mut cuts: Vec<usize> = (every..bytes.len()).step_by(every).collect();
    cuts.push(inside);
    cuts.sort_unstable();
    cuts.dedup();
    let mut steps = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        steps.push(Step::Send(bytes[from..cut].to_vec()));
        steps.push(Step::Pause(Duration::from_millis(1)));
        from = cut;
    }
    sse(steps)
}

fn text_position(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the needle is there")
}

#[tokio::test]
async fn several_tool_calls_are_assembled_by_index_whatever_the_bytes_are_cut_at() {
    let app = Gateway::start().await;
    app.upstream().push([cut_everywhere(&two_tool_calls(), 23)]);
    let response = app.post("/v1/chat/completions", &tools_body(false)).await;
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    let choice = &body["choices"][0];
    assert_eq!(
        choice["message"]["tool_calls"],
        two_calls_assembled(),
        "{body}"
    );
    assert_eq!(
        choice["message"]["content"],
        json!(null),
        "only tools were called"
    );
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["logprobs"], json!(null), "none came");
    assert_eq!(body["system_fingerprint"], "fp_t");
    // The tools went to the upstream as the caller wrote them.
    let sent = &app.upstream().requests()[0].body;
    assert_eq!(sent["tools"], tools_body(false)["tools"]);
}

#[tokio::test]
async fn content_then_a_tool_call_keeps_both_and_a_missing_type_is_function() {
    let app = Gateway::start().await;
    let untyped = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_x", "function": {"name": "lookup", "arguments": "{}"}}]}}]});
    app.upstream().push([sse(vec![
        data(&role()),
        data(&content("让我查一下。")),
        data(&untyped.to_string()),
        data(&finish_with("tool_calls")),
        data("[DONE]"),
    ])]);
    let body = json_of(app.post("/v1/chat/completions", &tools_body(false)).await).await;
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], "让我查一下。");
    assert_eq!(
        message["tool_calls"],
        json!([{"id": "call_x", "type": "function",
                "function": {"name": "lookup", "arguments": "{}"}}])
    );
}

#[tokio::test]
async fn a_refusal_and_its_logprobs_are_kept_with_null_content() {
    let app = Gateway::start().await;
    let piece = |text: &str, token: &str| {
        json!({"choices": [{"index": 0, "delta": {"refusal": text},
            "logprobs": {"content": null,
                         "refusal": [{"token": token, "logprob": -0.5, "bytes": [1], "top_logprobs": []}]}}]})
        .to_string()
    };
    app.upstream().push([sse(vec![
        data(&role()),
        data(&piece("抱歉，", "抱歉")),
        data(&piece("这个不行。", "这个")),
        data(&finish()),
        data("[DONE]"),
    ])]);
    let body = json_of(app.chat(false).await).await;
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["refusal"], "抱歉，这个不行。");
    assert_eq!(choice["message"]["content"], json!(null));
    assert_eq!(choice["logprobs"]["content"], json!(null));
    let tokens: Vec<&str> = choice["logprobs"]["refusal"]
        .as_array()
        .expect("the refusal's logprobs")
        .iter()
        .filter_map(|l| l["token"].as_str())
        .collect();
    assert_eq!(tokens, ["抱歉", "这个"]);
}

#[tokio::test]
async fn content_logprobs_are_concatenated_in_order() {
    let app = Gateway::start().await;
    let piece = |text: &str| {
        json!({"choices": [{"index": 0, "delta": {"content": text},
            "logprobs": {"content": [{"token": text, "logprob": -0.1, "bytes": [], "top_logprobs": []}]}}]})
        .to_string()
    };
    app.upstream().push([sse(vec![
        data(&piece("番")),
        data(&piece("茄")),
        data(&finish()),
        data("[DONE]"),
    ])]);
    let body = json_of(app.chat(false).await).await;
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["content"], "番茄");
    let tokens: Vec<&str> = choice["logprobs"]["content"]
        .as_array()
        .expect("logprobs")
        .iter()
        .filter_map(|l| l["token"].as_str())
        .collect();
    assert_eq!(tokens, ["番", "茄"]);
}

#[tokio::test]
async fn a_tool_calls_arguments_count_toward_max_answer_bytes() {
    let app = Gateway::with(|config| config.max_answer_bytes = 64).await;
    let long = "x".repeat(80);
    app.upstream().push([sse(vec![
        data(&tool_chunk(0, Some(("call_a", "f")), &long)),
        data(&finish_with("tool_calls")),
        data("[DONE]"),
    ])]);
    let (status, body) = error_of(app.post("/v1/chat/completions", &tools_body(false)).await).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (502, Some("upstream_failed"))
    );
}

#[tokio::test]
async fn an_upstream_that_ignores_stream_gives_its_tool_calls_in_either_shape() {
    let whole = json!({"id": "chatcmpl-w", "object": "chat.completion", "model": "m",
        "system_fingerprint": "fp_w",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": two_calls_assembled()}}]})
    .to_string();
    let app = Gateway::start().await;
    app.upstream()
        .push([status(200, &whole), status(200, &whole)]);
    let body = json_of(app.post("/v1/chat/completions", &tools_body(false)).await).await;
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"],
        two_calls_assembled()
    );
    assert_eq!(body["system_fingerprint"], "fp_w");
    let streamed = app.post("/v1/chat/completions", &tools_body(true)).await;
    let text = streamed.text().await.expect("a stream");
    let events = sse_events(&text);
    let chunk: serde_json::Value = serde_json::from_str(&events[0].1).expect("a chunk");
    let calls = &chunk["choices"][0]["delta"]["tool_calls"];
    assert_eq!(calls[1]["index"], 1, "{chunk}");
    assert_eq!(calls[1]["function"]["arguments"], "{\"city\":\"东京\"}");
    assert_eq!(chunk["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(events.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
}

#[tokio::test]
async fn a_kept_answer_is_replayed_with_its_tool_calls() {
    let app = Gateway::start().await;
    app.upstream()
        .push([sse(two_tool_calls().iter().map(|e| data(e)).collect())]);
    let send = || {
        app.post_request("/v1/chat/completions", &tools_body(false))
            .header("idempotency-key", "tools-1")
            .send()
    };
    let first = json_of(send().await.expect("answers")).await;
    let again = send().await.expect("answers");
    assert!(replayed(&again));
    let again = json_of(again).await;
    assert_eq!(
        again["choices"][0]["message"]["tool_calls"],
        two_calls_assembled()
    );
    assert_eq!(again["choices"], first["choices"]);
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_kept_stream_is_replayed_as_chunks_with_its_tool_calls() {
    let app = Gateway::start().await;
    app.upstream()
        .push([sse(two_tool_calls().iter().map(|e| data(e)).collect())]);
    let send = || {
        app.post_request("/v1/chat/completions", &tools_body(true))
            .header("idempotency-key", "tools-stream-1")
            .send()
    };
    let first = send()
        .await
        .expect("answers")
        .text()
        .await
        .expect("a stream");
    assert!(first.contains("call_b"), "{first}");
    let again = send().await.expect("answers");
    assert!(replayed(&again));
    let text = again.text().await.expect("a stream");
    let events = sse_events(&text);
    let chunk: serde_json::Value = serde_json::from_str(&events[0].1).expect("a chunk");
    let calls = &chunk["choices"][0]["delta"]["tool_calls"];
    assert_eq!(
        calls[0]["function"]["arguments"], "{\"city\":\"巴黎\"}",
        "{text}"
    );
    assert_eq!(calls[1]["index"], 1);
    assert_eq!(calls[1]["id"], "call_b");
    assert_eq!(events.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
    assert_eq!(app.upstream().requests().len(), 1);
}
