//! A stream polled inside a span: what `tracing::Instrument` is to a future.
//! A completion's stream is polled by whichever task drives the response body
//! (hyper's, a detached idempotent run's, a job's runner), so the span that
//! names its request goes with the stream, not with a task.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use tracing::Span;

/// `inner`, entering `span` on every poll, and when it is dropped (a
/// completion dropped mid-way writes its `cancelled` lines then).
pub struct InSpan<S> {
    /// `None` only while it is dropped.
    inner: Option<S>,
    span: Span,
}

impl<S> InSpan<S> {
    /// `inner`, polled inside `span`.
    pub fn new(inner: S, span: Span) -> Self {
        InSpan {
            inner: Some(inner),
            span,
        }
    }
}

impl<S> Drop for InSpan<S> {
    fn drop(&mut self) {
        let _entered = self.span.enter();
        self.inner.take();
    }
}

impl<S: Stream + Unpin> Stream for InSpan<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = self.get_mut();
        let _entered = this.span.enter();
        match this.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_next(cx),
            None => Poll::Ready(None),
        }
    }
}
