//! OpenAI chunk JSON → what the gateway needs to know about it.
//!
//! This is where the contract's definition of *output* lives: a non-empty
//! `delta.content`, `delta.reasoning_content` or `delta.reasoning`. Role-only deltas,
//! empty strings, usage-only chunks and `[DONE]` are not output. The module knows
//! nothing of HTTP or time, so it is tested on plain strings.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::Value;

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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunk {
    /// Non-empty `content`.
    pub content: Option<String>,
    /// Non-empty `reasoning_content` or `reasoning`.
    pub reasoning: Option<String>,
    /// `finish_reason`, once the model is done.
    pub finish_reason: Option<String>,
    /// `usage`, when the upstream reports it (boxed, as is `meta`: rare, and a
    /// chunk is moved a few times on its way to the client).
    pub usage: Option<Box<Value>>,
    /// The completion's `id` and `model`, when asked for.
    pub meta: Option<Box<Meta>>,
}

/// Identity of the upstream completion, kept for the non-streaming answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// The upstream's completion id.
    pub id: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
}

impl Chunk {
    /// Whether this chunk is output in the contract's sense.
    pub fn is_output(&self) -> bool {
        self.content.is_some() || self.reasoning.is_some()
    }
}

/// The payload is not a chat completion chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream sent a chunk that is not JSON: {0}")]
pub struct MalformedChunk(String);

#[derive(Deserialize)]
struct Wire<'a> {
    /// Only the first choice matters; the others are skipped without being built.
    #[serde(default, borrow, deserialize_with = "first_choice")]
    choices: Option<WireChoice<'a>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow, alias = "message")]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
}

/// Parses one SSE `data` payload (a stream chunk) or a whole non-streaming
/// `chat.completion` body: its `message` reads like a `delta`. serde_json reads
/// borrowed fields, so only the texts kept are copied (see the README's
/// Performance: a hand-written scanner for common chunks measured no faster).
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
        usage: wire.usage.filter(|u| !u.is_null()).map(Box::new),
        meta: want_meta.then(|| {
            Box::new(Meta {
                id: wire.id.map(Cow::into_owned),
                model: wire.model.map(Cow::into_owned),
            })
        }),
        ..Chunk::default()
    };
    if let Some(choice) = wire.choices {
        chunk.finish_reason = choice.finish_reason.map(Cow::into_owned);
        if let Some(delta) = choice.delta {
            let text = |s: Option<Cow<'_, str>>| s.filter(|s| !s.is_empty()).map(Cow::into_owned);
            chunk.content = text(delta.content);
            chunk.reasoning = text(delta.reasoning_content).or(text(delta.reasoning));
        }
    }
    Ok(Parsed::Chunk(chunk))
}

/// The first element of the `choices` array. This runs once per streamed chunk, so
/// it skips the rest in place instead of collecting a `Vec` only to keep one.
fn first_choice<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<WireChoice<'de>>, D::Error> {
    struct First;
    impl<'de> Visitor<'de> for First {
        type Value = Option<WireChoice<'de>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence or null")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element()?;
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(first)
        }
    }
    deserializer.deserialize_any(First)
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
mod tests {
    use super::*;

    fn chunk(data: &str) -> Chunk {
        match parse(data.as_bytes(), false).expect("valid JSON") {
            Parsed::Chunk(chunk) => chunk,
            other => panic!("expected a chunk, got {other:?}"),
        }
    }

    #[test]
    fn content_reasoning_content_and_reasoning_are_output() {
        assert!(chunk(r#"{"choices":[{"delta":{"content":"香"}}]}"#).is_output());
        assert!(chunk(r#"{"choices":[{"delta":{"reasoning_content":"想"}}]}"#).is_output());
        assert!(chunk(r#"{"choices":[{"delta":{"reasoning":"想"}}]}"#).is_output());
    }

    #[test]
    fn role_only_empty_usage_only_and_finish_chunks_are_not_output() {
        let not_output = [
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[],"usage":{"total_tokens":3}}"#,
            r#"{"choices":null,"usage":{"total_tokens":3}}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"content":null,"reasoning_content":""}}]}"#,
        ];
        for data in not_output {
            assert!(!chunk(data).is_output(), "{data}");
        }
    }

    #[test]
    fn finish_reason_and_usage_are_kept() {
        let finish = chunk(r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#);
        assert_eq!(finish.finish_reason.as_deref(), Some("stop"));
        let usage = chunk(r#"{"choices":[],"usage":{"total_tokens":3}}"#);
        assert_eq!(
            usage.usage.as_deref(),
            Some(&serde_json::json!({"total_tokens": 3}))
        );
    }

    #[test]
    fn done_and_error_chunks_are_recognised() {
        assert_eq!(parse(b"[DONE]", false), Ok(Parsed::Done));
        let busy = r#"{"error":{"code":"1305","message":"当前模型访问量较大，请稍后重试"}}"#;
        assert_eq!(
            parse(busy.as_bytes(), false),
            Ok(Parsed::Error("当前模型访问量较大，请稍后重试".into()))
        );
        assert_eq!(
            parse(br#"{"error":"overloaded"}"#, false),
            Ok(Parsed::Error("overloaded".into()))
        );
    }

    #[test]
    fn a_non_streaming_completion_reads_like_one_chunk() {
        let body = r#"{"id":"c1","model":"m","choices":[{"message":{"role":"assistant","content":"hi","reasoning_content":"r"},"finish_reason":"stop"}]}"#;
        let Parsed::Chunk(whole) = parse(body.as_bytes(), true).expect("valid") else {
            panic!("expected a chunk");
        };
        assert_eq!(whole.content.as_deref(), Some("hi"));
        assert_eq!(whole.reasoning.as_deref(), Some("r"));
        assert_eq!(whole.meta.and_then(|m| m.model).as_deref(), Some("m"));
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(parse(b"not json", false).is_err());
        // Bytes that are not UTF-8, inside a string or outside one.
        assert!(parse(b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}", true).is_err());
        assert!(parse(b"{\"choices\":[]}\xff", true).is_err());
    }
}
