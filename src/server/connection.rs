//! What one connection's accept task, its requests and its socket share.
//!
//! Two things need a view of the connection from inside a request:
//!
//! * **The deadline ends a stream however slowly its client reads** (contract
//!   10). A client that stops reading stops hyper from polling the response body,
//!   so the body can never notice its deadline; the completion inside it would
//!   hold its in-flight slot and its upstream connection. The observer tells the
//!   connection when a streamed answer's deadline is, and the accept task drops
//!   the whole connection (and with it the body, the completion and the upstream
//!   request) shortly after it passes, unless the answer ended first.
//! * **hyper answers a request it cannot parse itself** (a head over the limit,
//!   broken framing), with an empty body and no request id. Every other answer
//!   head answers a request the service was called for, so the socket wrapper
//!   counts the heads written against the service's calls: a head beyond them
//!   (with hyper's statuses: 400, 414, 431) can only be such an answer, and the
//!   contract's JSON error, with a new `X-Request-Id`, goes out instead.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long after a streamed answer's deadline its connection is dropped if the
/// answer has not ended by then (its own error event is due at the deadline).
pub const STOP_GRACE: Duration = Duration::from_millis(50);

/// One connection's shared state; requests find it in their extensions.
#[derive(Debug, Default)]
pub struct Connection {
    /// Requests the service was called for.
    calls: AtomicU64,
    /// When to drop the connection, if its current answer is still going.
    stop_at: Mutex<Option<Instant>>,
    changed: Notify,
}

impl Connection {
    /// A request arrived.
    pub fn request_began(&self) {
        self.calls.fetch_add(1, Ordering::AcqRel);
    }

    /// The request's answer ended (or was dropped): no stop is due.
    pub fn request_ended(&self) {
        self.set_stop(None);
    }

    /// The current answer is a stream that must be over by `deadline`.
    pub fn stream_until(&self, deadline: Instant) {
        self.set_stop(Some(deadline + STOP_GRACE));
    }

    fn set_stop(&self, at: Option<Instant>) {
        *self
            .stop_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = at;
        self.changed.notify_one();
    }

    fn stop_at(&self) -> Option<Instant> {
        *self
            .stop_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Resolves when a streamed answer outlived its deadline (never otherwise).
    pub async fn overdue(&self) {
        loop {
            let changed = self.changed.notified();
            match self.stop_at() {
                None => changed.await,
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {
                            if self.stop_at() == Some(at) {
                                return;
                            }
                        }
                        () = changed => {}
                    }
                }
            }
        }
    }
}

/// The socket, with hyper's own error answers rewritten (see the module docs).
pub struct Socket<S> {
    inner: S,
    connection: Arc<Connection>,
    /// Final (non-1xx) answer heads written so far.
    heads: u64,
    /// The replacement answer still to be written, and how far it is.
    replacing: Option<(Vec<u8>, usize)>,
}

impl<S> Socket<S> {
    /// Wraps a connection's stream.
    pub fn new(inner: S, connection: Arc<Connection>) -> Self {
        Socket {
            inner,
            connection,
            heads: 0,
            replacing: None,
        }
    }

    /// If `first` starts an answer head that no call of the service made, the
    /// JSON answer to write instead.
    fn replacement(&mut self, first: &[u8]) -> Option<Vec<u8>> {
        if !first.starts_with(b"HTTP/1.") {
            return None;
        }
        let status = std::str::from_utf8(first.get(9..12)?)
            .ok()?
            .parse::<u16>()
            .ok()?;
        if (100..200).contains(&status) {
            // `100 Continue`, written for a request in the service.
            return None;
        }
        if self.heads < self.connection.calls.load(Ordering::Acquire)
            || !matches!(status, 400 | 414 | 431)
        {
            self.heads += 1;
            return None;
        }
        Some(crate::error::below_the_router(status, super::MAX_HEAD))
    }
}

impl<S: AsyncWrite + Unpin> Socket<S> {
    /// Writes what is left of the replacement; ready once it is all out.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = self.replacing.as_mut() {
            if *written == bytes.len() {
                return Poll::Ready(Ok(()));
            }
            let n =
                std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes hyper's `len` bytes in place of the replacement, once it is out.
    fn poll_replaced(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_replacement(cx))?;
        Poll::Ready(Ok(len))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Socket<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Socket<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.replacing.is_none()
            && let Some(answer) = self.replacement(buf)
        {
            self.replacing = Some((answer, 0));
        }
        if self.replacing.is_some() {
            return self.poll_replaced(cx, buf.len());
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.replacing.is_none()
            && let Some(first) = bufs.iter().find(|b| !b.is_empty())
            && let Some(answer) = self.replacement(first)
        {
            self.replacing = Some((answer, 0));
        }
        if self.replacing.is_some() {
            let len = bufs.iter().map(|b| b.len()).sum();
            return self.poll_replaced(cx, len);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
