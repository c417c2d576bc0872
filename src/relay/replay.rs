//! Answers taken from another request's run (contract 6.6): a kept result, or the
//! outcome of a run this request waited for, in the form this request asks for.
//! Every one carries `Idempotent-Replayed: true`.

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::time::{Instant, timeout_at};

use crate::error::ApiError;
use crate::idempotency::Outcome;

/// The header of an answer from another request's run.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The form a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// One `chat.completion`.
    ChatJson,
    /// An OpenAI chunk stream.
    ChatStream,
    /// A task's `200` body.
    TaskJson,
    /// A task's named events: here, one `result`.
    TaskEvents,
}

/// A kept body (a `chat.completion`, or a task's `200` body), in `form`.
pub fn replay(kept: &Value, form: Form) -> Response {
    let mut response = match form {
        Form::ChatJson | Form::TaskJson => axum::Json(kept).into_response(),
        Form::TaskEvents => sse(format!("event: result\ndata: {kept}\n\n")),
        Form::ChatStream => sse(chat_chunks(kept)),
    };
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// Waits for another request's run (until this request's `deadline`), then
/// answers with its outcome.
pub async fn wait(
    outcome: BoxFuture<'static, Option<Outcome>>,
    deadline: Instant,
    form: Form,
) -> Response {
    let error = match timeout_at(deadline, outcome).await {
        Ok(Some(Ok(kept))) => return replay(&kept, form),
        Ok(Some(Err(error))) => error,
        Ok(None) => ApiError::UpstreamFailed("the run this request waited for was dropped".into()),
        Err(_) => ApiError::DeadlineExceeded,
    };
    let mut response = error.into_completion_response(0);
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// A kept `chat.completion` as a stream: the message in one chunk, the finish
/// reason and usage in the next, then `[DONE]`.
fn chat_chunks(kept: &Value) -> String {
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
    format!("data: {first}\n\ndata: {last}\n\ndata: [DONE]\n\n")
}

fn sse(text: String) -> Response {
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}
