//! The fast mock upstream: a separate process (the bench binary re-executed with
//! `--mock-upstream PORT_FILE N GAP_MS`) that answers every
//! `POST /v1/chat/completions` with an OpenAI SSE stream.
//!
//! A stream is N small content chunks, the first at once and each later one after
//! the gap, then a finish chunk and `data: [DONE]` right behind the last content
//! chunk. A request may override N and the gap with the extra body fields
//! `n_chunks` and `gap_ms`, which both relays forward unchanged, so one mock serves
//! every load shape. With no gap the whole answer is written in one frame.
//!
//! `cut_at` cuts a stream after that many content chunks (the body ends, no finish,
//! no `[DONE]`); a request whose last message is an assistant `prefix` (contract
//! 11.4) gets the chunks that prefix lacks, the first at once.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::post;
use futures_util::stream;

/// One content chunk, as a small OpenAI-compatible upstream writes it.
pub const CONTENT: &[u8] = b"data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1764480000,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok \"},\"finish_reason\":null}]}\n\n";
/// The finish chunk and the end marker.
pub const TAIL: &[u8] = b"data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1764480000,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

#[derive(Clone, Copy)]
struct Shape {
    chunks: u32,
    gap: Duration,
    cut_at: Option<u32>,
}

#[derive(serde::Deserialize)]
struct Overrides {
    n_chunks: Option<u32>,
    gap_ms: Option<u64>,
    cut_at: Option<u32>,
    #[serde(default)]
    messages: Vec<serde_json::Value>,
}

impl Overrides {
    /// Content chunks a continuation's prefix holds already (each is `tok `).
    fn continued(&self) -> Option<u32> {
        let last = self.messages.last()?;
        let prefix = last["content"]
            .as_str()
            .filter(|_| last["prefix"] == true)?;
        Some((prefix.len() / 4) as u32)
    }
}

/// Runs the mock until the process is killed; writes the bound port to `port_file`.
pub fn run(args: &[String]) -> Result<(), String> {
    let [port_file, chunks, gap_ms] = args else {
        return Err("usage: --mock-upstream PORT_FILE N GAP_MS".into());
    };
    let default = Shape {
        chunks: chunks.parse().map_err(|_| "N must be a number")?,
        gap: Duration::from_millis(gap_ms.parse().map_err(|_| "GAP_MS must be a number")?),
        cut_at: None,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let partial = format!("{port_file}.part");
        std::fs::write(&partial, port.to_string()).map_err(|e| e.to_string())?;
        std::fs::rename(&partial, port_file).map_err(|e| e.to_string())?;
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move |body: Bytes| async move { answer(default, &body) }),
        );
        axum::serve(listener, app).await.map_err(|e| e.to_string())
    })
}

fn answer(default: Shape, body: &[u8]) -> Response {
    let shape = match serde_json::from_slice::<Overrides>(body) {
        Ok(o) => {
            let chunks = o.n_chunks.unwrap_or(default.chunks).max(1);
            let written = o.continued();
            Shape {
                chunks: chunks.saturating_sub(written.unwrap_or(0)).max(1),
                gap: o.gap_ms.map_or(default.gap, Duration::from_millis),
                cut_at: o.cut_at.filter(|_| written.is_none()),
            }
        }
        Err(_) => default,
    };
    let body = if shape.gap.is_zero() {
        let mut whole = Vec::with_capacity(CONTENT.len() * shape.chunks as usize + TAIL.len());
        for _ in 0..shape.chunks {
            whole.extend_from_slice(CONTENT);
        }
        whole.extend_from_slice(TAIL);
        Body::from_stream(stream::once(async move {
            Ok::<_, Infallible>(Bytes::from(whole))
        }))
    } else {
        Body::from_stream(stream::unfold(1u32, move |i| async move {
            if i > shape.chunks || shape.cut_at.is_some_and(|cut| i > cut) {
                return None;
            }
            if i > 1 {
                tokio::time::sleep(shape.gap).await;
            }
            let frame = if i == shape.chunks {
                Bytes::from([CONTENT, TAIL].concat())
            } else {
                Bytes::from_static(CONTENT)
            };
            Some((Ok::<_, Infallible>(frame), i + 1))
        }))
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
