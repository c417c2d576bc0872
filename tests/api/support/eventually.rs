//! The one way the tests wait for something to happen: poll a probe every few
//! milliseconds until it says yes or a time limit passes. A probe is an async
//! closure returning `bool` or `Option<T>`; `within` gives `None` when the limit
//! passed, `eventually` panics naming what it waited for. Everything else that
//! waits (for a metric, `/readyz`, a Redis key, a log line, the mock's requests)
//! is built on these two.

use std::fmt::Display;
use std::time::Duration;

use tokio::time::Instant;

use super::mock_upstream::MockUpstream;

/// How often a probe is asked.
pub const POLL: Duration = Duration::from_millis(5);

/// What a probe answers: `true`, or `Some(value)`, once what it waits for holds.
pub trait Settled {
    /// What the wait gives back.
    type Value;
    /// `Some` once settled.
    fn settled(self) -> Option<Self::Value>;
}

impl Settled for bool {
    type Value = ();
    fn settled(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Settled for Option<T> {
    type Value = T;
    fn settled(self) -> Option<T> {
        self
    }
}

/// Asks `probe` every `POLL` until it settles (what it settled on) or `limit`
/// has passed (`None`); it is asked at least once, and once more at the limit.
pub async fn within<S: Settled>(
    limit: Duration,
    mut probe: impl AsyncFnMut() -> S,
) -> Option<S::Value> {
    let give_up = Instant::now() + limit;
    loop {
        if let Some(value) = probe().await.settled() {
            return Some(value);
        }
        if Instant::now() >= give_up {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// As `within`, but a probe that never settles fails the test, saying it waited
/// `limit` for `what` (formatted only then, so it may show the last thing seen).
pub async fn eventually<S: Settled>(
    limit: Duration,
    what: impl Display,
    probe: impl AsyncFnMut() -> S,
) -> S::Value {
    match within(limit, probe).await {
        Some(value) => value,
        None => panic!("waited {limit:?} for {what} in vain"),
    }
}

/// A message made when it is shown, from what the probe saw last.
pub struct Lazy<F: Fn() -> String>(pub F);

impl<F: Fn() -> String> Display for Lazy<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&(self.0)())
    }
}

/// Waits (up to 2 s) until the mock has received `n` requests.
pub async fn requests_arrive(upstream: &MockUpstream, n: usize) {
    let what = Lazy(|| format!("{n} upstream requests (got {})", upstream.requests().len()));
    eventually(Duration::from_secs(2), what, async || {
        upstream.requests().len() >= n
    })
    .await;
}

/// Waits (up to `limit`) until every socket the mock accepted is closed.
pub async fn sockets_close(upstream: &MockUpstream, limit: Duration) {
    let what = Lazy(|| {
        format!(
            "the mock's {} open sockets to close",
            upstream.open_sockets()
        )
    });
    eventually(limit, what, async || upstream.open_sockets() == 0).await;
}
