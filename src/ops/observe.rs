//! The one middleware every request passes: one log line and one counter per
//! request, whatever route answered; the body deadline; error bodies.
//!
//! It is one middleware, not three, because each `from_fn` layer clones the whole
//! service stack below it for every request: three layers cost about 11,000
//! instructions per request (callgrind), a tenth of a short request's work.
//!
//! The arrival instant is stored in the request, so a handler's deadline starts
//! when the request arrived, not when its body finished reading.
//!
//! A streamed answer is not over when its head is sent: the response body is
//! wrapped, and the request is counted, timed and logged when that body ends or is
//! dropped (the client went away, or the server closed the connection). So
//! `ladle_request_duration_seconds` and the line's `elapsed_ms` cover the whole
//! stream, and `head_ms` says when the head went out.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::Instant;

use super::body_deadline;
use super::metrics::Metrics;
use super::request_id::RequestId;
use crate::app::AppState;

/// When the request arrived.
#[derive(Debug, Clone, Copy)]
pub struct Arrival(pub Instant);

/// The contract error code a response carries, set where errors are rendered.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode(pub &'static str);

/// Counts and logs each request by route and status, once its body is over.
pub async fn observe(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    let arrived = Instant::now();
    request.extensions_mut().insert(Arrival(arrived));
    let route = request.extensions().get::<MatchedPath>().cloned();
    let request_id = RequestId::of(&request);
    let method = request.method().clone();
    let request = body_deadline::limit(request, arrived, app.config.body_read_timeout);
    let response = crate::error::render_error(next.run(request).await, &request_id);
    let metrics = app.metrics.clone();
    let error = response.extensions().get::<ErrorCode>().map(|code| code.0);
    let mut record = Record {
        metrics,
        route,
        request_id,
        method,
        status: response.status().as_u16(),
        error,
        arrived,
        head: arrived.elapsed(),
        ended: false,
    };
    response.map(|body| {
        // An empty body (a 204, say) may never be polled; it is whole already.
        record.ended = http_body::Body::is_end_stream(&body);
        Body::new(Observed {
            inner: body,
            record,
        })
    })
}

/// A response body that records its request when it ends or is dropped.
struct Observed {
    inner: Body,
    record: Record,
}

impl http_body::Body for Observed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.record.ended = true,
            // hyper stops polling once the body says it is over.
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.record.ended = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What is known about a request once its head is out.
struct Record {
    metrics: Metrics,
    /// The matched route (a shared string); `None` is counted as "unmatched".
    route: Option<MatchedPath>,
    request_id: RequestId,
    method: Method,
    status: u16,
    error: Option<&'static str>,
    arrived: Instant,
    head: std::time::Duration,
    ended: bool,
}

impl Drop for Record {
    fn drop(&mut self) {
        let elapsed = self.arrived.elapsed();
        let route = self.route.as_ref().map_or("unmatched", MatchedPath::as_str);
        self.metrics.request(route, self.status, elapsed);
        // An error's code; else whether the body was sent whole.
        let outcome = match (self.error, self.ended) {
            (Some(code), _) => code,
            (None, true) => "ok",
            (None, false) => "aborted",
        };
        tracing::info!(
            request_id = %self.request_id,
            route,
            method = %self.method,
            status = self.status,
            outcome,
            elapsed_ms = elapsed.as_millis() as u64,
            head_ms = self.head.as_millis() as u64,
            "request answered"
        );
    }
}
