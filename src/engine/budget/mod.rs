//! Retry budgets (contract 6.3, after Finagle's retry budgets and gRPC's
//! throttling): over a sliding window, retries to an upstream may add `ratio` of
//! its first attempts plus `min_per_s` per second.
//!
//! One small interface, after tower's `retry::budget::Budget`: a first attempt is
//! a `deposit`, a retry a `withdraw`, and `has_room` is what the retry policy is
//! told before it decides. `local` is one replica's (pure); the fleet's variant, the
//! same arithmetic with the rest of the fleet's counts added and the rounds that
//! exchange them through Redis, lives outside the engine (`budget::redis`).

mod local;
pub mod settings;

pub use local::RetryBudget;
pub use settings::BudgetSettings;

use std::ops::Add;

use tokio::time::Instant;

/// Counts of first attempts and retries to one upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// First attempts.
    pub firsts: u64,
    /// Retries.
    pub retries: u64,
}

impl Add for Counts {
    type Output = Counts;

    fn add(self, other: Counts) -> Counts {
        Counts {
            firsts: self.firsts + other.firsts,
            retries: self.retries + other.retries,
        }
    }
}

/// One upstream's retry budget. Time comes in as an argument.
pub trait Budget: Send {
    /// A first attempt to the upstream (a fallback is one too): it earns retries.
    fn deposit(&mut self, now: Instant);
    /// Whether one more retry fits at `now`.
    fn has_room(&mut self, now: Instant) -> bool;
    /// Counts a retry that is made.
    fn withdraw(&mut self, now: Instant);
}

#[cfg(test)]
pub(crate) mod tests;
