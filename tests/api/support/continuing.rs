//! Upstreams that continue a prefix, as DeepSeek, Kimi and vLLM do (contract
//! 11.4): each knows the text it was going to write, reads the trailing
//! assistant message of its own dialect, and writes the rest of that text. A
//! prefix that is not the start of it, or another dialect's marker, gets a 400,
//! as a provider that takes no such message answers. And the streams that cut
//! such a text, one per failure kind.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::fixtures::pieces;
use super::mock_upstream::*;

/// How a stream is cut after its first pieces of content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutBy {
    /// A TCP reset.
    Reset,
    /// The body ends, with no `[DONE]` and no `finish_reason`.
    Eof,
    /// Silence until ladle's idle timeout.
    Silence,
    /// An `error` chunk without a busy keyword.
    ErrorChunk,
    /// An `error` chunk with one.
    BusyChunk,
    /// A chunk that is not JSON.
    NotJson,
}

impl CutBy {
    /// Every kind of cut that 11.4 continues.
    pub const ALL: [CutBy; 6] = [
        CutBy::Reset,
        CutBy::Eof,
        CutBy::Silence,
        CutBy::ErrorChunk,
        CutBy::BusyChunk,
        CutBy::NotJson,
    ];
}

/// The id, model and `created` of the stream a cut begins.
pub const FIRST_ID: &str = "chatcmpl-first";
const FIRST_MODEL: &str = "first-model";

/// A chunk of a stream named `id` and `model`, with `delta`.
pub fn named_chunk(id: &str, model: &str, created: u64, delta: Value) -> String {
    json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    .to_string()
}

/// A stream that writes `written` (the role first, then pieces of 3
/// characters, its bytes sent in pieces of 5 so that characters are split
/// across reads) and is then cut `by`.
pub fn cut_after(written: &str, by: CutBy) -> Script {
    let mut text = format!(
        "data: {}\n\n",
        named_chunk(
            FIRST_ID,
            FIRST_MODEL,
            1_700_000_000,
            json!({"role": "assistant", "content": ""})
        )
    );
    for piece in pieces(written, 3) {
        let chunk = named_chunk(
            FIRST_ID,
            FIRST_MODEL,
            1_700_000_000,
            json!({"content": piece}),
        );
        text.push_str(&format!("data: {chunk}\n\n"));
    }
    let mut steps = vec![head(200, "text/event-stream", "")];
    for bytes in text.as_bytes().chunks(5) {
        steps.push(Step::Send(bytes.to_vec()));
        steps.push(Step::Pause(Duration::from_millis(1)));
    }
    steps.extend(match by {
        CutBy::Reset => vec![Step::Reset],
        CutBy::Eof => vec![],
        CutBy::Silence => vec![Step::Stall],
        CutBy::ErrorChunk => vec![data(r#"{"error":{"message":"internal error"}}"#)],
        CutBy::BusyChunk => vec![data(
            r#"{"error":{"message":"当前模型访问量较大，请稍后重试"}}"#,
        )],
        CutBy::NotJson => vec![data("{not json")],
    });
    Script(steps)
}

/// The prefix a request carries and the dialect it is written in, when its
/// last message is an assistant's continuation.
pub fn sent_prefix(body: &Value) -> Option<(&'static str, String)> {
    let last = body["messages"].as_array()?.last()?;
    if last["role"] != "assistant" {
        return None;
    }
    let dialect = if last["prefix"] == true {
        "prefix"
    } else if last["partial"] == true {
        "partial"
    } else if body["continue_final_message"] == true {
        "continue_final_message"
    } else {
        return None;
    };
    Some((dialect, last["content"].as_str()?.to_owned()))
}

/// Makes `mock` continue `text` in `dialect`: the rest after the prefix it is
/// sent, under an id, model and `created` of its own; with the usage it was
/// asked for (`prompt_tokens` 10, `completion_tokens` the rest's characters).
pub fn speaks(mock: &MockUpstream, dialect: &'static str, text: &str) {
    let text = text.to_owned();
    mock.respond_with(Arc::new(move |body: &Value| {
        let (sent_in, prefix) = sent_prefix(body)?;
        let rest = text
            .strip_prefix(prefix.as_str())
            .filter(|_| sent_in == dialect);
        let Some(rest) = rest else {
            return Some(status(
                400,
                r#"{"error":{"message":"this continuation is not one this model takes"}}"#,
            ));
        };
        let usage = body["stream_options"]["include_usage"] == true;
        Some(rest_of(rest, usage))
    }));
}

/// The rest of a continued text, as a whole stream of another completion.
pub fn rest_of(rest: &str, usage: bool) -> Script {
    let (id, model, created) = ("cont-second", "second-model", 1_700_000_099);
    let mut steps = vec![data(&named_chunk(
        id,
        model,
        created,
        json!({"role": "assistant", "content": ""}),
    ))];
    for piece in pieces(rest, 4) {
        steps.push(data(&named_chunk(
            id,
            model,
            created,
            json!({"content": piece}),
        )));
    }
    steps.push(data(
        &json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        .to_string(),
    ));
    if usage {
        let completion = rest.chars().count();
        steps.push(data(
            &json!({"id": id, "object": "chat.completion.chunk", "created": created,
                    "model": model, "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": completion,
                              "total_tokens": 10 + completion}})
            .to_string(),
        ));
    }
    steps.push(data("[DONE]"));
    sse(steps)
}

/// The JSON chunks of an OpenAI stream, `[DONE]` left out.
pub fn sse_chunks(body: &str) -> Vec<Value> {
    super::answers::sse_events(body)
        .iter()
        .filter(|(_, data)| data != "[DONE]")
        .map(|(_, data)| serde_json::from_str(data).expect("a JSON chunk"))
        .collect()
}
