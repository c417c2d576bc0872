//! Answers taken from another request's run (contract 6.6): a kept result, or the
//! outcome of a run this request waited for, in the shape this request asks for.
//! Every one carries `Idempotent-Replayed: true`.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::time::{Instant, timeout_at};

use super::ResponseShape;
use super::commit::{self, Step};
use super::wire::kept_as_chunks;
use crate::error::ApiError;
use crate::idempotency::Outcome;

/// The header of an answer from another request's run.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// A kept body (a `chat.completion`, a task's `200` body, or a response
/// object), in `shape`.
pub fn replay(kept: &Value, shape: ResponseShape) -> Response {
    let response = match shape {
        ResponseShape::ChatJson | ResponseShape::TaskJson | ResponseShape::ResponsesJson => {
            axum::Json(kept).into_response()
        }
        ResponseShape::ResponsesEvents => {
            let events = super::responses::Events::replayed(kept.clone()).unwrap_or_default();
            let frames: Vec<u8> = events.iter().flat_map(|e| e.frame()).collect();
            sse(frames.into())
        }
        ResponseShape::TaskEvents => sse(format!("event: result\ndata: {kept}\n\n").into()),
        ResponseShape::ChatStream => sse(kept_as_chunks(kept)),
    };
    replayed(response)
}

/// How a waiting request learns its outcome.
pub struct Waiting {
    /// The run's outcome, when it comes (`None`: the run was dropped).
    pub outcome: BoxFuture<'static, Option<Outcome>>,
    /// This request's own deadline.
    pub deadline: Instant,
    /// The shape it asks for.
    pub shape: ResponseShape,
    /// For a chat stream with `LADLE_STREAM_KEEPALIVE_MS`: the silence after
    /// which the head and comments go out, and when the request arrived.
    pub keep_alive: Option<(Duration, Instant)>,
    /// This request's id, for an error event.
    pub request_id: String,
}

/// Waits for another request's run (until this request's `deadline`), then
/// answers with its outcome. A waiting chat stream goes through the commit point
/// like a run of its own: nothing meanwhile but the keep-alive comments, if on.
pub async fn wait(waiting: Waiting) -> Response {
    let Waiting {
        outcome,
        deadline,
        shape,
        keep_alive,
        request_id,
    } = waiting;
    let settled = async move { settled(timeout_at(deadline, outcome).await.map_err(drop)) };
    if shape == ResponseShape::ChatStream {
        let steps = futures_util::stream::once(settled).flat_map(|outcome| {
            let steps = match outcome {
                Ok(kept) => vec![Step::End(kept_as_chunks(&kept))],
                Err((error, attempts)) => vec![Step::Attempt(attempts), Step::Failed(error)],
            };
            futures_util::stream::iter(steps)
        });
        return replayed(commit::respond(Box::pin(steps), request_id, keep_alive).await);
    }
    replayed(match settled.await {
        Ok(kept) => replay(&kept, shape),
        Err((error, attempts)) => error.into_completion_response(attempts),
    })
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

fn replayed(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

fn sse(body: bytes::Bytes) -> Response {
    super::sse_response(axum::body::Body::from(body))
}
