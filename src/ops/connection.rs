//! What one connection's accept task, its requests and its socket share: a leaf
//! that the server and the request observer both import.
//!
//! * **The deadline ends a stream however slowly its client reads** (contract
//!   10). A client that stops reading stops hyper from polling the response body,
//!   so the body can never notice its deadline; the completion inside it would
//!   hold its in-flight slot and its upstream connection. The observer tells the
//!   connection when a streamed answer's deadline is, and the accept task drops
//!   the whole connection (and with it the body, the completion and the upstream
//!   request) shortly after it passes, unless the answer ended first.
//! * **hyper's own error answers** are told apart by the socket
//!   (`server/connection.rs`): it counts the heads written against the requests
//!   the service was called for (`calls`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
    /// Requests the service was called for so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Acquire)
    }

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
