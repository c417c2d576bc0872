//! One connection's socket, with hyper's own error answers rewritten. What its
//! accept task and its requests share is `ops::connection::Connection`.
//!
//! **hyper answers a request it cannot parse itself** (a head over the limit,
//! broken framing), with an empty body and no request id. Every other answer
//! head answers a request the service was called for, so the socket wrapper
//! counts the heads written against the service's calls: a head beyond them
//! (with hyper's statuses: 400, 414, 431) can only be such an answer, and the
//! contract's JSON error, with a new `X-Request-Id`, goes out instead.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::ops::connection::Connection;

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
        if self.heads < self.connection.calls() || !matches!(status, 400 | 414 | 431) {
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
