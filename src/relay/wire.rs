//! The OpenAI wire format, written in one place: the `chat.completion` body, a
//! stream chunk made from a whole answer, a kept answer as a chunk stream, and the
//! framing of events.

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

use crate::completion::Finished;
use crate::completion::answer::ChoiceAnswer;
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

/// The `chat.completion` object for a finished completion: every choice apart,
/// in `index` order, each with its own finish reason.
pub fn completion_body(finished: &Finished, request_id: &str, model: &str) -> Value {
    let mut choices: Vec<&ChoiceAnswer> = finished.choices.iter().collect();
    choices.sort_by_key(|choice| choice.index);
    let choices: Vec<Value> = match choices.is_empty() {
        true => vec![choice_body(&ChoiceAnswer::default())],
        false => choices.into_iter().map(choice_body).collect(),
    };
    let mut body = json!({
        "id": finished.meta.id.clone().unwrap_or_else(|| format!("chatcmpl-{request_id}")),
        "object": "chat.completion",
        "created": unix_seconds(),
        "model": finished.meta.model.as_deref().unwrap_or(model),
        "choices": choices,
    });
    if let Some(usage) = &finished.usage {
        body["usage"] = usage.clone();
    }
    body
}

fn choice_body(choice: &ChoiceAnswer) -> Value {
    let mut message = json!({"role": "assistant", "content": choice.content});
    if !choice.reasoning.is_empty() {
        message["reasoning_content"] = choice.reasoning.as_str().into();
    }
    json!({
        "index": choice.index,
        "message": message,
        "finish_reason": choice.finish_reason.as_deref().unwrap_or("stop"),
    })
}

/// An OpenAI stream chunk carrying a whole non-streaming answer (an upstream that
/// ignored `stream`), for a streaming client: every choice in one chunk.
pub fn whole_as_chunk(chunk: &Chunk) -> Bytes {
    let meta = chunk.meta.clone().unwrap_or_default();
    let finish = |index: u32| {
        let reason = match index == chunk.index {
            true => chunk.finish_reason.as_deref(),
            false => chunk
                .more
                .iter()
                .find(|c| c.index == index)
                .and_then(|c| c.finish_reason.as_deref()),
        };
        reason.unwrap_or("stop").to_owned()
    };
    let choices: Vec<Value> = chunk
        .choices()
        .map(|(index, content, reasoning)| {
            let mut delta = json!({"role": "assistant", "content": content.unwrap_or("")});
            if let Some(reasoning) = reasoning {
                delta["reasoning_content"] = reasoning.into();
            }
            json!({"index": index, "delta": delta, "finish_reason": finish(index)})
        })
        .collect();
    let mut body = json!({
        "id": meta.id,
        "object": "chat.completion.chunk",
        "model": meta.model,
        "choices": choices,
    });
    if let Some(usage) = &chunk.usage {
        body["usage"] = Value::clone(usage);
    }
    Bytes::from(body.to_string())
}

/// A kept `chat.completion` as a stream: every choice's message in one chunk, the
/// finish reasons and usage in the next, then `[DONE]`.
pub fn kept_as_chunks(kept: &Value) -> Bytes {
    let kept_choices = kept["choices"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut deltas = Vec::new();
    let mut finishes = Vec::new();
    for choice in kept_choices {
        let message = &choice["message"];
        let mut delta = json!({"role": "assistant", "content": message["content"]});
        if let Some(reasoning) = message.get("reasoning_content") {
            delta["reasoning_content"] = reasoning.clone();
        }
        let index = &choice["index"];
        deltas.push(json!({"index": index, "delta": delta, "finish_reason": null}));
        finishes
            .push(json!({"index": index, "delta": {}, "finish_reason": choice["finish_reason"]}));
    }
    let chunk = |choices: Vec<Value>| {
        json!({
            "id": kept["id"],
            "object": "chat.completion.chunk",
            "created": kept["created"],
            "model": kept["model"],
            "choices": choices,
        })
    };
    let first = chunk(deltas);
    let mut last = chunk(finishes);
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
