//! The retry budget of one upstream (contract 6.3, after Finagle's retry budgets
//! and gRPC's throttling): over a sliding window, retries to an upstream may add
//! `ratio` of its first attempts plus `min_per_s` per second. A pure state machine:
//! time comes in as an argument.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// The budget's knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetSettings {
    /// Retries may add this share of first attempts …
    pub ratio: f64,
    /// … plus this many per second …
    pub min_per_s: u32,
    /// … both counted over this sliding window.
    pub window: Duration,
}

/// Counts of first attempts and retries to one upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// First attempts.
    pub firsts: u64,
    /// Retries.
    pub retries: u64,
}

/// One upstream's budget: when this replica's first attempts and retries were
/// made, and what the rest of the fleet made over the window (contract 6.7).
#[derive(Debug)]
pub struct RetryBudget {
    settings: BudgetSettings,
    firsts: VecDeque<Instant>,
    retries: VecDeque<Instant>,
    /// The other replicas' counts, as last shared; zero without a fleet.
    others: Counts,
    /// Counts made here and not yet shared.
    unshared: Counts,
}

impl RetryBudget {
    /// An empty budget.
    pub fn new(settings: BudgetSettings) -> Self {
        RetryBudget {
            settings,
            firsts: VecDeque::new(),
            retries: VecDeque::new(),
            others: Counts::default(),
            unshared: Counts::default(),
        }
    }

    /// A first attempt to this upstream (a fallback is one too): it earns retries.
    pub fn first_attempt(&mut self, now: Instant) {
        self.forget_before(now);
        self.firsts.push_back(now);
        self.unshared.firsts += 1;
    }

    /// Whether a retry to this upstream fits the budget at `now`; if it does, it is
    /// counted.
    pub fn try_retry(&mut self, now: Instant) -> bool {
        self.forget_before(now);
        let floor = f64::from(self.settings.min_per_s) * self.settings.window.as_secs_f64();
        let firsts = self.firsts.len() as u64 + self.others.firsts;
        let retries = self.retries.len() as u64 + self.others.retries;
        let allowed = self.settings.ratio * firsts as f64 + floor;
        if (retries + 1) as f64 > allowed {
            return false;
        }
        self.retries.push_back(now);
        self.unshared.retries += 1;
        true
    }

    /// The counts made here since the last call, for the fleet.
    pub fn take_unshared(&mut self) -> Counts {
        std::mem::take(&mut self.unshared)
    }

    /// What the other replicas made over the window (zero: none, or unknown).
    pub fn set_others(&mut self, others: Counts) {
        self.others = others;
    }

    fn forget_before(&mut self, now: Instant) {
        let window = self.settings.window;
        for times in [&mut self.firsts, &mut self.retries] {
            while times
                .front()
                .is_some_and(|at| now.saturating_duration_since(*at) >= window)
            {
                times.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests;
