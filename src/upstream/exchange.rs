//! One request and its response on one connection, driven by whoever polls it.
//!
//! hyper's pooled client runs each connection as a task of its own and hands body
//! chunks to the reader over a one-slot channel: two task wake-ups per chunk, and
//! never more than one chunk ready at a time, so a relay could not join chunks that
//! arrived together into one write. Here the connection's driver is polled from the
//! body's own `poll_next`, on the task that relays the answer: a socket read that
//! brings several chunks yields them one after another without a wake-up, and the
//! relay sends them in one write. Dropping the body drops the connection, which
//! closes the upstream socket at once.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use futures_util::task::noop_waker_ref;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::{Request, Response};

use super::connection::{Connection, Pool};

/// Sends `request` and drives the connection until the response head arrives.
pub async fn send(
    mut connection: Connection,
    request: Request<Full<Bytes>>,
) -> Result<(Response<Incoming>, Option<Connection>), hyper::Error> {
    let mut response = std::pin::pin!(connection.sender.send_request(request));
    let mut driver_done = false;
    let head = std::future::poll_fn(|cx| {
        if !driver_done && let Poll::Ready(result) = Pin::new(&mut connection.driver).poll(cx) {
            driver_done = true;
            // A failed driver has already failed the response; its error is the one
            // worth reporting.
            result?;
        }
        response.as_mut().poll(cx)
    })
    .await?;
    Ok((head, (!driver_done).then_some(connection)))
}

/// A response body that drives its own connection and returns it to the pool
/// once the body has ended cleanly.
pub struct BodyStream {
    body: Incoming,
    connection: Option<Connection>,
    pool: Arc<Pool>,
}

impl BodyStream {
    pub fn new(body: Incoming, connection: Option<Connection>, pool: Arc<Pool>) -> Self {
        BodyStream {
            body,
            connection,
            pool,
        }
    }

    /// Lets the driver read and decode; `Err` when the connection failed.
    fn drive(&mut self, cx: &mut Context<'_>) -> Result<(), hyper::Error> {
        if let Some(connection) = &mut self.connection
            && let Poll::Ready(result) = Pin::new(&mut connection.driver).poll(cx)
        {
            self.connection = None;
            result?;
        }
        Ok(())
    }
}

impl Drop for BodyStream {
    /// A reader may stop at `[DONE]`, a step before the body's own end. When that
    /// end has already arrived the connection is still good: keep it. Anything
    /// still in flight means the socket is closed instead.
    fn drop(&mut self) {
        if self.connection.is_none() {
            return;
        }
        let mut cx = Context::from_waker(noop_waker_ref());
        for _ in 0..MAX_FRAMES_LEFT {
            match Pin::new(&mut *self).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(None) | Poll::Ready(Some(Err(_))) | Poll::Pending => return,
            }
        }
    }
}

/// Frames a dropped body may still read to reach its end without waiting.
const MAX_FRAMES_LEFT: usize = 4;

impl Stream for BodyStream {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Err(error) = this.drive(cx) {
                return Poll::Ready(Some(Err(super::error_chain(&error))));
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(error))) => {
                    this.connection = None;
                    return Poll::Ready(Some(Err(super::error_chain(&error))));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => return Poll::Ready(Some(Ok(data))),
                    // Trailers and empty frames carry nothing for the reader.
                    _ => continue,
                },
                Poll::Ready(None) => {
                    if let Some(connection) = this.connection.take() {
                        this.pool.put(connection);
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }
}
