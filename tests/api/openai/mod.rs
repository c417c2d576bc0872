//! The chat route as a drop-in for every OpenAI client (contract 2, 3, 3.1, 3.4):
//! tool calls, refusals and log-probabilities assembled and relayed, the
//! upstream's status kept where a client's error class depends on it, the model
//! list, and the official SDKs as the oracle.

mod models;
mod replicas;
mod responses;
mod responses_stored;
mod sdk;
mod statuses;
mod streamed;
mod tools;

use serde_json::{Value, json};

/// A chunk carrying one piece of a tool call: with `head` its first piece (id,
/// type and name), else more of its arguments.
pub fn tool_chunk(index: u32, head: Option<(&str, &str)>, arguments: &str) -> String {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some((id, name)) = head {
        call["id"] = id.into();
        call["type"] = "function".into();
        call["function"]["name"] = name.into();
    }
    json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "model": "test-model",
           "system_fingerprint": "fp_t",
           "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
    .to_string()
}

/// A chunk that ends the first choice with `reason`.
pub fn finish_with(reason: &str) -> String {
    json!({"id": "chatcmpl-t", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    .to_string()
}

/// The chat body with a `get_weather` tool.
pub fn tools_body(stream: bool) -> Value {
    json!({
        "messages": [{"role": "user", "content": "巴黎和东京的天气？"}],
        "stream": stream,
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    })
}

/// The data events of two tool calls whose arguments are split mid-word and
/// interleaved by index: `{"city":"巴黎"}` and `{"city":"东京"}`.
pub fn two_tool_calls() -> Vec<String> {
    vec![
        tool_chunk(0, Some(("call_a", "get_weather")), ""),
        tool_chunk(0, None, "{\"ci"),
        tool_chunk(1, Some(("call_b", "get_weather")), "{\"city\":"),
        tool_chunk(0, None, "ty\":\"巴黎\"}"),
        tool_chunk(1, None, "\"东京\"}"),
        finish_with("tool_calls"),
        "[DONE]".to_owned(),
    ]
}

/// The two calls of `two_tool_calls`, as a `chat.completion` lists them.
pub fn two_calls_assembled() -> Value {
    json!([
        {"id": "call_a", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"巴黎\"}"}},
        {"id": "call_b", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"东京\"}"}},
    ])
}

/// The messages a second turn sends upstream after the first: the question,
/// the stored answer, the follow-up (the instructions left out).
pub fn second_turn_messages() -> Value {
    json!([{"role": "user", "content": "番茄炒蛋怎么做？"},
           {"role": "assistant", "content": "先炒蛋再炒番茄"},
           {"role": "user", "content": "再简单一点"}])
}
