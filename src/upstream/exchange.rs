//! One request and its response on one connection, read by whoever polls it.
//!
//! The response body reads its socket from its own `poll_next`, on the task that
//! relays the answer: no connection task and no channel between them, so a chunk
//! costs one wake-up, and a socket read that brings several chunks yields them
//! one after another for the relay to send in one write. Dropping the body drops
//! the connection, which closes the upstream socket at once.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use futures_util::task::noop_waker_ref;
use tokio::io::AsyncWriteExt;

use super::connection::{Connection, Pool};
use super::http1::{self, BodyDecoder, ResponseHead, Step};

/// Why an exchange failed before the response head.
#[derive(Debug)]
pub enum Failure {
    /// Writing the request failed: the upstream cannot have acted on it.
    Unsent(io::Error),
    /// The request went out; the answer broke or never came.
    Broken(String),
}

/// Writes `request` and reads until the response head has arrived.
pub async fn send(connection: &mut Connection, request: &[u8]) -> Result<ResponseHead, Failure> {
    connection
        .io
        .write_all(request)
        .await
        .map_err(Failure::Unsent)?;
    connection.io.flush().await.map_err(Failure::Unsent)?;
    loop {
        match http1::take_head(&mut connection.read) {
            Ok(Some(head)) => return Ok(head),
            Ok(None) => {}
            Err(error) => return Err(Failure::Broken(error.to_string())),
        }
        match std::future::poll_fn(|cx| connection.poll_fill(cx)).await {
            Ok(0) => {
                return Err(Failure::Broken(
                    "the upstream closed the connection before answering".into(),
                ));
            }
            Ok(_) => {}
            Err(error) => return Err(Failure::Broken(error.to_string())),
        }
    }
}

/// A response body that reads its own connection and returns it to the pool
/// once the body has ended cleanly.
pub struct BodyStream {
    /// `None` once the body has ended or failed.
    connection: Option<Connection>,
    decoder: BodyDecoder,
    reusable: bool,
    pool: Arc<Pool>,
}

impl BodyStream {
    pub fn new(connection: Connection, head: &ResponseHead, pool: Arc<Pool>) -> Self {
        BodyStream {
            connection: Some(connection),
            decoder: head.body.clone(),
            reusable: head.reusable,
            pool,
        }
    }

    fn end(&mut self) -> Poll<Option<Result<Bytes, String>>> {
        if let Some(connection) = self.connection.take()
            && self.reusable
            && connection.read.is_empty()
        {
            self.pool.put(connection);
        }
        Poll::Ready(None)
    }

    fn fail(&mut self, error: impl ToString) -> Poll<Option<Result<Bytes, String>>> {
        self.connection = None;
        Poll::Ready(Some(Err(error.to_string())))
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
        for _ in 0..MAX_STEPS_LEFT {
            match Pin::new(&mut *self).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(None) | Poll::Ready(Some(Err(_))) | Poll::Pending => return,
            }
        }
    }
}

/// Body steps a dropped body may still take to reach its end without waiting.
const MAX_STEPS_LEFT: usize = 4;

impl Stream for BodyStream {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let Some(connection) = &mut this.connection else {
                return Poll::Ready(None);
            };
            match this.decoder.step(&mut connection.read) {
                Ok(Step::Data(data)) => return Poll::Ready(Some(Ok(data))),
                Ok(Step::End) => return this.end(),
                Err(error) => return this.fail(error),
                Ok(Step::NeedMore) => {}
            }
            match connection.poll_fill(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    return match this.decoder.at_eof() {
                        Ok(()) => {
                            this.reusable = false;
                            this.end()
                        }
                        Err(error) => this.fail(error),
                    };
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(error)) => return this.fail(error),
            }
        }
    }
}
