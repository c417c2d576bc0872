//! One replica's retry budget, as a pure state machine over a sliding window.

use std::collections::VecDeque;

use tokio::time::Instant;

use super::{Budget, BudgetSettings, Counts};

/// When this replica's first attempts and retries to one upstream were made.
#[derive(Debug)]
pub struct RetryBudget {
    settings: BudgetSettings,
    firsts: VecDeque<Instant>,
    retries: VecDeque<Instant>,
}

impl RetryBudget {
    /// An empty budget.
    pub fn new(settings: BudgetSettings) -> Self {
        RetryBudget {
            settings,
            firsts: VecDeque::new(),
            retries: VecDeque::new(),
        }
    }

    /// This replica's counts within the window ending at `now`.
    pub fn counts(&mut self, now: Instant) -> Counts {
        let window = self.settings.window;
        for times in [&mut self.firsts, &mut self.retries] {
            while times
                .front()
                .is_some_and(|at| now.saturating_duration_since(*at) >= window)
            {
                times.pop_front();
            }
        }
        Counts {
            firsts: self.firsts.len() as u64,
            retries: self.retries.len() as u64,
        }
    }

    /// Whether one more retry fits a window holding `counts`.
    pub fn fits(&self, counts: Counts) -> bool {
        let floor = f64::from(self.settings.min_per_s) * self.settings.window.as_secs_f64();
        let allowed = self.settings.ratio * counts.firsts as f64 + floor;
        (counts.retries + 1) as f64 <= allowed
    }
}

impl Budget for RetryBudget {
    fn deposit(&mut self, now: Instant) {
        self.counts(now);
        self.firsts.push_back(now);
    }

    fn has_room(&mut self, now: Instant) -> bool {
        let counts = self.counts(now);
        self.fits(counts)
    }

    fn withdraw(&mut self, now: Instant) {
        self.counts(now);
        self.retries.push_back(now);
    }
}
