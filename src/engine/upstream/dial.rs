//! When an attempt's connection was ready: a tower layer around reqwest's
//! connector (`ClientBuilder::connector_layer`), so the time comes from reqwest's
//! own connection set-up (TCP, the proxy's tunnel, TLS) without leaving it.
//!
//! The connector does not know which request it connects for, so each send runs
//! inside a task-local [`Dialed`] of its own: hyper polls the connect inside the
//! request's future, and the connect made for a request writes that request's
//! record. A request that got a pooled connection finds its record empty: the
//! connection was reused. (If hyper races a new connect against a pooled one
//! and the pooled one wins, the new one finishes in the background, where no
//! record is set, and the attempt is rightly reported as reused.)

use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tower::{Layer, Service};

tokio::task_local! {
    /// The record of the request being sent on this task.
    static DIALING: Arc<Dialed>;
}

/// When the connection of one attempt was ready, if it was made for it.
#[derive(Debug, Default)]
pub struct Dialed(OnceLock<Instant>);

impl Dialed {
    /// When a new connection was ready for the attempt; `None`: a pooled one
    /// was reused (or no connection was made at all).
    pub fn at(&self) -> Option<Instant> {
        self.0.get().copied()
    }

    /// Runs `send` with this record as the one its connect writes.
    pub fn around<F: Future>(self: Arc<Self>, send: F) -> impl Future<Output = F::Output> {
        DIALING.scope(self, send)
    }
}

/// The layer: every connection the client makes is timed.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeConnects;

impl<S> Layer<S> for TimeConnects {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed(inner)
    }
}

/// reqwest's connector, timed.
#[derive(Debug, Clone)]
pub struct Timed<S>(S);

impl<S, R> Service<R> for Timed<S>
where
    S: Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, destination: R) -> Self::Future {
        let record = DIALING.try_with(Arc::clone).ok();
        self.0
            .call(destination)
            .inspect(move |connected| {
                if let (Some(record), Ok(_)) = (record, connected) {
                    let _ = record.0.set(Instant::now());
                }
            })
            .boxed()
    }
}
