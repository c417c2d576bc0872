//! The upstream request body, written in one place for both completion routes:
//! the caller's (or the rendered prompt's) fields as raw JSON text, with `model`
//! set, `stream` forced on and, when ladle assembles the answer itself, usage
//! asked for. A chat body's top-level fields are kept as raw JSON text rather than
//! parsed into values: a conversation's messages are only checked to be a
//! non-empty array, never built into strings and maps just to be written out
//! again.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

use crate::error::ApiError;
use serde_json::value::RawValue;

/// Whether valid JSON text is an array with an element, read without parsing the
/// elements again (a conversation can be long).
pub fn is_non_empty_array(raw: &RawValue) -> bool {
    let text = raw.get().trim();
    text.strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .is_some_and(|inner| !inner.trim().is_empty())
}

/// A chat request body: its top-level fields in order, values as raw JSON,
/// borrowed from the body's bytes. A repeated field keeps its first place and its
/// last value, as a JSON object read into a map would.
pub struct ChatBody<'a>(Vec<(Key<'a>, &'a RawValue)>);

/// A field name: borrowed, unless it had escapes to decode.
#[derive(PartialEq)]
struct Key<'a>(Cow<'a, str>);

impl ChatBody<'_> {
    /// A top-level field's raw JSON text.
    pub fn field(&self, name: &str) -> Option<&RawValue> {
        self.0
            .iter()
            .find(|(key, _)| key.0 == name)
            .map(|(_, raw)| *raw)
    }

    /// Whether the request asks for one choice (`n` absent, `null` or `1`):
    /// only such an answer can be continued after a cut (contract 11.4).
    pub fn one_choice(&self) -> bool {
        self.field("n").is_none_or(|raw| {
            matches!(
                serde_json::from_str::<Option<u64>>(raw.get()),
                Ok(None | Some(1))
            )
        })
    }

    /// The body for the upstream: every field as given, `model` set and `stream`
    /// on (in their places if present, else at the end), and with `ask_usage`,
    /// `stream_options.include_usage` when the caller set no `stream_options`.
    pub fn upstream(&self, model: &str, ask_usage: bool) -> Bytes {
        let len = self
            .0
            .iter()
            .map(|(k, v)| k.0.len() + v.get().len() + 4)
            .sum::<usize>();
        let mut out = Vec::with_capacity(len + model.len() + 32);
        out.push(b'{');
        let mut put = |key: &str, value: &str| {
            if out.len() > 1 {
                out.push(b',');
            }
            // Keys and the model are strings; writing them cannot fail.
            let _ = serde_json::to_writer(&mut out, key);
            out.push(b':');
            out.extend_from_slice(value.as_bytes());
        };
        let model = serde_json::to_string(model).unwrap_or_default();
        let (mut wrote_model, mut wrote_stream) = (false, false);
        for (key, raw) in &self.0 {
            let key = &*key.0;
            match key {
                "model" => {
                    put(key, &model);
                    wrote_model = true;
                }
                "stream" => {
                    put(key, "true");
                    wrote_stream = true;
                }
                _ => put(key, raw.get()),
            }
        }
        if !wrote_model {
            put("model", &model);
        }
        if !wrote_stream {
            put("stream", "true");
        }
        if ask_usage && self.field("stream_options").is_none() {
            put("stream_options", r#"{"include_usage":true}"#);
        }
        out.push(b'}');
        out.into()
    }
}

impl<'de> Deserialize<'de> for ChatBody<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = ChatBody<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ChatBody<'de>, A::Error> {
                let mut fields: Vec<(Key<'de>, &'de RawValue)> = Vec::with_capacity(8);
                while let Some((key, value)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    match fields.iter_mut().find(|(k, _)| *k == key) {
                        Some(field) => field.1 = value,
                        None => fields.push((key, value)),
                    }
                }
                Ok(ChatBody(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl<'de> Visitor<'de> for Name {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }

            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(name)))
            }

            fn visit_str<E>(self, name: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(name.to_owned())))
            }
        }
        deserializer.deserialize_str(Name)
    }
}

/// A body parsed as JSON; failures are contract errors. The body is checked as
/// UTF-8 once, as a whole: `from_slice` would check every key and string again.
pub fn json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    let invalid = |e: &dyn std::fmt::Display| {
        ApiError::InvalidRequest(format!("body is not the expected JSON: {e}"))
    };
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(&e))?;
    if crate::engine::nesting::text_too_deep(bytes) {
        return Err(ApiError::InvalidRequest(format!(
            "body nests deeper than {} levels",
            crate::engine::nesting::MOST_LEVELS
        )));
    }
    serde_json::from_str(text).map_err(|e| invalid(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(body: &str, model: &str) -> serde_json::Value {
        let body: ChatBody<'_> = serde_json::from_str(body).expect("an object");
        serde_json::from_slice(&body.upstream(model, false)).expect("the upstream body is JSON")
    }

    #[test]
    fn the_upstream_body_keeps_every_field_and_sets_model_and_stream() {
        let sent = upstream(
            r#"{"temperature": 0.2, "messages": [{"role": "user", "content": "番茄\n\"炒蛋\""}], "stream": false, "extra": {"a": [1, null]}}"#,
            "m\"1",
        );
        assert_eq!(
            sent,
            serde_json::json!({
                "temperature": 0.2,
                "messages": [{"role": "user", "content": "番茄\n\"炒蛋\""}],
                "stream": true,
                "extra": {"a": [1, null]},
                "model": "m\"1",
            })
        );
        let keys: Vec<String> = sent
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["temperature", "messages", "stream", "extra", "model"]
        );
    }

    #[test]
    fn usage_is_asked_for_unless_the_caller_set_stream_options() {
        let sent = |text: &str| {
            let body: ChatBody<'_> = serde_json::from_str(text).expect("an object");
            serde_json::from_slice::<serde_json::Value>(&body.upstream("m", true))
                .expect("the upstream body is JSON")
        };
        assert_eq!(
            sent(r#"{"messages": []}"#)["stream_options"],
            serde_json::json!({"include_usage": true})
        );
        assert_eq!(
            sent(r#"{"stream_options": {"include_usage": false}}"#)["stream_options"],
            serde_json::json!({"include_usage": false})
        );
    }

    #[test]
    fn a_repeated_field_keeps_its_first_place_and_last_value() {
        let sent = upstream(r#"{"model": "a", "n": 1, "model": "b", "n": 2}"#, "b");
        assert_eq!(
            sent,
            serde_json::json!({"model": "b", "n": 2, "stream": true})
        );
    }

    #[test]
    fn a_field_name_with_escapes_is_read_decoded() {
        let sent = upstream(r#"{"str\u0065am": false, "mod\u0065l": "x"}"#, "m");
        assert_eq!(sent, serde_json::json!({"stream": true, "model": "m"}));
    }

    #[test]
    fn messages_must_be_an_array_with_an_element() {
        let check = |text: &str| {
            is_non_empty_array(serde_json::from_str::<&RawValue>(text).expect("valid JSON"))
        };
        for text in ["[{}]", " [ 1 ] ", "[[]]", "[\"]\"]"] {
            assert!(check(text), "{text}");
        }
        for text in ["[]", "[ \n ]", "{}", "\"[1]\"", "null", "1"] {
            assert!(!check(text), "{text}");
        }
    }

    #[test]
    fn only_an_object_is_a_chat_body() {
        for text in ["[]", "\"x\"", "{\"a\": }", "{} extra"] {
            assert!(
                serde_json::from_str::<ChatBody<'_>>(text).is_err(),
                "{text}"
            );
        }
    }
}
