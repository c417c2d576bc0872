//! OpenAI chunk JSON → what the gateway needs to know about it.
//!
//! This is where the contract's definition of *output* lives: a non-empty
//! `delta.content`, `delta.reasoning_content`, `delta.reasoning` or
//! `delta.refusal`, or any part of a tool call, in any choice. Role-only deltas,
//! empty strings, usage-only chunks and `[DONE]` are not output.
//! A `usage` whose token counts are not integers in [0, 2^53) is dropped whole
//! (contract 10): it is never reported or counted. The module knows nothing of
//! HTTP or time, so it is tested on plain strings.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde_json::Value;

mod extra;

pub use extra::{Extra, ToolCallPiece};

/// What one SSE `data` payload says.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// `data: [DONE]`.
    Done,
    /// A chat completion chunk.
    Chunk(Chunk),
    /// A chunk carrying an `error` object, with its message.
    Error(String),
}

/// The parts of a chunk the gateway uses; the raw bytes are relayed separately.
/// The first choice of the chunk is held inline (nearly every chunk has one
/// choice); further ones (a request with `n` > 1) are in `more`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunk {
    /// The first choice (an empty one when the chunk has none).
    pub first: Choice,
    /// The chunk's other choices, if any.
    pub more: Vec<Choice>,
    /// `usage`, when the upstream reports it (boxed, as is `meta`: rare, and a
    /// chunk is moved a few times on its way to the client).
    pub usage: Option<Box<Value>>,
    /// The completion's `id` and `model`, when asked for.
    pub meta: Option<Box<Meta>>,
}

/// Identity of the upstream completion, kept for the non-streaming answer (and
/// in a kept answer's encoding: absent fields are left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(default)]
pub struct Meta {
    /// The upstream's completion id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The model that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The upstream's `system_fingerprint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_fingerprint: Option<String>,
}

/// One choice of a chunk.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Choice {
    /// Its `index`.
    pub index: u32,
    /// Non-empty `content`.
    pub content: Option<String>,
    /// Non-empty `reasoning_content` or `reasoning`.
    pub reasoning: Option<String>,
    /// Its `finish_reason`.
    pub finish_reason: Option<String>,
    /// Its refusal, tool-call pieces and log-probabilities, when it has any.
    pub extra: Option<Box<Extra>>,
}

impl Choice {
    /// Whether this choice's delta is output in the contract's sense.
    pub fn is_output(&self) -> bool {
        self.content.is_some()
            || self.reasoning.is_some()
            || self.extra.as_deref().is_some_and(Extra::is_output)
    }
}

impl Chunk {
    /// Whether this chunk is output in the contract's sense (in any choice).
    pub fn is_output(&self) -> bool {
        self.first.is_output() || self.more.iter().any(Choice::is_output)
    }

    /// Every choice of the chunk, the first one included.
    pub fn choices(&self) -> impl Iterator<Item = &Choice> {
        std::iter::once(&self.first).chain(&self.more)
    }
}

/// The payload is not a chat completion chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream sent a chunk that is not JSON: {0}")]
pub struct MalformedChunk(String);

#[derive(Deserialize)]
struct Wire<'a> {
    /// The first choice, and any others (rare) apart, so a one-choice chunk builds
    /// no `Vec`.
    #[serde(default, borrow, deserialize_with = "split_choices")]
    choices: (Option<WireChoice<'a>>, Vec<WireChoice<'a>>),
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    system_fingerprint: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default)]
    index: u32,
    #[serde(default, borrow, alias = "message")]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    logprobs: Option<Value>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    refusal: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<extra::WireToolCall<'a>>>,
}

