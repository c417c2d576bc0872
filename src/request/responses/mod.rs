//! `POST /v1/responses` (contract 12) → the chat body ladle sends upstream: input
//! items and instructions to messages, `text.format` to `response_format`,
//! `max_output_tokens` to `max_tokens`. Every field is read by name; one this
//! build does not serve is refused naming it, never dropped in silence.

pub mod kept;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Call;
use crate::cache::CacheControl;
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::jobs::Job;
use crate::relay::CompletionRoute;
use crate::relay::responses::{Echo, Made};
use crate::relay::{Reply, ResponseShape};

/// The task name of a background response's job (and a stored one's).
pub const RESPONSES_TASK: &str = "responses";

/// The fields a create may carry.
const FIELDS: [&str; 12] = [
    "model",
    "input",
    "instructions",
    "previous_response_id",
    "max_output_tokens",
    "temperature",
    "top_p",
    "text",
    "metadata",
    "store",
    "stream",
    "background",
];

/// A create, understood.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The model asked for (or `LADLE_MODEL`).
    pub model: String,
    /// The chat body's fields but `messages`: `stream` on, usage asked for.
    chat: Map<String, Value>,
    /// `instructions`, a system message before everything else.
    instructions: Option<String>,
    /// The conversation: the input's messages, after the stored conversation
    /// `previous_response_id` names (`with_previous`).
    pub input: Vec<Value>,
    /// `previous_response_id`.
    pub previous: Option<String>,
    /// Whether the caller wants the events.
    pub stream: bool,
    /// What the response object repeats of the request.
    pub echo: Echo,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::InvalidRequest(message.into())
}

/// Reads a create's body; `default_model` is `LADLE_MODEL`.
pub fn parse(bytes: &[u8], default_model: Option<&str>) -> Result<Asked, ApiError> {
    let fields: Map<String, Value> =
        serde_json::from_slice(bytes).map_err(|_| invalid("the body must be a JSON object"))?;
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "`{unknown}` is not supported by ladle's Responses API"
        )));
    }
    let field = |name: &str| fields.get(name).filter(|v| !v.is_null());
    let flag = |name: &str, default: bool| match field(name) {
        None => Ok(default),
        Some(Value::Bool(on)) => Ok(*on),
        Some(_) => Err(invalid(format!("`{name}` must be a boolean"))),
    };
    let (stream, store, background) = (
        flag("stream", false)?,
        flag("store", true)?,
        flag("background", false)?,
    );
    if background && !store {
        return Err(invalid(
            "`background` needs `store`: a background response is kept",
        ));
    }
    let previous = match field("previous_response_id") {
        None => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => return Err(invalid("`previous_response_id` must be a string")),
    };
    let model = match field("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        None => default_model
            .map(str::to_owned)
            .ok_or_else(|| invalid("`model` is required (no LADLE_MODEL is set)"))?,
        Some(_) => return Err(invalid("`model` must be a string")),
    };
    let instructions = match field("instructions") {
        None => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(invalid("`instructions` must be a string")),
    };
    let mut messages = Vec::new();
    match field("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) if !items.is_empty() => {
            for (at, item) in items.iter().enumerate() {
                messages.push(message(at, item)?);
            }
        }
        _ => {
            return Err(invalid(
                "`input` must be a string or a non-empty list of messages",
            ));
        }
    }
    let mut chat = Map::new();
    chat.insert("model".into(), model.clone().into());
    for (from, to) in [
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("max_output_tokens", "max_tokens"),
    ] {
        if let Some(value) = field(from) {
            if !value.is_number() {
                return Err(invalid(format!("`{from}` must be a number")));
            }
            chat.insert(to.into(), value.clone());
        }
    }
    let text = field("text")
        .cloned()
        .unwrap_or(json!({"format": {"type": "text"}}));
    if let Some(format) = response_format(&text)? {
        chat.insert("response_format".into(), format);
    }
    chat.insert("stream".into(), true.into());
    chat.insert("stream_options".into(), json!({"include_usage": true}));
    let metadata = field("metadata").cloned().unwrap_or(json!({}));
    checked_metadata(&metadata)?;
    Ok(Asked {
        model,
        chat,
        instructions,
        input: messages,
        previous: previous.clone(),
        stream,
        echo: Echo {
            instructions: field("instructions").cloned().unwrap_or(Value::Null),
            metadata,
            background,
            previous_response_id: previous.map_or(Value::Null, Value::String),
            store,
            temperature: field("temperature").cloned().unwrap_or(Value::Null),
            top_p: field("top_p").cloned().unwrap_or(Value::Null),
            max_output_tokens: field("max_output_tokens").cloned().unwrap_or(Value::Null),
            text,
        },
    })
}

