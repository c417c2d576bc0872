//! The Responses API's response object (contract 12): made once per request,
//! then written with whatever status and output it has reached.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::engine::completion::Finished;
use serde::{Deserialize, Serialize};

/// The request's fields that the response object repeats, as given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Echo {
    /// `instructions`, or `null`.
    pub instructions: Value,
    /// `metadata` (`{}` when not given).
    pub metadata: Value,
    /// `background`.
    pub background: bool,
    /// `previous_response_id`, or `null`.
    pub previous_response_id: Value,
    /// `store`.
    pub store: bool,
    /// `temperature`, or `null`.
    pub temperature: Value,
    /// `top_p`, or `null`.
    pub top_p: Value,
    /// `max_output_tokens`, or `null`.
    pub max_output_tokens: Value,
    /// `text` (`{"format": {"type": "text"}}` when not given).
    pub text: Value,
}

/// One response: what stays the same from `response.created` to its end.
#[derive(Debug, Clone)]
pub struct Made {
    /// `resp_` and 22 characters of `[A-Za-z0-9]` (122 random bits).
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// The model asked for.
    pub model: String,
    /// What the object repeats of the request.
    pub echo: Echo,
    /// The object's fields that never change, as JSON text without braces:
    /// written once, then into every event that carries the object.
    fixed: Arc<str>,
}

/// How a response stands, with what the object says of it.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// A background response waiting for a run.
    Queued,
    /// Canceled by its caller.
    Cancelled,
    /// Running.
    InProgress,
    /// Answered whole.
    Completed,
    /// Answered, stopped for length.
    Incomplete,
    /// Ended with this error body's `code` and `message`.
    Failed(Value),
}

impl Status {
    /// The object's `status`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Cancelled => "cancelled",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete => "incomplete",
            Status::Failed(_) => "failed",
        }
    }

    /// `failed`, with the `code` and `message` of a section 3 `error` object.
    pub fn failed(error: &Value) -> Status {
        Status::Failed(json!({"code": error["code"], "message": error["message"]}))
    }
}

impl Made {
    /// A new response for `model`, repeating `echo`. Its id is the id of the
    /// job it is kept as (`job_X` ↔ `resp_X`): 22 characters from 122 random
    /// bits.
    pub fn new(model: String, echo: Echo) -> Made {
        let id = format!("resp_{}", &crate::jobs::ids::fresh()["job_".len()..]);
        Made::with(id, crate::wall::unix_seconds(), model, echo)
    }

    fn with(id: String, created_at: u64, model: String, echo: Echo) -> Made {
        let mut fixed = json!({
            "object": "response",
            "created_at": created_at,
            "model": model,
            "parallel_tool_calls": false,
            "tool_choice": "auto",
            "tools": [],
        });
        if let (Value::Object(fields), Ok(Value::Object(echoed))) =
            (&mut fixed, serde_json::to_value(&echo))
        {
            fields.extend(echoed);
        }
        let text = fixed.to_string();
        let fixed = text[1..text.len() - 1].into();
        Made {
            id,
            created_at,
            model,
            echo,
            fixed,
        }
    }

    /// The same response under another id and time (a kept one's, replayed).
    pub fn renamed(&self, id: String, created_at: u64) -> Made {
        Made::with(id, created_at, self.model.clone(), self.echo.clone())
    }

    /// A background response's: its id is its job's (`job_X` → `resp_X`).
    pub fn for_job(job_id: &str, stored: &Value) -> Option<Made> {
        Some(Made::with(
            format!("resp_{}", job_id.strip_prefix("job_")?),
            stored["created_at"].as_u64()?,
            stored["model"].as_str()?.to_owned(),
            serde_json::from_value(stored["echo"].clone()).ok()?,
        ))
    }

