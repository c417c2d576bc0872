//! Streamed tool calls and refusals are output (contract 2): relayed as they
//! come, they commit the stream, and the first-output timer stops at them.

use std::time::Duration;

use serde_json::Value;

use super::{tool_chunk, tools_body, two_calls_assembled, two_tool_calls};
use crate::support::mock_upstream::*;
use crate::support::*;

#[tokio::test]
async fn a_tool_call_commits_the_stream_and_is_relayed_before_the_upstream_goes_quiet() {
    // The upstream names a call, then says nothing more: its idle timeout fails
    // the attempt. The call was output, so the client already has it, and the
    // stream ends with an error event instead of a retry behind its back.
    let app = Gateway::start().await;
    app.upstream().push([sse(vec![
        data(&role()),
        data(&tool_chunk(0, Some(("call_a", "get_weather")), "{\"ci")),
        Step::Stall,
    ])]);
    let response = app.post("/v1/chat/completions", &tools_body(true)).await;
    assert_eq!(response.status(), 200, "committed at the tool call");
    let text = response.text().await.expect("a stream");
    let events = sse_events(&text);
    let data: Vec<Value> = events
        .iter()
        .filter_map(|(_, d)| serde_json::from_str(d).ok())
        .collect();
    assert_eq!(
        data[0]["choices"][0]["delta"]["role"], "assistant",
        "held, then sent first"
    );
    let call = &data[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(
        call["id"], "call_a",
        "relayed as the upstream sent it: {text}"
    );
    assert_eq!(call["function"]["arguments"], "{\"ci");
    assert_eq!(
        data.last().expect("an end")["error"]["code"],
        "upstream_failed"
    );
    assert_eq!(
        app.upstream().requests().len(),
        1,
        "nothing retried after output"
    );
}

#[tokio::test]
async fn the_first_output_timeout_stops_at_a_tool_call_only_answer() {
    let app =
        Gateway::with(|config| config.timeouts.first_output = Some(Duration::from_millis(100)))
            .await;
    let mut steps: Vec<Step> = vec![data(&role())];
    for (n, event) in two_tool_calls().iter().enumerate() {
        if n == 1 {
            // Past the first-output timeout, within the idle timeout.
            steps.push(Step::Pause(Duration::from_millis(200)));
        }
        steps.push(data(event));
    }
    app.upstream().push([sse(steps)]);
    let response = app.post("/v1/chat/completions", &tools_body(false)).await;
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"],
        two_calls_assembled()
    );
    assert_eq!(app.upstream().requests().len(), 1, "one attempt");
}

#[tokio::test]
async fn a_streamed_refusal_commits_the_stream() {
    let app = Gateway::start().await;
    let refusal = serde_json::json!({"choices": [{"index": 0, "delta": {"refusal": "不行"}}]});
    app.upstream().push([sse(vec![
        data(&role()),
        data(&refusal.to_string()),
        Step::Stall,
    ])]);
    let response = app.chat(true).await;
    assert_eq!(response.status(), 200, "a refusal is output");
    let text = response.text().await.expect("a stream");
    assert!(text.contains("\"refusal\":\"不行\""), "{text}");
}
