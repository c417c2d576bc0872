//! Serving connections: HTTP/1.1 on hyper, with a header-read timeout and a
//! graceful drain.
//!
//! `axum::serve` cannot set hyper's header-read timeout, so this is its accept
//! loop written out. Each connection is served by hyper's HTTP/1 builder with a
//! timer, so a client that does not send a whole request head within
//! `header_read_timeout` (also between requests on a keep-alive connection) is
//! disconnected. When `shutdown` resolves, the listener is closed at once (new
//! connections are refused), idle connections close, and running requests and
//! streams finish; whatever is still open after the drain limit is dropped, so a
//! client that stops reading cannot hold the process forever.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};

use super::connection::Socket;
use crate::ops::connection::Connection;

/// The largest request head read (contract 10): hyper answers a larger one with
/// `431`, which `Socket` gives the contract's JSON body.
pub const MAX_HEAD: usize = 16 << 10;

/// How long the accept loop pauses after a failed accept (out of file descriptors,
/// say) instead of spinning.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `shutdown` resolves, then drains for at most
/// `drain_limit()`.
pub async fn run<App>(
    listener: TcpListener,
    app: App,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
    drain_limit: impl FnOnce() -> Duration,
) -> io::Result<()>
where
    App: Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    App::Future: Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(MAX_HEAD);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(ACCEPT_PAUSE) => continue,
                    }
                }
            },
        };
        // SSE chunks are small; Nagle's algorithm would hold them back.
        let _ = stream.set_nodelay(true);
        let shared = Arc::new(Connection::default());
        let service = TowerToHyperService::new(app.clone().map_request({
            let shared = shared.clone();
            move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(shared.clone());
                request
            }
        }));
        let socket = TokioIo::new(Socket::new(stream, shared.clone()));
        let connection = graceful.watch(builder.serve_connection(socket, service));
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%error, "connection ended with an error");
                },
                // Dropping the connection drops the answer, its completion and
                // its upstream request.
                () = shared.overdue() => {
                    tracing::info!("closed a connection whose stream outlived its deadline");
                }
            }
        });
    }
    drop(listener);
    let limit = drain_limit();
    tracing::info!(
        open_connections = graceful.count(),
        drain_limit_ms = limit.as_millis() as u64,
        "stopped accepting; letting running requests finish"
    );
    if tokio::time::timeout(limit, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain limit are dropped");
    }
    Ok(())
}

/// Errors of one connection, not of the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
