//! Progress of a completion → what the client sees.
//!
//! `openai` speaks the OpenAI chat format and owns the commit point: nothing, not
//! even a status line, reaches a streaming client before the first output chunk.
//! `task_events` speaks the task route's named SSE events, where a retry after
//! output is announced with `reset` instead of being hidden. `batched` writes a
//! committed OpenAI stream.

mod batched;
mod keepalive;
pub mod openai;
pub mod replay;
pub mod task_events;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::Response;

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