    /// What a background response's job keeps of it: its chat `body`, and its
    /// conversation (`input`, instructions excepted) for a later
    /// `previous_response_id`.
    pub fn stored(&self, body: Value, input: Vec<Value>) -> Value {
        json!({"body": body, "input": input, "created_at": self.created_at,
               "model": self.model, "echo": self.echo})
    }

    /// The object with `status`, `output` items and the chat `usage` (if any).
    pub fn object(&self, status: &Status, output: Vec<Value>, usage: Option<&Value>) -> Value {
        let output = Value::Array(output).to_string();
        // Text made of JSON values always parses back.
        serde_json::from_str(&self.object_text(status, &output, usage)).unwrap_or_default()
    }

    /// The same object as JSON text, with `output` the items' JSON text: the
    /// one place the object is written.
    pub fn object_text(&self, status: &Status, output: &str, usage: Option<&Value>) -> String {
        let (error, incomplete) = match status {
            Status::Incomplete => (Value::Null, json!({"reason": "max_output_tokens"})),
            Status::Failed(error) => (error.clone(), Value::Null),
            _ => (Value::Null, Value::Null),
        };
        let name = status.name();
        let id = Value::from(self.id.as_str());
        let usage = usage.map_or(Value::Null, responses_usage);
        format!(
            r#"{{"id":{id},"status":"{name}","output":{output},"usage":{usage},"error":{error},"incomplete_details":{incomplete},{}}}"#,
            self.fixed
        )
    }

    /// How a finished answer ended: `incomplete` when it stopped for length.
    pub fn ended_as(finished: &Finished) -> Status {
        let choice = finished.choices.iter().find(|c| c.index == 0);
        match choice.and_then(|c| c.finish_reason.as_deref()) == Some("length") {
            true => Status::Incomplete,
            false => Status::Completed,
        }
    }

    /// The whole object of a finished answer.
    pub fn finished(&self, finished: &Finished) -> Value {
        let choice = finished.choices.iter().find(|c| c.index == 0);
        let reasoning = choice.map_or("", |c| c.reasoning.as_str());
        let text = choice.map_or("", |c| c.content.as_str());
        let mut output = Vec::new();
        if !reasoning.is_empty() {
            output.push(reasoning_item(&item_id("rs", &self.id, 0), reasoning));
        }
        output.push(message_item(
            &item_id("msg", &self.id, output.len()),
            text,
            "completed",
        ));
        self.object(&Made::ended_as(finished), output, finished.usage.as_ref())
    }
}

/// The job a response id names (`resp_X` → `job_X`).
pub fn job_id(response_id: &str) -> Option<String> {
    response_id
        .strip_prefix("resp_")
        .map(|rest| format!("job_{rest}"))
}

/// An output item's id: its kind, the response's id and its place.
pub fn item_id(kind: &str, response: &str, index: usize) -> String {
    format!("{kind}_{}_{index}", response.trim_start_matches("resp_"))
}

/// A `message` item with its one `output_text` part.
pub fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant",
           "content": [text_part(text)]})
}

/// An `output_text` part.
pub fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// A `reasoning` item with the reasoning text.
pub fn reasoning_item(id: &str, text: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [],
           "content": [{"type": "reasoning_text", "text": text}]})
}

/// A chat `usage` as the Responses API names it.
fn responses_usage(usage: &Value) -> Value {
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    let input = count(&usage["prompt_tokens"]);
    let output = count(&usage["completion_tokens"]);
    let mut named = Map::new();
    named.insert("input_tokens".into(), input.into());
    named.insert(
        "input_tokens_details".into(),
        json!({"cached_tokens": count(&usage["prompt_tokens_details"]["cached_tokens"])}),
    );
    named.insert("output_tokens".into(), output.into());
    named.insert(
        "output_tokens_details".into(),
        json!({"reasoning_tokens": count(&usage["completion_tokens_details"]["reasoning_tokens"])}),
    );
    let total = usage["total_tokens"].as_u64().unwrap_or(input + output);
    named.insert("total_tokens".into(), total.into());
    Value::Object(named)
}
