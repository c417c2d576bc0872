//! What an upstream's last attempts did, for the admin status panel: the
//! attempts in flight now, and the outcome and time to first output of the
//! last [`KEPT`] that ended. `/metrics` has the same over all time; an operator
//! asking "is it the upstream, right now?" wants the last minute's view.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::engine::failure::Outcome;

/// How many ended attempts are remembered per upstream.
pub const KEPT: usize = 100;

/// One upstream's recent attempts.
#[derive(Default)]
pub struct Recent {
    inflight: Arc<AtomicUsize>,
    ended: Mutex<VecDeque<Ended>>,
}

/// An ended attempt, as remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub outcome: Outcome,
    /// From the attempt's start to its first output, if any came.
    pub first_output_ms: Option<u64>,
}

/// An attempt in flight: counted until dropped.
pub struct InAttempt(Arc<AtomicUsize>);

impl Drop for InAttempt {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the panel shows of one upstream's recent attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Attempts in flight now.
    pub inflight: usize,
    /// The last ended attempts' outcomes, oldest first.
    pub outcomes: Vec<Outcome>,
    /// Their times to first output, at the median and the 95th percentile.
    pub first_output_p50_ms: Option<u64>,
    pub first_output_p95_ms: Option<u64>,
}

impl Recent {
    /// An attempt starts: counted in flight until the guard is dropped.
    pub fn started(&self) -> InAttempt {
        self.inflight.fetch_add(1, Ordering::Relaxed);
        InAttempt(self.inflight.clone())
    }

    /// An attempt ended.
    pub fn ended(&self, ended: Ended) {
        let mut kept = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(ended);
    }

    /// The panel's view.
    pub fn summary(&self) -> Summary {
        let kept: Vec<Ended> = {
            let kept = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
            kept.iter().copied().collect()
        };
        let mut times: Vec<u64> = kept.iter().filter_map(|e| e.first_output_ms).collect();
        times.sort_unstable();
        Summary {
            inflight: self.inflight.load(Ordering::Relaxed),
            outcomes: kept.iter().map(|e| e.outcome).collect(),
            first_output_p50_ms: percentile(&times, 50),
            first_output_p95_ms: percentile(&times, 95),
        }
    }
}

/// The nearest-rank percentile of sorted `times`.
fn percentile(times: &[u64], p: usize) -> Option<u64> {
    let rank = (p * times.len()).div_ceil(100).max(1);
    times.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_100_are_kept_with_their_percentiles_and_in_flight_attempts_counted() {
        let recent = Recent::default();
        let held = [recent.started(), recent.started()];
        for ms in 1..=150 {
            let outcome = if ms % 10 == 0 {
                Outcome::Busy
            } else {
                Outcome::Ok
            };
            recent.ended(Ended {
                outcome,
                first_output_ms: (outcome == Outcome::Ok).then_some(ms),
            });
        }
        let summary = recent.summary();
        assert_eq!(summary.inflight, 2);
        assert_eq!(summary.outcomes.len(), KEPT, "the oldest 50 forgotten");
        let busy = summary
            .outcomes
            .iter()
            .filter(|o| **o == Outcome::Busy)
            .count();
        assert_eq!(busy, 10);
        // 90 times among 51..=150 (no multiples of 10): the 45th and the 86th.
        assert_eq!(summary.first_output_p50_ms, Some(99));
        assert_eq!(summary.first_output_p95_ms, Some(145));
        drop(held);
        assert_eq!(recent.summary().inflight, 0);
        assert_eq!(Recent::default().summary().first_output_p50_ms, None);
    }
}
