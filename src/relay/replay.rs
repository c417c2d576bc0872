//! Answers taken from another request's run (contract 6.6): a kept answer, or the
//! outcome of a run this request waited for, rendered in the shape this request
//! asks for, under the names the first answer was given. Every one carries
//! `Idempotent-Replayed: true`.

use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::time::{Instant, timeout_at};

use super::commit::{self, Step};
use super::{Reply, ResponseShape};
use crate::engine::completion::Finished;
use crate::error::ApiError;
use crate::idempotency::{Kept, Outcome};

/// The header of an answer from another request's run.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// What `kept` holds, answered to `reply`'s request.
pub fn replay(kept: &Kept, reply: &Reply) -> Response {
    let response = match first_answer(kept, reply) {
        Ok((reply, finished)) => rendered(&reply, &finished),
        Err(error) => error.into_completion_response(0),
    };
    replayed(response)
}

/// The answer `kept` holds and the reply it was first rendered by; an error
/// when the key kept a job submit (another request under the key).
fn first_answer(kept: &Kept, reply: &Reply) -> Result<(Reply, Finished), ApiError> {
    match kept {
        Kept::Answer(answer) => Ok((reply.as_first(answer.named()), answer.finished())),
        Kept::Submitted(_) => Err(ApiError::IdempotencyKeyReused),
    }
}

/// A finished answer in `reply`'s shape, whole at once.
fn rendered(reply: &Reply, finished: &Finished) -> Response {
    match reply.shape {
        ResponseShape::ChatJson | ResponseShape::TaskJson | ResponseShape::ResponsesJson => {
            super::json_response(reply.body_text(finished))
        }
        ResponseShape::ResponsesEvents => {
            let made = reply.made.as_deref().cloned();
            let events = made.map(|made| super::responses::Events::replayed(made, finished));
            let frames: Vec<u8> = events.iter().flatten().flat_map(|e| e.frame()).collect();
            sse(frames.into())
        }
        ResponseShape::TaskEvents => {
            let mut frame = b"event: result\ndata: ".to_vec();
            frame.extend(reply.body_text(finished));
            frame.extend_from_slice(b"\n\n");
            sse(frame.into())
        }
        ResponseShape::ChatStream => sse(reply.chunks(finished)),
    }
}

/// How a waiting request learns its outcome.
pub struct Waiting {
    /// The run's outcome, when it comes (`None`: the run was dropped).
    pub outcome: BoxFuture<'static, Option<Outcome>>,
    /// This request's own deadline.
    pub deadline: Instant,
    /// Who the answer is for, in what shape.
    pub reply: Reply,
}

/// Waits for another request's run (until this request's `deadline`), then
/// answers with its outcome. A waiting chat stream goes through the commit point
/// like a run of its own: nothing meanwhile but the keep-alive comments, if on.
pub async fn wait(waiting: Waiting) -> Response {
    let Waiting {
        outcome,
        deadline,
        reply,
    } = waiting;
    let settled = async move { settled(timeout_at(deadline, outcome).await.map_err(drop)) };
    if reply.shape == ResponseShape::ChatStream {
        let (request_id, keep_alive) = (reply.request_id.clone(), reply.keep_alive);
        let steps = futures_util::stream::once(settled).flat_map(move |outcome| {
            let answer = outcome.and_then(|kept| first_answer(&kept, &reply).map_err(|e| (e, 0)));
            let steps = match answer {
                Ok((reply, finished)) => vec![Step::End(reply.chunks(&finished))],
                Err((error, attempts)) => vec![Step::Attempt(attempts), Step::Failed(error)],
            };
            futures_util::stream::iter(steps)
        });
        return replayed(commit::respond(Box::pin(steps), request_id, keep_alive).await);
    }
    match settled.await {
        Ok(kept) => replay(&kept, &reply),
        Err((error, attempts)) => replayed(error.into_completion_response(attempts)),
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

fn replayed(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

fn sse(body: bytes::Bytes) -> Response {
    super::sse_response(axum::body::Body::from(body))
}
