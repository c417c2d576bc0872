//! `POST /v1/chat/completions`: the OpenAI-compatible endpoint.
//!
//! The body is forwarded as the caller wrote it, with `model` filled in and
//! `stream` forced on. Its top-level fields are kept as raw JSON text rather than
//! parsed into values: a conversation's messages are only checked to be a
//! non-empty array, never built into strings and maps just to be written out again.

use std::borrow::Cow;
use std::fmt;

use axum::extract::{Extension, State};
use axum::response::Response;
use bytes::Bytes;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use futures_util::future::Either;
use serde_json::Value;

use super::{Answering, CompletionHeaders, Keyed, RawBody, keyed, noted};
use crate::completion::Finished;
use crate::error::ApiError;
use crate::idempotency;
use crate::ops::observe::Arrival;
use crate::ops::observe::CompletionNote;
use crate::ops::request_id::RequestId;
use crate::relay::openai;
use crate::relay::openai::completion_body;
use crate::relay::replay::Form;
use crate::state::AppState;
use tokio::time::Instant;

/// Forwards a chat request upstream with `stream: true` and answers in the
/// caller's choice of format.
pub async fn completions(
    State(app): State<AppState>,
    Extension(Arrival(arrived)): Extension<Arrival>,
    request_id: RequestId,
    headers: CompletionHeaders,
    RawBody(bytes): RawBody,
) -> Response {
    let mut note = CompletionNote::default();
    let answer = complete(app, arrived, request_id, headers, bytes, &mut note).await;
    noted(answer, note)
}

/// The chat completion itself; `note` gathers what the request's log line adds.
async fn complete(
    app: AppState,
    arrived: Instant,
    request_id: RequestId,
    headers: CompletionHeaders,
    bytes: Bytes,
    note: &mut CompletionNote,
) -> Result<Response, ApiError> {
    let body: ChatBody<'_> = super::json(&bytes)?;
    let wants_stream = match body.field("stream") {
        None => false,
        Some(raw) => serde_json::from_str::<Option<bool>>(raw.get())
            .map_err(|_| ApiError::InvalidRequest("`stream` must be a boolean".into()))?
            .unwrap_or(false),
    };
    if !body.field("messages").is_some_and(is_non_empty_array) {
        return Err(ApiError::InvalidRequest(
            "`messages` must be a non-empty array".into(),
        ));
    }
    let model = match body
        .field("model")
        .map(|raw| serde_json::from_str::<Option<String>>(raw.get()))
    {
        Some(Ok(Some(model))) if !model.is_empty() => model,
        None | Some(Ok(None)) => app.config.model.clone().ok_or_else(|| {
            ApiError::InvalidRequest("`model` is required (no LADLE_MODEL is set)".into())
        })?,
        Some(_) => return Err(ApiError::InvalidRequest("`model` must be a string".into())),
    };
    // An answer ladle assembles itself asks for usage, as OpenAI's own carries it;
    // a relayed stream is left as the caller wrote it.
    let upstream_body = body.upstream(&model, !wants_stream);
    let mut job = app.job(
        arrived,
        &request_id,
        upstream_body,
        &model,
        None,
        headers.timeout,
    );
    note.deadline_ms = Some((job.deadline.at - job.deadline.started).as_millis() as u64);
    // A committed stream cannot take words back, so it never retries after output.
    job.policy.retry_after_output = !wants_stream;
    job.wants_meta = !wants_stream;
    let progress = match headers.key {
        None => Either::Left(app.complete(job)),
        Some(key) => {
            let form = if wants_stream {
                Form::ChatStream
            } else {
                Form::ChatJson
            };
            let request: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let path = "/v1/chat/completions";
            let answer = Answering {
                deadline: job.deadline.at,
                keep_alive: app.config.stream_keepalive.map(|every| (every, arrived)),
                request_id: request_id.as_str(),
            };
            match keyed(&app, &key, path, &request, form, answer, note).await? {
                Keyed::Answered(response) => return Ok(response),
                Keyed::Runs(slot) => {
                    let (id, model) = (request_id.to_string(), model.clone());
                    let keep = move |finished: &Finished| completion_body(finished, &id, &model);
                    Either::Right(idempotency::detached(app.complete(job), slot, keep))
                }
            }
        }
    };
    Ok(if wants_stream {
        let keep_alive = app.config.stream_keepalive.map(|every| (every, arrived));
        openai::streaming(progress, request_id.to_string(), keep_alive).await
    } else {
        openai::whole(progress, request_id.as_str(), &model).await
    })
}

/// Whether valid JSON text is an array with an element, read without parsing the
/// elements again (a conversation can be long).
fn is_non_empty_array(raw: &RawValue) -> bool {
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
    fn field(&self, name: &str) -> Option<&RawValue> {
        self.0
            .iter()
            .find(|(key, _)| key.0 == name)
            .map(|(_, raw)| *raw)
    }

    /// The body for the upstream: every field as given, `model` set and `stream`
    /// on (in their places if present, else at the end), and with `ask_usage`,
    /// `stream_options.include_usage` when the caller set no `stream_options`.
    fn upstream(&self, model: &str, ask_usage: bool) -> Bytes {
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
