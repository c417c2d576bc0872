//! A continuation's chunks as a relayed stream's caller must see them (contract
//! 11.4): nothing voided, so the same `id`, `model` and `created` as the stream
//! began with, no second role delta, and `usage` only as the billed sum. Only a
//! continuation's chunks are written anew; every other chunk is relayed byte
//! for byte.

use bytes::Bytes;
use serde_json::{Map, Value};

/// The fields of a stream's first chunk that every later chunk repeats.
const IDENTITY: [&str; 4] = ["id", "model", "created", "system_fingerprint"];

/// What a relayed stream began with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity(Map<String, Value>);

impl Identity {
    /// The identity fields of a stream's first chunk, as sent.
    pub fn of(first_chunk: &[u8]) -> Identity {
        let fields: Map<String, Value> = serde_json::from_slice(first_chunk).unwrap_or_default();
        Identity(
            fields
                .into_iter()
                .filter(|(key, _)| IDENTITY.contains(&key.as_str()))
                .collect(),
        )
    }

    /// A continuation's chunk `raw` written as part of the stream that began
    /// with this identity, its `usage` replaced by `billed` (or taken out);
    /// `None` when nothing is left to send (a usage chunk with no sum).
    pub fn continue_chunk(&self, raw: &[u8], billed: Option<Value>) -> Option<Bytes> {
        let Ok(mut fields) = serde_json::from_slice::<Map<String, Value>>(raw) else {
            return Some(Bytes::copy_from_slice(raw));
        };
        for (key, value) in &self.0 {
            if let Some(field) = fields.get_mut(key) {
                *field = value.clone();
            }
        }
        if let Some(choices) = fields.get_mut("choices").and_then(Value::as_array_mut) {
            for choice in choices {
                if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
                    delta.remove("role");
                }
            }
        }
        if fields.get("usage").is_some_and(|usage| !usage.is_null()) {
            match billed {
                Some(sum) => {
                    fields.insert("usage".into(), sum);
                }
                None => {
                    fields.remove("usage");
                    let no_choices = fields
                        .get("choices")
                        .and_then(Value::as_array)
                        .is_none_or(Vec::is_empty);
                    if no_choices {
                        return None;
                    }
                }
            }
        }
        serde_json::to_vec(&fields).ok().map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const FIRST: &str = r#"{"id":"chatcmpl-a","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;

    fn value(bytes: Option<Bytes>) -> Value {
        serde_json::from_slice(&bytes.expect("a chunk")).expect("JSON")
    }

    #[test]
    fn a_continued_chunk_takes_the_streams_identity_and_loses_its_role() {
        let identity = Identity::of(FIRST.as_bytes());
        let raw = r#"{"id":"cmpl-b","object":"chat.completion.chunk","created":1700000099,"model":"kimi","choices":[{"index":0,"delta":{"role":"assistant","content":"蛋"},"finish_reason":null}]}"#;
        assert_eq!(
            value(identity.continue_chunk(raw.as_bytes(), None)),
            json!({"id": "chatcmpl-a", "object": "chat.completion.chunk", "created": 1700000000,
                   "model": "deepseek-chat",
                   "choices": [{"index": 0, "delta": {"content": "蛋"}, "finish_reason": null}]})
        );
    }

    #[test]
    fn usage_is_the_billed_sum_or_goes_with_a_chunk_that_carried_only_it() {
        let identity = Identity::of(FIRST.as_bytes());
        let usage_only = br#"{"id":"b","choices":[],"usage":{"total_tokens":5}}"#;
        assert_eq!(identity.continue_chunk(usage_only, None), None);
        let summed = identity.continue_chunk(usage_only, Some(json!({"total_tokens": 9})));
        assert_eq!(value(summed)["usage"], json!({"total_tokens": 9}));
        let with_text = br#"{"id":"b","choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"total_tokens":5}}"#;
        let kept = value(identity.continue_chunk(with_text, None));
        assert_eq!(kept.get("usage"), None);
        assert_eq!(kept["choices"][0]["delta"]["content"], "x");
        let null_usage = br#"{"id":"b","choices":[],"usage":null}"#;
        assert_eq!(
            value(identity.continue_chunk(null_usage, None))["usage"],
            Value::Null
        );
    }
}
