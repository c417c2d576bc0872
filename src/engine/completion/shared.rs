//! What every completion shares: the upstreams with their breakers and retry
//! budgets, the in-flight limit, the attempt timeouts and the metrics. The breaker and the budget are
//! pure state machines; this is where they meet the clock, the locks, the metrics
//! and the log.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::attempt::AttemptTimeouts;
use super::recent::Recent;
use crate::engine::breaker::{Admission, Breaker, Counted, State, Transition};
use crate::engine::budget::Budget;
use crate::engine::bulkhead::Bulkhead;
use crate::engine::failure::BusyKeywords;
use crate::engine::metrics::Metrics;
use crate::engine::retry::CallsAgain;
use crate::engine::upstream::Upstream;
use crate::engine::upstream::order::{Candidate, Next};

/// What every completion shares.
pub struct SharedUpstreams {
    /// Every upstream, in listing order.
    pub upstreams: Vec<Arc<Upstream>>,
    /// Per upstream (same index): its breaker, if breakers apply, and its budget.
    pub guards: Vec<UpstreamGuards>,
    /// Every attempt's idle and first-output timeouts.
    pub timeouts: AttemptTimeouts,
    /// Substrings that mark an upstream error as busy.
    pub busy_keywords: BusyKeywords,
    /// `LADLE_MAX_INFLIGHT`: concurrent requests and job runs.
    pub inflight: Bulkhead,
    /// Longest wait for an in-flight slot.
    pub queue_timeout: Duration,
    /// Where counters go.
    pub metrics: Metrics,
}

/// One upstream's shared state.
pub struct UpstreamGuards {
    /// Its circuit breaker (per replica), when breakers apply.
    pub breaker: Option<Mutex<Breaker>>,
    /// Its retry budget (this replica's, or shared with the fleet).
    pub budget: Arc<Mutex<dyn Budget>>,
    /// Its `max_inflight`, if it has one: attempts to it at once.
    pub bulkhead: Option<Bulkhead>,
    /// Its attempts in flight and last ones ended, for the status panel.
    pub recent: Recent,
}

/// A lock whose holder panicked still guards consistent state here: every update
/// is a few assignments.
fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SharedUpstreams {
    /// Whether upstream `index` may be picked at `now`.
    pub fn usable(&self, index: usize, now: Instant) -> bool {
        let Some(breaker) = &self.guards[index].breaker else {
            return true;
        };
        let (usable, moved) = lock(breaker).usable(now);
        self.moved(index, moved);
        usable
    }

    /// The breaker's state of upstream `index` at `now`, if breakers apply.
    pub fn breaker_state(&self, index: usize, now: Instant) -> Option<State> {
        let breaker = self.guards[index].breaker.as_ref()?;
        let (state, moved) = lock(breaker).state(now);
        self.moved(index, moved);
        Some(state)
    }

    /// Asked when an attempt is about to start on upstream `index`.
    pub fn admit(&self, index: usize, now: Instant) -> Admission {
        let Some(breaker) = &self.guards[index].breaker else {
            return Admission::Pass;
        };
        let (admission, moved) = lock(breaker).admit(now);
        self.moved(index, moved);
        admission
    }

    /// Told how an attempt on upstream `index` ended.
    pub fn record(&self, index: usize, counted: Counted, probe: bool, now: Instant) {
        if let Some(breaker) = &self.guards[index].breaker {
            let moved = lock(breaker).record(counted, probe, now);
            self.moved(index, moved);
        }
    }

    /// Time until the first open breaker half-opens (for a `Retry-After` when every
    /// upstream is open).
    pub fn opens_again_in(&self, now: Instant) -> Duration {
        self.guards
            .iter()
            .filter_map(|g| g.breaker.as_ref())
            .map(|b| lock(b).opens_again_in(now))
            .filter(|wait| !wait.is_zero())
            .min()
            .unwrap_or_default()
    }

    /// What the order of a new request needs to know of each upstream at `now`.
    pub fn candidates(&self, now: Instant) -> Vec<Candidate> {
        self.upstreams
            .iter()
            .enumerate()
            .map(|(index, u)| Candidate {
                priority: u.priority,
                weight: u.weight,
                usable: self.usable(index, now),
                attempts: u.attempts,
            })
            .collect()
    }

    /// A first attempt to upstream `index`: it earns retries.
    pub fn first_attempt(&self, index: usize, now: Instant) {
        lock(&self.guards[index].budget).deposit(now);
    }

    /// Runs the retry policy (`decide`, told whether the budget of `next`'s
    /// upstream has room) under that budget's lock, and spends the budget when the
    /// decision is a retry to an upstream this request called before: the check
    /// and the spending are one step, however many requests decide at once.
    pub fn decide_retry<D: CallsAgain>(
        &self,
        next: Option<Next>,
        now: Instant,
        decide: impl FnOnce(bool) -> D,
    ) -> D {
        let Some(next) = next.filter(|next| !next.upstream.untried) else {
            return decide(true);
        };
        let mut budget = lock(&self.guards[next.index].budget);
        let decision = decide(budget.has_room(now));
        if decision.calls_again() {
            budget.withdraw(now);
        }
        decision
    }

    /// A breaker changed state: the gauge, the counter and one log line.
    fn moved(&self, index: usize, moved: Option<Transition>) {
        let Some(moved) = moved else { return };
        let upstream = &self.upstreams[index].name;
        self.metrics.breaker_state(upstream, moved.to.gauge());
        self.metrics.breaker_transition(upstream, moved.to.name());
        tracing::warn!(
            upstream = %upstream,
            from = moved.from.name(),
            to = moved.to.name(),
            "circuit breaker changed state"
        );
    }
}
