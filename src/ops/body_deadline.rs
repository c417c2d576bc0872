//! Slow senders: a request's body must arrive whole within `LADLE_BODY_READ_TIMEOUT_MS`
//! of the request's arrival.
//!
//! The budget is one deadline for the whole body, not a timer reset by each piece
//! (as tower-http's `RequestBodyTimeoutLayer` is): a client trickling one byte at
//! a time would otherwise hold a connection and a handler for as long as it likes.
//! The body limit (`DefaultBodyLimit`) bounds the size; this bounds the time. A
//! handler that reads the body sees [`BodyTimedOut`] as the body's error, and
//! `routes::read_body` turns it into `400 invalid_request`.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep, sleep_until};

/// The body did not arrive in time.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("request body not received in time")]
pub struct BodyTimedOut;

/// Gives the request body one deadline: `budget` from the request's arrival.
pub fn limit(request: Request, arrived: Instant, budget: Duration) -> Request {
    request.map(|body| {
        Body::new(Timed {
            inner: body,
            deadline: Box::pin(sleep_until(arrived + budget)),
        })
    })
}

/// Whether an error (or anything in its chain of causes) is a [`BodyTimedOut`].
pub fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<BodyTimedOut>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// A request body that fails once its deadline has passed.
struct Timed {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
}

impl http_body::Body for Timed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
