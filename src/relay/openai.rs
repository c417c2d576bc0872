//! The OpenAI-compatible answer: a `chat.completion` object or a chunk stream.
//!
//! Streaming holds chunks back until the first output chunk is ready. Until then a
//! failure is still a plain HTTP error, and a retry is invisible; held chunks of a
//! failed attempt are dropped. From the first output on the response is committed:
//! upstream chunks are relayed byte for byte (never re-serialized), and a later
//! failure ends the stream with one `error` event and no `[DONE]`.

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt, stream};
use serde_json::{Value, json};

use crate::completion::{Finished, Progress};
use crate::error::ApiError;

const DONE: &[u8] = b"data: [DONE]\n\n";

/// Drives the completion to its end and answers with one `chat.completion`.
pub async fn whole(
    progress: impl Stream<Item = Progress>,
    request_id: &str,
    model: &str,
) -> Response {
    let mut progress = std::pin::pin!(progress);
    while let Some(step) = progress.next().await {
        match step {
            Progress::Finished(finished) => {
                return axum::Json(completion_body(&finished, request_id, model)).into_response();
            }
            Progress::Failed(error) => return error.into_response(),
            Progress::Attempt(_) | Progress::Chunk(_) | Progress::Retry { .. } => {}
        }
    }
    ApiError::UpstreamFailed("the completion ended without an answer".into()).into_response()
}

/// Waits for the first output chunk, then answers with an SSE stream.
pub async fn streaming(
    progress: impl Stream<Item = Progress> + Send + 'static,
    request_id: String,
) -> Response {
    let mut progress = Box::pin(progress);
    let mut held: Vec<Bytes> = Vec::new();
    loop {
        match progress.next().await {
            Some(Progress::Chunk(received)) => {
                held.push(frame(&received.raw));
                if received.chunk.is_output() {
                    break;
                }
            }
            Some(Progress::Attempt(_) | Progress::Retry { .. }) => held.clear(),
            Some(Progress::Finished(_)) => {
                held.push(Bytes::from_static(DONE));
                return sse(stream::once(std::future::ready(concat(held))).boxed());
            }
            Some(Progress::Failed(error)) => return error.into_response(),
            None => {
                return ApiError::UpstreamFailed("the completion ended without an answer".into())
                    .into_response();
            }
        }
    }
    // Chunks that are already decoded when the client is ready for more go out in
    // one write: under load that saves a syscall and a wake-up per chunk.
    let first = stream::once(std::future::ready(concat(held)));
    let rest = progress
        .ready_chunks(MAX_BATCH)
        .map(move |steps| {
            concat(
                steps
                    .into_iter()
                    .filter_map(|step| after_commit(step, &request_id))
                    .collect(),
            )
        })
        .filter(|frames| std::future::ready(!frames.is_empty()));
    sse(first.chain(rest).boxed())
}

/// Most steps joined into one write.
const MAX_BATCH: usize = 32;

/// Frames joined into one buffer; a single frame is passed on without a copy.
fn concat(mut frames: Vec<Bytes>) -> Bytes {
    if frames.len() == 1 {
        return frames.pop().unwrap_or_default();
    }
    let mut joined = BytesMut::with_capacity(frames.iter().map(Bytes::len).sum());
    for frame in &frames {
        joined.extend_from_slice(frame);
    }
    joined.freeze()
}

/// What a committed stream sends for each later step.
fn after_commit(step: Progress, request_id: &str) -> Option<Bytes> {
    match step {
        Progress::Chunk(received) => Some(frame(&received.raw)),
        Progress::Finished(_) => Some(Bytes::from_static(DONE)),
        Progress::Failed(error) => Some(frame(error.body(request_id).to_string().as_bytes())),
        // The policy never retries a committed stream, so no new attempt follows.
        Progress::Attempt(_) | Progress::Retry { .. } => None,
    }
}

fn sse(body: futures_util::stream::BoxStream<'static, Bytes>) -> Response {
    let body = Body::from_stream(body.map(Ok::<_, std::convert::Infallible>));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// One `data:` event around a payload, in a single buffer.
fn frame(payload: &[u8]) -> Bytes {
    let mut event = BytesMut::with_capacity(payload.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(payload);
    event.extend_from_slice(b"\n\n");
    event.freeze()
}

/// The `chat.completion` object for a finished completion.
fn completion_body(finished: &Finished, request_id: &str, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": finished.content});
    if !finished.reasoning.is_empty() {
        message["reasoning_content"] = finished.reasoning.as_str().into();
    }
    let mut body = json!({
        "id": finished.meta.id.clone().unwrap_or_else(|| format!("chatcmpl-{request_id}")),
        "object": "chat.completion",
        "created": unix_seconds(),
        "model": finished.meta.model.as_deref().unwrap_or(model),
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finished.finish_reason.as_deref().unwrap_or("stop"),
        }],
    });
    if let Some(usage) = &finished.usage {
        body["usage"] = usage.clone();
    }
    body
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
