//! The task route's named SSE events, and its `200` body.
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

use super::Reply;
use crate::completion::{Finished, Progress};
use crate::ops::observe::LateWord;
use crate::wall::rfc3339;

/// Answers at once with an SSE stream of the completion's progress.
pub fn streaming(
    progress: impl Stream<Item = Progress> + Send + 'static,
    reply: Reply,
) -> Response {
    let failed = LateWord::default();
    let told = failed.clone();
    let events = progress.flat_map(move |step| {
        if let Progress::Failed(error) = &step {
            told.set(error.code());
        }
        stream::iter(events_for(step, &reply))
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
fn events_for(step: Progress, reply: &Reply) -> Vec<Event> {
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
        Progress::Finished(finished) => vec![event("result", &reply.body(&finished))],
        Progress::Failed(error) => vec![event("error", &error.body(&reply.request_id))],
    }
}

fn event(name: &'static str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// The non-streaming `200` body, also the `result` event's data.
pub fn result_body(finished: &Finished, task: &str, request_id: &str) -> Value {
    let mut body = json!({
        "task": task,
        "output": finished.output,
        "meta": {
            "request_id": request_id,
            "attempts": finished.attempts,
            "elapsed_ms": finished.elapsed.as_millis() as u64,
            "model": finished.model,
            "upstream": finished.upstream,
        },
    });
    if let Some(usage) = &finished.usage {
        body["meta"]["usage"] = usage.clone();
    }
    if let Some(cached) = finished.cache {
        body["meta"]["cache"] = cached.name().into();
        if let Some(at) = cached.made_at() {
            body["meta"]["cached_at"] = rfc3339(at).into();
        }
    }
    body
}
