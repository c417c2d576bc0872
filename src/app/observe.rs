//! The one middleware every request passes: one log line and one counter per
//! request, whatever route answered; the body's bounds; error bodies.
//!
//! It is one tower layer with its own future, not `axum::middleware::from_fn`:
//! `from_fn` clones the service stack below it and boxes two futures and a
//! service for every request (measured in docs/performance.md).
//!
//! The arrival instant is stored in the request, so a handler's deadline starts
//! when the request arrived, not when its body finished reading.
//!
//! A streamed answer is not over when its head is sent: the response body is
//! wrapped, and the request is counted, timed and logged when that body ends or is
//! dropped (the client went away, or the server closed the connection). So
//! `ladle_request_duration_seconds` and the line's `elapsed_ms` cover the whole
//! stream, and `head_ms` says when the head went out.

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::future::Either;
use http_body::{Frame, SizeHint};
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::clients::gate::{Caller, HeldUntilEnd};
use crate::engine::metrics::{Metrics, Took};
use crate::engine::trace::{TraceContext, TraceId};
use crate::error::{AnsweredOn, ApiError, ErrorCode};
use crate::ops::connection::Connection;
use crate::ops::facts::{Arrival, CompletionNote, LateWord, OutlivesItsWork, ReaderStall};
use crate::ops::request_body::{self, Bounds};
use crate::ops::request_id::RequestId;
use crate::relay::CompletionRoute;

/// Observes every route it wraps (a router layer, so the matched route is known).
#[derive(Clone)]
pub struct ObserveLayer {
    metrics: Metrics,
    body: Bounds,
    /// Whether client keys are on: requests are then counted and logged by client.
    clients: bool,
}

impl ObserveLayer {
    /// Counts into `metrics`; request bodies are read within `body`.
    pub fn new(metrics: Metrics, body: Bounds, clients: bool) -> Self {
        ObserveLayer {
            metrics,
            body,
            clients,
        }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            inner,
            layer: self.clone(),
        }
    }
}

/// A route, observed.
#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    layer: ObserveLayer,
}

impl<S> Service<Request> for Observe<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Observing<Either<S::Future, Ready<Result<Response, Infallible>>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let arrived = Instant::now();
        request.extensions_mut().insert(Arrival(arrived));
        let trace = TraceContext::from_headers(request.headers());
        let trace_id = trace.id();
        request.extensions_mut().insert(trace);
        let connection = request.extensions().get::<Arc<Connection>>().cloned();
        if let Some(connection) = &connection {
            connection.request_began();
        }
        let route = request.extensions().get::<MatchedPath>().cloned();
        let kind = match route.as_ref().map(MatchedPath::as_str) {
            Some(CompletionRoute::CHAT | CompletionRoute::RESPONSES) => AnsweredOn::Chat,
            Some(CompletionRoute::TASK) => AnsweredOn::Task,
            _ => AnsweredOn::Other,
        };
        let seen = Seen {
            connection,
            metrics: self.layer.metrics.clone(),
            route,
            kind,
            request_id: RequestId::of(&request),
            trace_id,
            method: request.method().clone(),
            arrived,
            clients: self.layer.clients,
        };
        // HTTP/1.1 makes `Host` required (RFC 9112, 3.2); hyper lets it pass.
        let inner = if request.version() == axum::http::Version::HTTP_11
            && !request.headers().contains_key(axum::http::header::HOST)
        {
            let missing =
                ApiError::InvalidRequest("an HTTP/1.1 request needs a Host header".into());
            Either::Right(std::future::ready(Ok(missing.into_response())))
        } else {
            Either::Left(
                self.inner
                    .call(request_body::bound(request, arrived, self.layer.body)),
            )
        };
        Observing {
            inner,
            arrived: Some(seen),
        }
    }
}

pin_project_lite::pin_project! {
    /// The route's answer, with its errors rendered and its body observed.
    pub struct Observing<F> {
        #[pin]
        inner: F,
        arrived: Option<Seen>,
    }
}

/// What is known of a request before its handler answers.
struct Seen {
    /// The connection the request came on (absent when served without one).
    connection: Option<Arc<Connection>>,
    metrics: Metrics,
    /// The matched route (a shared string); `None` is counted as "unmatched".
    route: Option<MatchedPath>,
    /// Which kind of route it is: a completion route's errors and timing differ.
    kind: AnsweredOn,
    request_id: RequestId,
    /// The request's trace (the caller's, or one started here).
    trace_id: TraceId,
    method: Method,
    arrived: Instant,
    /// Whether client keys are on.
    clients: bool,
}