/// Parses one SSE `data` payload (a stream chunk) or a whole non-streaming
/// `chat.completion` body: its `message` reads like a `delta`. serde_json reads
/// borrowed fields, so only the texts kept are copied (a hand-written scanner
/// for common chunks measured no faster: docs/performance.md).
pub fn parse(data: &[u8], want_meta: bool) -> Result<Parsed, MalformedChunk> {
    if data.trim_ascii() == b"[DONE]" {
        return Ok(Parsed::Done);
    }
    // One UTF-8 check of the whole payload; `from_str` then skips the check that
    // `from_slice` repeats for every key and string.
    let text = std::str::from_utf8(data).map_err(|e| MalformedChunk(e.to_string()))?;
    let wire: Wire<'_> = serde_json::from_str(text).map_err(|e| MalformedChunk(e.to_string()))?;
    if let Some(error) = wire.error.filter(|e| !e.is_null()) {
        return Ok(Parsed::Error(error_message(&error)));
    }
    let mut chunk = Chunk {
        usage: wire.usage.filter(counts_are_sound).map(Box::new),
        meta: want_meta.then(|| {
            Box::new(Meta {
                id: wire.id.map(Cow::into_owned),
                model: wire.model.map(Cow::into_owned),
                system_fingerprint: wire.system_fingerprint.map(Cow::into_owned),
            })
        }),
        ..Chunk::default()
    };
    let (first, more) = wire.choices;
    if let Some(first) = first {
        chunk.first = choice(first);
    }
    chunk.more = more.into_iter().map(choice).collect();
    Ok(Parsed::Chunk(chunk))
}

fn choice(wire: WireChoice<'_>) -> Choice {
    let text = |s: Option<Cow<'_, str>>| s.filter(|s| !s.is_empty()).map(Cow::into_owned);
    let (content, reasoning, extra) = match wire.delta {
        Some(delta) => (
            text(delta.content),
            text(delta.reasoning_content).or(text(delta.reasoning)),
            extra::extra(delta.refusal, delta.tool_calls, wire.logprobs),
        ),
        None => (None, None, extra::extra(None, None, wire.logprobs)),
    };
    Choice {
        index: wire.index,
        content,
        reasoning,
        finish_reason: wire.finish_reason.map(Cow::into_owned),
        extra,
    }
}

/// The largest token count believed: JSON's safe integers.
const MAX_TOKENS: u64 = 1 << 53;

/// Whether every `*_tokens` count in a usage report (nested ones too) is a JSON
/// integer in [0, 2^53): no fraction, no exponent, no sign.
fn counts_are_sound(usage: &Value) -> bool {
    match usage {
        Value::Object(fields) => fields.iter().all(|(name, value)| match value {
            Value::Object(_) => counts_are_sound(value),
            _ if name.ends_with("_tokens") => value
                .as_number()
                .is_some_and(|n| n.is_u64() && n.as_u64().is_some_and(|n| n < MAX_TOKENS)),
            _ => true,
        }),
        _ => false,
    }
}

/// The `choices` array as its first element and the rest. This runs once per
/// streamed chunk; the rest is usually empty, and an empty `Vec` allocates nothing.
fn split_choices<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(Option<WireChoice<'de>>, Vec<WireChoice<'de>>), D::Error> {
    struct Split;
    impl<'de> Visitor<'de> for Split {
        type Value = (Option<WireChoice<'de>>, Vec<WireChoice<'de>>);

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence or null")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok((None, Vec::new()))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element()?;
            let mut more = Vec::new();
            while let Some(choice) = seq.next_element()? {
                more.push(choice);
            }
            Ok((first, more))
        }
    }
    deserializer.deserialize_any(Split)
}

/// What an error JSON body (`{"error": {"message", "code", "type"}}`, or
/// `{"error": "text"}`) says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorFields {
    /// `error.message` (or the error's text).
    pub message: Option<String>,
    /// `error.code`, a string or a number.
    pub code: Option<String>,
    /// `error.type`.
    pub kind: Option<String>,
}

/// The fields of an error JSON body; `None` when the body is not one.
pub fn error_fields(body: &[u8]) -> Option<ErrorFields> {
    let value: Value = serde_json::from_slice(body).ok()?;
    match value.get("error")? {
        Value::String(message) => Some(ErrorFields {
            message: Some(message.clone()),
            ..ErrorFields::default()
        }),
        Value::Object(error) => {
            let text = |field: &str| match error.get(field) {
                Some(Value::String(text)) => Some(text.clone()),
                Some(Value::Number(number)) => Some(number.to_string()),
                _ => None,
            };
            Some(ErrorFields {
                message: text("message"),
                code: text("code"),
                kind: text("type"),
            })
        }
        _ => None,
    }
}

/// The human message of an `error` value, whatever its shape.
fn error_message(error: &Value) -> String {
    match error {
        Value::String(message) => message.clone(),
        Value::Object(fields) => match fields.get("message") {
            Some(Value::String(message)) => message.clone(),
            _ => error.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
