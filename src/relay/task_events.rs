//! The task route's answers: one JSON document, or named SSE events.
//!
//! Events follow the contract's table: `attempt`, `retry`, `reset` (only when the
//! failed attempt had written output), `delta`, then exactly one `result` or
//! `error`, whose data is exactly the non-streaming body. A `: ping` comment goes
//! out whenever 15 s pass without an event.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use serde_json::{Value, json};

use crate::completion::{Finished, Progress};
use crate::error::{ApiError, StreamError};

/// Who the answer is for: the names the result body carries.
#[derive(Debug, Clone)]
pub struct TaskCall {
    /// The task name.
    pub task: String,
    /// The request id.
    pub request_id: String,
}

/// Drives the completion to its end and answers with one JSON document.
pub async fn whole(progress: impl Stream<Item = Progress>, call: &TaskCall) -> Response {
    let mut progress = std::pin::pin!(progress);
    let mut attempts = 0;
    while let Some(step) = progress.next().await {
        match step {
            Progress::Finished(finished) => {
                return axum::Json(result_body(&finished, call)).into_response();
            }
            Progress::Failed(error) => return error.into_completion_response(attempts),
            Progress::Attempt(n) => attempts = n,
            Progress::Chunk(_) | Progress::Retry { .. } => {}
        }
    }
    ApiError::UpstreamFailed("the completion ended without an answer".into())
        .into_completion_response(attempts)
}

/// Answers at once with an SSE stream of the completion's progress.
pub fn streaming(
    progress: impl Stream<Item = Progress> + Send + 'static,
    call: TaskCall,
) -> Response {
    let failed = StreamError::default();
    let told = failed.clone();
    let events = progress.flat_map(move |step| {
        if let Progress::Failed(error) = &step {
            told.set(error.code());
        }
        stream::iter(events_for(step, &call))
    });
    let keep_alive = KeepAlive::new()
        .interval(Duration::from_secs(15))
        .text(" ping");
    let mut response = Sse::new(events.map(Ok::<_, Infallible>))
        .keep_alive(keep_alive)
        .into_response();
    // The request's log line names the error event the stream may end with.
    response.extensions_mut().insert(failed);
    response
}

/// The events one step of progress becomes.
fn events_for(step: Progress, call: &TaskCall) -> Vec<Event> {
    match step {
        Progress::Attempt(attempt) => vec![event("attempt", &json!({ "attempt": attempt }))],
        Progress::Chunk(received) => {
            let chunk = received.chunk;
            let reasoning = chunk
                .reasoning
                .map(|text| event("delta", &json!({ "reasoning": text })));
            let content = chunk
                .content
                .map(|text| event("delta", &json!({ "content": text })));
            reasoning.into_iter().chain(content).collect()
        }
        Progress::Retry {
            attempt,
            reason,
            wait,
            output_began,
            upstream,
        } => {
            let wait_ms = wait.as_millis() as u64;
            let retry = event(
                "retry",
                &json!({
                    "attempt": attempt,
                    "reason": reason.name(),
                    "wait_ms": wait_ms,
                    "upstream": upstream,
                }),
            );
            let reset = output_began.then(|| event("reset", &json!({ "attempt": attempt + 1 })));
            std::iter::once(retry).chain(reset).collect()
        }
        Progress::Finished(finished) => vec![event("result", &result_body(&finished, call))],
        Progress::Failed(error) => vec![event("error", &error.body(&call.request_id))],
    }
}

fn event(name: &'static str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// The non-streaming `200` body, also the `result` event's data.
pub fn result_body(finished: &Finished, call: &TaskCall) -> Value {
    let mut body = json!({
        "task": call.task,
        "output": finished.output,
        "meta": {
            "request_id": call.request_id,
            "attempts": finished.attempts,
            "elapsed_ms": finished.elapsed.as_millis() as u64,
            "model": finished.model,
            "upstream": finished.upstream,
        },
    });
    if let Some(usage) = &finished.usage {
        body["meta"]["usage"] = usage.clone();
    }
    body
}