impl<F> Future for Observing<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = ready!(this.inner.poll(cx));
        let seen = this
            .arrived
            .take()
            .expect("an observed request is answered once");
        let mut response =
            crate::error::render_error(response, &seen.request_id, seen.trace_id, seen.kind);
        let note = response.extensions_mut().remove::<CompletionNote>();
        // A stream's connection is dropped if the stream outlives its deadline,
        // however slowly its client reads.
        let deadline = note.as_ref().and_then(|note| note.deadline);
        if let (Some(connection), Some(deadline)) = (&seen.connection, deadline)
            && is_event_stream(&response)
        {
            connection.stream_until(deadline.at);
        }
        let error = response.extensions().get::<ErrorCode>().map(|code| code.0);
        let caller = response.extensions_mut().remove::<Caller>();
        let held = response.extensions_mut().remove::<HeldUntilEnd>();
        let held = held.filter(|_| response.extensions().get::<OutlivesItsWork>().is_none());
        let stall = response
            .extensions()
            .get::<ReaderStall>()
            .map(|stall| stall.0);
        if let (Some(connection), Some(stall)) = (&seen.connection, stall) {
            connection.stream_until(Instant::now() + stall);
        }
        let mut record = Record {
            client: seen
                .clients
                .then(|| caller.map(|c| c.0).unwrap_or_default()),
            _held: held,
            stall,
            status: response.status().as_u16(),
            error,
            stream_error: response.extensions().get::<LateWord>().cloned(),
            note,
            head: seen.arrived.elapsed(),
            ended: false,
            seen,
        };
        Poll::Ready(Ok(response.map(|body| {
            // An empty body (a 204, say) may never be polled; it is whole already.
            record.ended = http_body::Body::is_end_stream(&body);
            Body::new(Observed {
                inner: body,
                record,
            })
        })))
    }
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
        if let (Poll::Ready(Some(Ok(_))), Some(stall)) = (&polled, self.record.stall)
            && let Some(connection) = &self.record.seen.connection
        {
            connection.stream_until(Instant::now() + stall);
        }
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
    seen: Seen,
    status: u16,
    error: Option<&'static str>,
    /// Where a `200` stream's relay writes the error it ended with, if any.
    stream_error: Option<LateWord>,
    /// A completion route's own fields.
    note: Option<CompletionNote>,
    /// With client keys: the caller's name (`""` if none was accepted).
    client: Option<String>,
    /// What the request holds until its body ends (a client key's slot).
    _held: Option<HeldUntilEnd>,
    /// A job stream's stall limit: every frame written pushes its cut back.
    stall: Option<Duration>,
    head: Duration,
    ended: bool,
}

/// Whether an answer is an event stream (its body may outlive its deadline).
fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"))
}

impl Drop for Record {
    fn drop(&mut self) {
        let seen = &self.seen;
        if let Some(connection) = &seen.connection {
            connection.request_ended();
        }
        let elapsed = seen.arrived.elapsed();
        let route = seen.route.as_ref().map_or("unmatched", MatchedPath::as_str);
        let client = self.client.as_deref();
        let took = Took {
            elapsed,
            timed: seen.kind != AnsweredOn::Other,
        };
        seen.metrics.request(route, self.status, client, took);
        // An error's code, a stream's closing error event's; else whether the body
        // was sent whole.
        let late = self.stream_error.as_ref().and_then(LateWord::word);
        let outcome = match (self.error.or(late), self.ended) {
            (Some(code), _) => code,
            (None, true) => "ok",
            (None, false) => "aborted",
        };
        let note = self.note.as_ref();
        let (prompt_tokens, completion_tokens) = note.map(|n| n.usage.tokens()).unwrap_or_default();
        // A failure of ladle's or an upstream's (a 5xx, or a stream's closing
        // error event) is a warning; a caller's mistake (a 4xx) is not.
        let failed = self.status >= 500 || late.is_some();
        macro_rules! request_line {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    request_id = %seen.request_id,
                    trace_id = %seen.trace_id,
                    route,
                    method = %seen.method,
                    status = self.status,
                    outcome,
                    elapsed_ms = elapsed.as_millis() as u64,
                    head_ms = self.head.as_millis() as u64,
                    deadline_ms = note
                        .and_then(|n| n.deadline)
                        .map(|d| (d.at - d.started).as_millis() as u64),
                    idempotency_key = note.and_then(|n| n.idempotency_key.as_deref()),
                    idempotency = note.and_then(|n| n.idempotency),
                    response_id = note.and_then(|n| n.response_id.as_deref()),
                    client,
                    cache = note.and_then(|n| n.cache.as_ref()?.word()),
                    prompt_tokens,
                    completion_tokens,
                    "request answered"
                )
            };
        }
        match failed {
            true => request_line!(tracing::Level::WARN),
            false => request_line!(tracing::Level::INFO),
        }
    }
}
