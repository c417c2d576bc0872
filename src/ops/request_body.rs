//! A request body's two bounds, kept by one wrapper: it must arrive whole within
//! `LADLE_BODY_READ_TIMEOUT_MS` of the request's arrival, and hold at most
//! `LADLE_MAX_BODY_BYTES`.
//!
//! The time allowed is one deadline for the whole body, not a timer reset by each
//! piece (as tower-http's `RequestBodyTimeoutLayer` is): a client trickling one byte
//! at a time would otherwise hold a connection and a handler for as long as it
//! likes. The size is checked here rather than by axum's `DefaultBodyLimit`, which
//! would be one more layer and two more request extensions on every request. A
//! handler that reads the body sees [`BodyTimedOut`] or [`BodyTooLarge`] as the
//! body's error, and `routes::read_body` turns them into contract errors.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep, sleep_until};

/// The body did not arrive in time.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("request body not received in time")]
pub struct BodyTimedOut;

/// The body holds more bytes than allowed.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("request body larger than {0} bytes")]
pub struct BodyTooLarge(pub usize);

/// The bounds a request body is read within.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Time allowed from the request's arrival.
    pub time: Duration,
    /// Bytes allowed.
    pub max_bytes: usize,
}

/// Bounds the request body: `time` from the request's arrival, `max_bytes` in all.
pub fn bound(request: Request, arrived: Instant, bounds: Bounds) -> Request {
    request.map(|body| {
        Body::new(Bounded {
            inner: body,
            deadline: arrived + bounds.time,
            timer: None,
            left: bounds.max_bytes,
            max_bytes: bounds.max_bytes,
        })
    })
}

/// The first `E` in an error's chain of causes.
pub fn cause<E: std::error::Error + Copy + 'static>(
    error: &(dyn std::error::Error + 'static),
) -> Option<E> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(found) = error.downcast_ref::<E>() {
            return Some(*found);
        }
        cause = error.source();
    }
    None
}

/// A request body that fails once its deadline has passed or its size is over.
/// The timer is set only when the body is not all there at once; most bodies
/// arrive with their head.
struct Bounded {
    inner: Body,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    /// Bytes still allowed.
    left: usize,
    max_bytes: usize,
}

impl http_body::Body for Bounded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let too_large = BodyTooLarge(self.max_bytes);
        if self.inner.size_hint().lower() > self.left as u64 {
            return failed(too_large);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            let size = match &frame {
                Some(Ok(frame)) => frame.data_ref().map_or(0, Buf::remaining),
                _ => 0,
            };
            return match self.left.checked_sub(size) {
                Some(left) => {
                    self.left = left;
                    Poll::Ready(frame)
                }
                None => failed(too_large),
            };
        }
        let deadline = self.deadline;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => failed(BodyTimedOut),
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

fn failed<E>(error: E) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    Poll::Ready(Some(Err(axum::Error::new(error))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounded(pieces: &[&'static str], max_bytes: usize) -> Body {
        let pieces: Vec<_> = pieces
            .iter()
            .map(|p| Bytes::from_static(p.as_bytes()))
            .collect();
        let stream = futures_util::stream::iter(pieces.into_iter().map(Ok::<_, std::io::Error>));
        let request = Request::new(Body::from_stream(stream));
        let bounds = Bounds {
            time: Duration::from_secs(60),
            max_bytes,
        };
        bound(request, Instant::now(), bounds).into_body()
    }

    async fn read(body: Body) -> Result<Bytes, Option<usize>> {
        axum::body::to_bytes(body, usize::MAX)
            .await
            .map_err(|e| cause::<BodyTooLarge>(&e).map(|too_large| too_large.0))
    }

    #[tokio::test]
    async fn pieces_are_counted_up_to_the_limit_and_not_a_byte_more() {
        assert_eq!(
            read(bounded(&["abc", "defg"], 7)).await.as_deref(),
            Ok(&b"abcdefg"[..])
        );
        assert_eq!(read(bounded(&["abc", "defg"], 6)).await, Err(Some(6)));
        assert_eq!(read(bounded(&["", "a"], 0)).await, Err(Some(0)));
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_fails_before_any_byte_is_read() {
        let request = Request::new(Body::from("0123456789"));
        let bounds = Bounds {
            time: Duration::from_secs(60),
            max_bytes: 9,
        };
        let mut body = bound(request, Instant::now(), bounds).into_body();
        let first =
            std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut body), cx)).await;
        let error = first
            .and_then(Result::err)
            .expect("the first frame is the error");
        assert_eq!(cause::<BodyTooLarge>(&error).map(|e| e.0), Some(9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_times_out_at_its_deadline() {
        let stream = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
        let bounds = Bounds {
            time: Duration::from_secs(3),
            max_bytes: 100,
        };
        let started = Instant::now();
        let body = bound(Request::new(Body::from_stream(stream)), started, bounds).into_body();
        let error = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect_err("times out");
        assert!(cause::<BodyTimedOut>(&error).is_some());
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
