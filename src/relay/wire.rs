//! The OpenAI wire format, written in one place: the `chat.completion` body, a
//! stream chunk made from a whole answer, a kept answer as a chunk stream, and the
//! framing of events.

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

use crate::completion::Finished;
use crate::upstream::chunk::Chunk;

/// The end marker of an OpenAI stream.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// A keep-alive comment (contract 6.4).
pub const COMMENT: &[u8] = b": keep-alive\n\n";

/// Appends one `data:` event around a payload.
pub fn put_event(out: &mut BytesMut, payload: &[u8]) {
    out.reserve(payload.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\n\n");
}

/// The `chat.completion` object for a finished completion.
pub fn completion_body(finished: &Finished, request_id: &str, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": finished.content});
    if !finished.reasoning.is_empty() {
        message["reasoning_content"] = finished.reasoning.as_str().into();
    }
    let mut body = json!({
        "id": finished.meta.id.clone().unwrap_or_else(|| format!("chatcmpl-{request_id}")),
        "object": "chat.completion",
        "created": unix_seconds(),
        "model": finished.meta.model.as_deref().unwrap_or(model),
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finished.finish_reason.as_deref().unwrap_or("stop"),
        }],
    });
    if let Some(usage) = &finished.usage {
        body["usage"] = usage.clone();
    }
    body
}

/// An OpenAI stream chunk carrying a whole non-streaming answer (an upstream that
/// ignored `stream`), for a streaming client.
pub fn whole_as_chunk(chunk: &Chunk) -> Bytes {
    let meta = chunk.meta.clone().unwrap_or_default();
    let mut delta = json!({"role": "assistant", "content": chunk.content.as_deref().unwrap_or("")});
    if let Some(reasoning) = &chunk.reasoning {
        delta["reasoning_content"] = reasoning.as_str().into();
    }
    let mut body = json!({
        "id": meta.id,
        "object": "chat.completion.chunk",
        "model": meta.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": chunk.finish_reason}],
    });
    if let Some(usage) = &chunk.usage {
        body["usage"] = Value::clone(usage);
    }
    Bytes::from(body.to_string())
}

/// A kept `chat.completion` as a stream: the message in one chunk, the finish
/// reason and usage in the next, then `[DONE]`.
pub fn kept_as_chunks(kept: &Value) -> Bytes {
    let choice = &kept["choices"][0];
    let message = &choice["message"];
    let mut delta = json!({"role": "assistant", "content": message["content"]});
    if let Some(reasoning) = message.get("reasoning_content") {
        delta["reasoning_content"] = reasoning.clone();
    }
    let chunk = |choice: Value| {
        json!({
            "id": kept["id"],
            "object": "chat.completion.chunk",
            "created": kept["created"],
            "model": kept["model"],
            "choices": [choice],
        })
    };
    let first = chunk(json!({"index": 0, "delta": delta, "finish_reason": null}));
    let mut last =
        chunk(json!({"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}));
    if let Some(usage) = kept.get("usage") {
        last["usage"] = usage.clone();
    }
    let mut out = BytesMut::new();
    put_event(&mut out, first.to_string().as_bytes());
    put_event(&mut out, last.to_string().as_bytes());
    out.extend_from_slice(DONE);
    out.freeze()
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
