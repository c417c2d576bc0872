//! The OpenAI wire format, written in one place: the `chat.completion` body, a
//! stream chunk made from a whole answer, a finished answer as a chunk stream,
//! and the framing of events.

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

use crate::engine::completion::Finished;
use crate::engine::completion::answer::{Answer, ChoiceAnswer, Gather, ToolCall};
use crate::engine::upstream::chunk::Chunk;

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

/// What names a chat answer: its id (the upstream's, or one made of the
/// request's) and its model (the upstream's, or the one asked for).
pub struct ChatNames<'a> {
    /// The request's id.
    pub request_id: &'a str,
    /// The model asked for.
    pub model: &'a str,
    /// `created` (Unix seconds).
    pub created: u64,
}

impl ChatNames<'_> {
    fn id(&self, finished: &Finished) -> String {
        let id = finished.meta.id.clone();
        id.unwrap_or_else(|| format!("chatcmpl-{}", self.request_id))
    }

    fn model<'f>(&'f self, finished: &'f Finished) -> &'f str {
        finished.meta.model.as_deref().unwrap_or(self.model)
    }
}

/// The `chat.completion` object for a finished completion: every choice apart,
/// in `index` order, each with its own finish reason.
pub fn completion_body(finished: &Finished, names: &ChatNames<'_>) -> Value {
    let choices = in_order(finished);
    let choices: Vec<Value> = match choices.is_empty() {
        true => vec![choice_body(&ChoiceAnswer::default())],
        false => choices.into_iter().map(choice_body).collect(),
    };
    let mut body = json!({
        "id": names.id(finished),
        "object": "chat.completion",
        "created": names.created,
        "model": names.model(finished),
        "choices": choices,
    });
    if let Some(fingerprint) = &finished.meta.system_fingerprint {
        body["system_fingerprint"] = fingerprint.as_str().into();
    }
    if let Some(usage) = &finished.usage {
        body["usage"] = usage.clone();
    }
    body
}

/// A finished answer's choices, by `index`.
fn in_order(finished: &Finished) -> Vec<&ChoiceAnswer> {
    let mut choices: Vec<&ChoiceAnswer> = finished.choices.iter().collect();
    choices.sort_by_key(|choice| choice.index);
    choices
}

/// A whole choice as a stream chunk's, with `finish_reason` (`null` while
/// another chunk follows with it).
fn delta_choice(choice: &ChoiceAnswer, finish_reason: Value) -> Value {
    json!({
        "index": choice.index,
        "delta": message(choice, true),
        "logprobs": logprobs(choice),
        "finish_reason": finish_reason,
    })
}

fn choice_body(choice: &ChoiceAnswer) -> Value {
    json!({
        "index": choice.index,
        "message": message(choice, false),
        "logprobs": logprobs(choice),
        "finish_reason": choice.finish_reason.as_deref().unwrap_or("stop"),
    })
}

/// A whole choice as a `chat.completion` message or (`as_delta`) as the one
/// delta of a stream that carries it whole: the same fields, but a delta's tool
/// calls name their `index`. `content` is `null` when the model only called tools
/// or refused, as OpenAI's is.
fn message(choice: &ChoiceAnswer, as_delta: bool) -> Value {
    let content = match choice.content_is_null() {
        true => Value::Null,
        false => choice.content.as_str().into(),
    };
    let mut message = json!({"role": "assistant", "content": content});
    if !choice.reasoning.is_empty() {
        message["reasoning_content"] = choice.reasoning.as_str().into();
    }
    if !choice.refusal.is_empty() {
        message["refusal"] = choice.refusal.as_str().into();
    }
    if !choice.tool_calls.is_empty() {
        let calls = choice.tool_calls_in_order().into_iter();
        message["tool_calls"] = calls
            .map(|call| tool_call(call, as_delta.then_some(call.index)))
            .collect();
    }
    message
}

/// A tool call as a message lists it, or (with its `index`) as a delta does.
fn tool_call(call: &ToolCall, index: Option<u32>) -> Value {
    let mut body = json!({
        "id": call.id,
        "type": call.kind(),
        "function": {"name": call.name, "arguments": call.arguments},
    });
    if let Some(index) = index {
        body["index"] = index.into();
    }
    body
}

/// A choice's `logprobs`: `null` when none came.
fn logprobs(choice: &ChoiceAnswer) -> Value {
    match &choice.logprobs {
        Some(logprobs) => json!({"content": logprobs.content, "refusal": logprobs.refusal}),
        None => Value::Null,
    }
}

/// Every choice of a whole answer, as assembled (a whole answer is never cut).
fn assembled(chunk: &Chunk) -> Answer {
    let mut answer = Answer::new(Gather::Whole(usize::MAX));
    // No bound: the answer was read whole within the upstream body's own bound.
    let _ = answer.absorb(chunk);
    answer.choices.sort_by_key(|choice| choice.index);
    answer
}

/// An OpenAI stream chunk carrying a whole non-streaming answer (an upstream that
/// ignored `stream`), for a streaming client: every choice in one chunk.
pub fn whole_as_chunk(chunk: &Chunk) -> Bytes {
    let answer = assembled(chunk);
    let choices: Vec<Value> = answer
        .choices
        .iter()
        .map(|choice| {
            let reason = choice.finish_reason.as_deref().unwrap_or("stop");
            delta_choice(choice, reason.into())
        })
        .collect();
    let meta = chunk.meta.clone().unwrap_or_default();
    let mut body = json!({
        "id": meta.id,
        "object": "chat.completion.chunk",
        "model": meta.model,
        "choices": choices,
    });
    if let Some(fingerprint) = meta.system_fingerprint {
        body["system_fingerprint"] = fingerprint.into();
    }
    if let Some(usage) = &chunk.usage {
        body["usage"] = Value::clone(usage);
    }
    Bytes::from(body.to_string())
}

/// A finished answer as a stream (a kept one, replayed): every choice's message
/// in one chunk, the finish reasons and usage in the next, then `[DONE]`.
pub fn finished_as_chunks(finished: &Finished, names: &ChatNames<'_>) -> Bytes {
    let mut deltas = Vec::new();
    let mut finishes = Vec::new();
    for choice in in_order(finished) {
        deltas.push(delta_choice(choice, Value::Null));
        let reason = choice.finish_reason.as_deref().unwrap_or("stop");
        finishes.push(json!({"index": choice.index, "delta": {}, "finish_reason": reason}));
    }
    let (id, model) = (names.id(finished), names.model(finished));
    let chunk = |choices: Vec<Value>| {
        let mut chunk = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": names.created,
            "model": model,
            "choices": choices,
        });
        if let Some(fingerprint) = &finished.meta.system_fingerprint {
            chunk["system_fingerprint"] = fingerprint.as_str().into();
        }
        chunk
    };
    let first = chunk(deltas);
    let mut last = chunk(finishes);
    if let Some(usage) = &finished.usage {
        last["usage"] = usage.clone();
    }
    let mut out = BytesMut::new();
    put_event(&mut out, first.to_string().as_bytes());
    put_event(&mut out, last.to_string().as_bytes());
    out.extend_from_slice(DONE);
    out.freeze()
}
