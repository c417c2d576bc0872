//! Work that runs beside the requests (the prompt reloader, the fleet's rounds,
//! reports written to Redis, idempotent runs kept going for a waiter) and its one
//! owner, held by the app state: every such task is spawned through it, and a
//! graceful shutdown stops the loops and waits for what is still running, so a
//! report being written when `SIGTERM` arrives is not lost. After TensorZero's
//! `GatewayHandle`: a cancellation token and a task tracker.

use std::future::Future;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The owner of every background task.
#[derive(Clone, Default)]
pub struct Background {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Background {
    /// An owner with nothing running yet.
    pub fn new() -> Self {
        Background::default()
    }

    /// Runs `work` on the current runtime; the handle may be dropped.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) -> JoinHandle<()> {
        self.tracker.spawn(work)
    }

    /// Runs `work` on `runtime` (the fleet's Redis has a runtime of its own).
    pub fn spawn_on(
        &self,
        work: impl Future<Output = ()> + Send + 'static,
        runtime: &Handle,
    ) -> JoinHandle<()> {
        self.tracker.spawn_on(work, runtime)
    }

    /// Runs `round` now and then every `period` until shutdown begins; a round in
    /// progress finishes first.
    pub fn every<F, Fut>(&self, period: Duration, runtime: Option<&Handle>, mut round: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Continue> + Send,
    {
        let stop = self.stop.clone();
        let work = async move {
            while round().await == Continue::Yes {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(period) => {}
                }
            }
        };
        drop(match runtime {
            Some(runtime) => self.spawn_on(work, runtime),
            None => self.spawn(work),
        });
    }

    /// Resolves once shutdown has begun.
    pub fn stopping(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops the loops and waits, at most `limit`, for every task to end; whether
    /// they all did.
    pub async fn drain(&self, limit: Duration) -> bool {
        self.stop.cancel();
        self.tracker.close();
        tokio::time::timeout(limit, self.tracker.wait())
            .await
            .is_ok()
    }
}

/// Whether a loop goes on after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continue {
    /// Another round after the period.
    Yes,
    /// The loop is over (what it served is gone).
    Stop,
}