impl Asked {
    /// The chat body: `instructions` as a system message, then the conversation.
    pub fn body(&self) -> Bytes {
        let mut chat = self.chat.clone();
        let instructions = self.instructions.iter();
        let mut messages: Vec<Value> = instructions
            .map(|text| json!({"role": "system", "content": text}))
            .collect();
        messages.extend(self.input.iter().cloned());
        chat.insert("messages".into(), messages.into());
        serde_json::to_vec(&chat).unwrap_or_default().into()
    }

    /// Goes on from a stored response: its conversation (input and output,
    /// instructions excepted) comes before this input.
    pub fn with_previous(&mut self, before: Vec<Value>) {
        let input = std::mem::replace(&mut self.input, before);
        self.input.extend(input);
    }
}

/// A background response's run (contract 12): its job's stored chat body,
/// answered as the response object.
pub fn stored_call(
    job: &Job,
    stored: &Value,
    request_id: &str,
    timeout: Option<Duration>,
) -> Result<Call, ApiError> {
    let unreadable = || ApiError::UpstreamFailed("the stored response cannot be read".into());
    let made = Made::for_job(&job.id, stored).ok_or_else(unreadable)?;
    let body = serde_json::to_vec(&stored["body"]).map_err(|_| unreadable())?;
    Ok(Call {
        body: body.into(),
        one_choice: true,
        reply: Reply {
            shape: ResponseShape::ResponsesJson,
            request_id: request_id.to_owned(),
            route: CompletionRoute::Responses,
            model: made.model.clone(),
            created: made.created_at,
            keep_alive: None,
            made: Some(Arc::new(made)),
        },
        arrived: Instant::now(),
        timeout,
        key: None,
        prompt: None,
        cache_key: None,
        cache_control: CacheControl::default(),
        client: job.client.clone(),
        trace: TraceContext::start(),
        keep: None,
    })
}

/// One input item as a chat message.
fn message(at: usize, item: &Value) -> Result<Value, ApiError> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    if kind != "message" {
        return Err(invalid(format!(
            "`input[{at}]` has type `{kind}`, which is not supported"
        )));
    }
    let role = match item.get("role").and_then(Value::as_str) {
        Some(role @ ("user" | "assistant" | "system")) => role,
        // Many chat upstreams know no `developer`; it is a system message.
        Some("developer") => "system",
        _ => {
            return Err(invalid(format!(
                "`input[{at}].role` must be user, assistant, system or developer"
            )));
        }
    };
    let content = match item.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("input_text" | "output_text"), Some(Value::String(piece))) => {
                        text.push_str(piece)
                    }
                    (kind, _) => {
                        let kind = kind.unwrap_or("(none)");
                        return Err(invalid(format!(
                            "`input[{at}].content` has a part of type `{kind}`, which is not supported"
                        )));
                    }
                }
            }
            text
        }
        _ => {
            return Err(invalid(format!(
                "`input[{at}].content` must be a string or a list of parts"
            )));
        }
    };
    Ok(json!({"role": role, "content": content}))
}

/// `text.format` as the chat body's `response_format` (none for plain text).
fn response_format(text: &Value) -> Result<Option<Value>, ApiError> {
    let format = &text["format"];
    match format["type"].as_str() {
        None if format.is_null() => Ok(None),
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = Map::new();
            for key in ["name", "schema", "strict", "description"] {
                if let Some(value) = format.get(key).filter(|v| !v.is_null()) {
                    schema.insert(key.into(), value.clone());
                }
            }
            if !schema.contains_key("name") || !schema.contains_key("schema") {
                return Err(invalid(
                    "`text.format` of type json_schema needs `name` and `schema`",
                ));
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        _ => Err(invalid(
            "`text.format.type` must be text, json_object or json_schema",
        )),
    }
}

/// `metadata`: at most 16 pairs of strings.
fn checked_metadata(metadata: &Value) -> Result<(), ApiError> {
    let pairs = metadata
        .as_object()
        .ok_or_else(|| invalid("`metadata` must be an object"))?;
    if pairs.len() > 16 || pairs.values().any(|v| !v.is_string()) {
        return Err(invalid("`metadata` holds at most 16 string values"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
