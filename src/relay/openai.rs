//! The OpenAI-compatible answer: a `chat.completion` object or a chunk stream.
//!
//! Streaming holds chunks back until the first output chunk is ready. Until then a
//! failure is still a plain HTTP error, and a retry is invisible; held chunks of a
//! failed attempt are dropped. From the first output on the response is committed:
//! upstream chunks are relayed byte for byte (never re-serialized), and a later
//! failure ends the stream with one `error` event and no `[DONE]`.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::time::{Instant, timeout_at};

use futures_util::{Stream, StreamExt, stream};
use serde_json::{Value, json};

use super::batched::{Batched, DONE, put_event};
use super::keepalive::KeepAlive;
use crate::completion::{Finished, Progress};
use crate::error::{ApiError, StreamError};

/// Drives the completion to its end and answers with one `chat.completion`.
pub async fn whole(
    progress: impl Stream<Item = Progress>,
    request_id: &str,
    model: &str,
) -> Response {
    let mut progress = std::pin::pin!(progress);
    let mut attempts = 0;
    while let Some(step) = progress.next().await {
        match step {
            Progress::Finished(finished) => {
                return axum::Json(completion_body(&finished, request_id, model)).into_response();
            }
            Progress::Failed(error) => return error.into_completion_response(attempts),
            Progress::Attempt(n) => attempts = n,
            Progress::Chunk(_) | Progress::Retry { .. } => {}
        }
    }
    ApiError::UpstreamFailed("the completion ended without an answer".into())
        .into_completion_response(attempts)
}

/// Waits for the first output chunk, then answers with an SSE stream. With
/// `keep_alive` (`LADLE_STREAM_KEEPALIVE_MS` and the request's arrival), a silence
/// that long sends the head early and comments until the first output.
pub async fn streaming(
    progress: impl Stream<Item = Progress> + Send + 'static,
    request_id: String,
    keep_alive: Option<(Duration, Instant)>,
) -> Response {
    let mut progress = Box::pin(progress);
    // Events held back until the commit point, already framed as they will be sent.
    let mut held = BytesMut::new();
    let mut attempts = 0;
    loop {
        let step = match keep_alive {
            None => progress.next().await,
            Some((every, arrived)) => match timeout_at(arrived + every, progress.next()).await {
                Ok(step) => step,
                Err(_silence) => {
                    let failed = StreamError::default();
                    let body = KeepAlive::new(progress, held, request_id, failed.clone(), every);
                    let mut response = sse(body.boxed());
                    response.extensions_mut().insert(failed);
                    return response;
                }
            },
        };
        match step {
            Some(Progress::Chunk(received)) => {
                put_event(&mut held, &received.raw);
                if received.chunk.is_output() {
                    break;
                }
            }
            Some(Progress::Attempt(n)) => {
                attempts = n;
                held.clear();
            }
            Some(Progress::Retry { .. }) => held.clear(),
            Some(Progress::Finished(_)) => {
                held.extend_from_slice(DONE);
                return sse(stream::once(std::future::ready(held.freeze())).boxed());
            }
            Some(Progress::Failed(error)) => return error.into_completion_response(attempts),
            None => {
                return ApiError::UpstreamFailed("the completion ended without an answer".into())
                    .into_completion_response(attempts);
            }
        }
    }
    let failed = StreamError::default();
    let mut response = sse(Batched::new(progress, held, request_id, failed.clone()).boxed());
    response.extensions_mut().insert(failed);
    response
}

fn sse(body: futures_util::stream::BoxStream<'static, Bytes>) -> Response {
    super::sse_response(Body::from_stream(
        body.map(Ok::<_, std::convert::Infallible>),
    ))
}

/// The `chat.completion` object for a finished completion.
pub fn completion_body(finished: &Finished, request_id: &str, model: &str) -> Value {
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
