//! Answers taken from another request's run (contract 6.6): a kept result, or the
//! outcome of a run this request waited for, in the form this request asks for.
//! Every one carries `Idempotent-Replayed: true`.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
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

/// How a waiting request learns its outcome.
pub struct Waiting {
    /// The run's outcome, when it comes.
    pub outcome: BoxFuture<'static, Option<Outcome>>,
    /// This request's own deadline.
    pub deadline: Instant,
    /// The form it asks for.
    pub form: Form,
    /// For a chat stream with `LADLE_STREAM_KEEPALIVE_MS`: the silence after
    /// which the head and comments go out, and when the request arrived.
    pub keep_alive: Option<(Duration, Instant)>,
    /// This request's id, for an error event.
    pub request_id: String,
}

/// Waits for another request's run (until this request's `deadline`), then
/// answers with its outcome. A waiting chat stream sends nothing meanwhile but the
/// keep-alive comments, if they are on.
pub async fn wait(mut waiting: Waiting) -> Response {
    let result = match waiting.keep_alive {
        Some((every, arrived)) if waiting.form == Form::ChatStream => {
            let quiet_until = (arrived + every).min(waiting.deadline);
            match timeout_at(quiet_until, &mut waiting.outcome).await {
                Ok(result) => Ok(result),
                Err(_) if quiet_until < waiting.deadline => return commented(waiting, every),
                Err(_) => Err(()),
            }
        }
        _ => timeout_at(waiting.deadline, waiting.outcome)
            .await
            .map_err(drop),
    };
    match settled(result) {
        Ok(kept) => replay(&kept, waiting.form),
        Err((error, attempts)) => {
            let mut response = error.into_completion_response(attempts);
            response
                .headers_mut()
                .insert(REPLAYED, HeaderValue::from_static("true"));
            response
        }
    }
}

/// The outcome as this request answers it (`Err(())`: its deadline passed).
fn settled(result: Result<Option<Outcome>, ()>) -> Outcome {
    match result {
        Ok(Some(outcome)) => outcome,
        Ok(None) => Err((
            ApiError::UpstreamFailed("the run this request waited for was dropped".into()),
            0,
        )),
        Err(()) => Err((ApiError::DeadlineExceeded, 0)),
    }
}

/// A waiting chat stream whose head goes out now: comments every `every` until
/// the outcome, then the kept chunks, or one error event.
fn commented(waiting: Waiting, every: Duration) -> Response {
    let Waiting {
        outcome,
        deadline,
        request_id,
        ..
    } = waiting;
    // The head goes out with a first comment: the silence has already lasted.
    let first = futures_util::stream::once(std::future::ready(Bytes::from_static(COMMENT)));
    let rest = futures_util::stream::unfold(Some(outcome), move |state| {
        let request_id = request_id.clone();
        async move {
            let mut outcome = state?;
            let next = Instant::now() + every;
            let result = match timeout_at(next.min(deadline), &mut outcome).await {
                Ok(result) => Ok(result),
                Err(_) if next < deadline => {
                    return Some((Bytes::from_static(COMMENT), Some(outcome)));
                }
                Err(_) => Err(()),
            };
            let last = match settled(result) {
                Ok(kept) => chat_chunks(&kept),
                Err((error, _)) => format!("data: {}\n\n", error.body(&request_id)),
            };
            Some((Bytes::from(last), None))
        }
    });
    let body = first.chain(rest).map(Ok::<_, std::convert::Infallible>);
    let mut response = super::sse_response(axum::body::Body::from_stream(body));
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

/// A keep-alive comment.
const COMMENT: &[u8] = b": keep-alive\n\n";

fn sse(text: String) -> Response {
    super::sse_response(axum::body::Body::from(text))
}
