//! Progress of a completion → what the client sees, in the shape it asked for.
//!
//! `commit` owns the OpenAI stream's commit point: nothing, not even a status
//! line, reaches a streaming client before the first output chunk; `batched`
//! writes a committed stream; `wire` is the OpenAI JSON. `task_events` speaks the
//! task route's named SSE events, where a retry after output is announced with
//! `reset` instead of being hidden. `replay` answers from another request's run.

mod batched;
pub mod commit;
pub mod replay;
pub mod responses;
mod route;
mod step;
pub mod task_events;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio::time::Instant;

use crate::engine::completion::{Finished, Progress};
use crate::error::ApiError;
use crate::kept::{KeptAnswer, Named};
pub use route::CompletionRoute;
use task_events::ResultBody;

/// The shape of answer a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseShape {
    /// One `chat.completion`.
    ChatJson,
    /// An OpenAI chunk stream.
    ChatStream,
    /// A task's `200` body.
    TaskJson,
    /// A task's named events.
    TaskEvents,
    /// A Responses API response object (contract 12).
    ResponsesJson,
    /// A Responses API event stream.
    ResponsesEvents,
}

impl ResponseShape {
    /// Whether ladle assembles the whole answer itself (everything but a relayed
    /// OpenAI stream): it then asks the upstream for usage, keeps the answer's id
    /// and model, and may retry after output the client has not seen.
    pub fn assembled(self) -> bool {
        self != ResponseShape::ChatStream
    }
}

/// Who an answer is for and in what shape.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The shape asked for.
    pub shape: ResponseShape,
    /// The request's id, named in the answer.
    pub request_id: String,
    /// The route, and a task's name.
    pub route: CompletionRoute,
    /// The model asked for, named when the upstream names none.
    pub model: String,
    /// When the request arrived (Unix seconds): chat's `created`, a response's
    /// `created_at`.
    pub created: u64,
    /// For a chat stream: `LADLE_STREAM_KEEPALIVE_MS` and when the request
    /// arrived.
    pub keep_alive: Option<(Duration, Instant)>,
    /// For the Responses API: the response being made.
    pub made: Option<Arc<responses::Made>>,
}

impl Reply {
    /// `finished` as it is kept for the repeats of this request: whole, under
    /// this request's names.
    pub fn kept(&self, finished: &Finished) -> KeptAnswer {
        let named = Named {
            request_id: self.request_id.clone(),
            created: self.created,
            response_id: self.made.as_ref().map(|made| made.id.clone()),
        };
        KeptAnswer::new(finished, named)
    }

    /// This reply as it was for the first answer of a kept one: under its names.
    pub fn as_first(&self, named: Named) -> Reply {
        let made = self.made.as_ref().map(|made| {
            let id = named.response_id.clone();
            Arc::new(made.renamed(id.unwrap_or_else(|| made.id.clone()), named.created))
        });
        Reply {
            request_id: named.request_id,
            created: named.created,
            made,
            ..self.clone()
        }
    }

    /// The names of a chat answer to this request.
    fn chat_names(&self) -> wire::ChatNames<'_> {
        wire::ChatNames {
            request_id: &self.request_id,
            model: &self.model,
            created: self.created,
        }
    }

    /// A finished chat answer as a whole chunk stream.
    pub fn chunks(&self, finished: &Finished) -> bytes::Bytes {
        wire::finished_as_chunks(finished, &self.chat_names())
    }

    /// The whole `200` body of a finished completion, as a `Value`: what a job
    /// keeps as its result.
    pub fn body(&self, finished: &Finished) -> Value {
        match &self.route {
            CompletionRoute::Chat => wire::completion_body(finished, &self.chat_names()),
            CompletionRoute::Responses => match &self.made {
                Some(made) => made.finished(finished),
                None => Value::Null,
            },
            CompletionRoute::Task(task) => {
                let body = ResultBody::of(finished, task, &self.request_id);
                // Plain fields and JSON text always make a `Value`.
                serde_json::to_value(body).unwrap_or_default()
            }
        }
    }

    /// The same body as the JSON text the client is sent: a task's output goes in
    /// as the text it was written as once.
    pub fn body_text(&self, finished: &Finished) -> Vec<u8> {
        match &self.route {
            CompletionRoute::Chat | CompletionRoute::Responses => {
                self.body(finished).to_string().into_bytes()
            }
            CompletionRoute::Task(task) => {
                let body = ResultBody::of(finished, task, &self.request_id);
                let output = finished.output.as_ref().map_or(0, |o| o.json().len());
                // Room for the output and the meta around it, written once.
                let mut text = Vec::with_capacity(output + 512);
                // Plain fields and JSON text always serialize.
                let _ = serde_json::to_writer(&mut text, &body);
                text
            }
        }
    }

    /// Answers with the completion's progress, in the shape asked for.
    pub async fn answer(
        &self,
        progress: impl Stream<Item = Progress> + Send + 'static,
    ) -> Response {
        match self.shape {
            ResponseShape::ResponsesEvents => {
                let made = self.made.as_deref().cloned();
                let made = made.unwrap_or_else(|| {
                    responses::Made::new(self.model.clone(), Default::default())
                });
                responses::streaming(Box::pin(progress), made).await
            }
            ResponseShape::ChatJson | ResponseShape::TaskJson | ResponseShape::ResponsesJson => {
                match outcome(progress).await {
                    Ok(finished) => json_response(self.body_text(&finished)),
                    Err((error, attempts)) => error.into_completion_response(attempts),
                }
            }
            ResponseShape::ChatStream => {
                let steps = Box::pin(progress.map(commit::Step::from));
                commit::respond(steps, self.request_id.clone(), self.keep_alive).await
            }
            ResponseShape::TaskEvents => task_events::streaming(progress, self.clone()),
        }
    }
}

/// Drives a completion to its end: the answer, or the error and the number of
/// attempts made (for `x-should-retry`).
pub async fn outcome(
    progress: impl Stream<Item = Progress>,
) -> Result<Box<Finished>, (ApiError, u32)> {
    let mut progress = std::pin::pin!(progress);
    let mut attempts = 0;
    while let Some(step) = progress.next().await {
        match step {
            Progress::Finished(finished) => return Ok(finished),
            Progress::Failed(gave_up) => return Err((ApiError::from(gave_up), attempts)),
            Progress::Attempt(n) => attempts = n,
            Progress::Chunk(_) | Progress::Retry { .. } | Progress::Continue { .. } => {}
        }
    }
    let ended = ApiError::UpstreamFailed("the completion ended without an answer".into());
    Err((ended, attempts))
}

/// A `200` of JSON text.
pub fn json_response(text: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An event-stream answer that no proxy in between buffers.
pub fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    response
}
