//! The retry policy: whether a failed attempt is worth another, and after how long.
//!
//! Everything here is a pure function of its arguments. It reads no clock and never
//! sleeps, so every row of the contract's retry tables is a one-line unit test with
//! instants built by offsetting a base instant. `completion` is the only caller, and
//! the only code that waits.

use std::time::Duration;

use tokio::time::Instant;

/// How a failed attempt is retried (contract section 2, "Attempt failures").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The upstream said it is busy (503, 429, or a busy keyword).
    Busy,
    /// The attempt died before any output: nothing was lost, so it is worth waiting.
    NotStarted,
    /// Something broke that one quick retry may fix, if it happened early.
    Other,
    /// Retrying cannot help (a 4xx, or the deadline passed).
    Final,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Wait this long, then try again.
    Wait(Duration),
    /// Try again at once.
    RetryNow,
    /// Stop and report the failure.
    GiveUp,
}

/// The one budget a request has, fixed when it arrived and shared by every attempt,
/// every wait and every read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When the request arrived.
    pub started: Instant,
    /// When the request must be over.
    pub at: Instant,
}

impl Deadline {
    /// A deadline `budget` after `started`.
    pub fn after(started: Instant, budget: Duration) -> Self {
        Deadline {
            started,
            at: started + budget,
        }
    }

    /// Budget left at `now` (zero once passed).
    pub fn remaining(&self, now: Instant) -> Duration {
        self.at.saturating_duration_since(now)
    }
}

/// The knobs of the retry policy; one value per request, since tasks bring their own
/// `min_remaining`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Upstream attempts per request, the first included.
    pub max_attempts: u32,
    /// The first back-off; doubles per attempt.
    pub backoff_base: Duration,
    /// The back-off cap.
    pub backoff_max: Duration,
    /// `Other` failures are retried once, only when attempt 1 failed within this window.
    pub early_retry_window: Duration,
    /// A busy/not-started retry must leave at least this much budget after its wait.
    pub min_remaining: Duration,
    /// Whether a retry may follow output the caller has already seen. A committed
    /// OpenAI stream cannot take its words back, so it never retries after output.
    pub retry_after_output: bool,
    /// `j` in [0, 1]: a back-off is multiplied by a factor in [1−j, 1+j].
    pub jitter: f64,
}

/// One failed attempt, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed {
    /// The 1-based number of the attempt that failed.
    pub attempt: u32,
    /// How it failed.
    pub class: FailureClass,
    /// Whether this attempt had produced output before it failed.
    pub output_began: bool,
    /// What the upstream asked for in `Retry-After`, if anything.
    pub retry_after: Option<Duration>,
}

impl RetryPolicy {
    /// The back-off after attempt `attempt` (1-based): base × 2^(attempt−1), capped.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(20);
        self.backoff_base
            .saturating_mul(1u32 << doublings)
            .min(self.backoff_max)
    }

    /// The back-off after attempt `attempt`, jittered: `draw` is a uniform draw in
    /// [0, 1) made by the caller, so this stays a pure function.
    pub fn jittered_backoff(&self, attempt: u32, draw: f64) -> Duration {
        let factor = 1.0 - self.jitter + 2.0 * self.jitter * draw.clamp(0.0, 1.0);
        self.backoff(attempt).mul_f64(factor)
    }

    /// Decides what follows a failed attempt, with `draw` (uniform in [0, 1)) for
    /// the jitter. Pure: reads no clock, draws no number, never sleeps.
    pub fn decide(&self, failed: Failed, now: Instant, deadline: Deadline, draw: f64) -> Decision {
        if failed.attempt >= self.max_attempts || now >= deadline.at {
            return Decision::GiveUp;
        }
        if failed.output_began && !self.retry_after_output {
            return Decision::GiveUp;
        }
        match failed.class {
            FailureClass::Busy | FailureClass::NotStarted => {
                // A `Retry-After` stays a lower bound; the min-remaining rule
                // below judges the wait chosen.
                let wait = self
                    .jittered_backoff(failed.attempt, draw)
                    .max(failed.retry_after.unwrap_or_default());
                let left_after_wait = deadline.remaining(now).checked_sub(wait);
                match left_after_wait {
                    Some(left) if left >= self.min_remaining => Decision::Wait(wait),
                    _ => Decision::GiveUp,
                }
            }
            FailureClass::Other => {
                let early =
                    now.saturating_duration_since(deadline.started) <= self.early_retry_window;
                if failed.attempt == 1 && early {
                    Decision::RetryNow
                } else {
                    Decision::GiveUp
                }
            }
            FailureClass::Final => Decision::GiveUp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn contract_defaults() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            backoff_base: 2 * S,
            backoff_max: 10 * S,
            early_retry_window: 20 * S,
            min_remaining: 30 * S,
            retry_after_output: true,
            jitter: 0.0,
        }
    }

    /// Decides for a failure `elapsed` into a request with a `budget` deadline.
    fn decide(
        policy: RetryPolicy,
        failed: Failed,
        elapsed: Duration,
        budget: Duration,
    ) -> Decision {
        let base = Instant::now();
        policy.decide(failed, base + elapsed, Deadline::after(base, budget), 0.5)
    }

    fn failed(attempt: u32, class: FailureClass) -> Failed {
        Failed {
            attempt,
            class,
            output_began: false,
            retry_after: None,
        }
    }

    #[test]
    fn backoff_follows_the_contract_sequence() {
        let policy = contract_defaults();
        let waits: Vec<u64> = (1..=6).map(|k| policy.backoff(k).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 10, 10, 10]);
        assert_eq!(
            policy.backoff(u32::MAX),
            10 * S,
            "huge attempts must not overflow"
        );
    }

    #[test]
    fn busy_and_not_started_wait_for_the_backoff() {
        let table = [
            (1, FailureClass::Busy, Decision::Wait(2 * S)),
            (2, FailureClass::Busy, Decision::Wait(4 * S)),
            (3, FailureClass::NotStarted, Decision::Wait(8 * S)),
            (4, FailureClass::NotStarted, Decision::Wait(10 * S)),
            (5, FailureClass::Busy, Decision::GiveUp),
        ];
        for (attempt, class, expected) in table {
            let got = decide(contract_defaults(), failed(attempt, class), 5 * S, 120 * S);
            assert_eq!(got, expected, "attempt {attempt} {class:?}");
        }
    }

    #[test]
    fn busy_retry_gives_up_when_the_wait_would_leave_too_little_time() {
        // 120 s budget, 85 s gone, 2 s wait: 33 s left ≥ 30 s → wait.
        let ok = decide(
            contract_defaults(),
            failed(1, FailureClass::Busy),
            85 * S,
            120 * S,
        );
        assert_eq!(ok, Decision::Wait(2 * S));
        // 89 s gone: 29 s left after the wait < 30 s → give up now.
        let late = decide(
            contract_defaults(),
            failed(1, FailureClass::Busy),
            89 * S,
            120 * S,
        );
        assert_eq!(late, Decision::GiveUp);
        // Exactly the minimum left is still enough.
        let edge = decide(
            contract_defaults(),
            failed(1, FailureClass::Busy),
            88 * S,
            120 * S,
        );
        assert_eq!(edge, Decision::Wait(2 * S));
    }

    #[test]
    fn retry_after_longer_than_the_backoff_is_honoured_and_counted_against_the_deadline() {
        let mut busy = failed(1, FailureClass::Busy);
        busy.retry_after = Some(7 * S);
        assert_eq!(
            decide(contract_defaults(), busy, S, 120 * S),
            Decision::Wait(7 * S)
        );
        busy.retry_after = Some(100 * S);
        assert_eq!(
            decide(contract_defaults(), busy, S, 120 * S),
            Decision::GiveUp
        );
        busy.retry_after = Some(S);
        assert_eq!(
            decide(contract_defaults(), busy, S, 120 * S),
            Decision::Wait(2 * S)
        );
    }

    #[test]
    fn other_failures_are_retried_once_and_only_early() {
        let table = [
            (1, 5 * S, Decision::RetryNow),
            (1, 20 * S, Decision::RetryNow),
            (1, 21 * S, Decision::GiveUp),
            (2, 5 * S, Decision::GiveUp),
        ];
        for (attempt, elapsed, expected) in table {
            let got = decide(
                contract_defaults(),
                failed(attempt, FailureClass::Other),
                elapsed,
                120 * S,
            );
            assert_eq!(got, expected, "attempt {attempt} at {elapsed:?}");
        }
    }

    #[test]
    fn final_failures_and_a_passed_deadline_are_never_retried() {
        let policy = contract_defaults();
        assert_eq!(
            decide(policy, failed(1, FailureClass::Final), S, 120 * S),
            Decision::GiveUp
        );
        let busy_after_deadline = decide(policy, failed(1, FailureClass::Busy), 121 * S, 120 * S);
        assert_eq!(busy_after_deadline, Decision::GiveUp);
    }

    #[test]
    fn a_committed_stream_never_retries_after_output() {
        let policy = RetryPolicy {
            retry_after_output: false,
            ..contract_defaults()
        };
        let mut broke = failed(1, FailureClass::Other);
        broke.output_began = true;
        assert_eq!(decide(policy, broke, S, 120 * S), Decision::GiveUp);
        broke.output_began = false;
        assert_eq!(decide(policy, broke, S, 120 * S), Decision::RetryNow);
    }

    #[test]
    fn jitter_spreads_a_back_off_but_retry_after_stays_a_floor() {
        let policy = RetryPolicy {
            jitter: 0.5,
            ..contract_defaults()
        };
        let wait = |draw, retry_after: Option<Duration>| {
            let base = Instant::now();
            let busy = Failed {
                retry_after,
                ..failed(2, FailureClass::Busy)
            };
            policy.decide(busy, base, Deadline::after(base, 120 * S), draw)
        };
        // Attempt 2: 4 s × [0.5, 1.5].
        assert_eq!(wait(0.0, None), Decision::Wait(2 * S));
        assert_eq!(wait(0.5, None), Decision::Wait(4 * S));
        assert_eq!(wait(0.75, None), Decision::Wait(5 * S));
        assert_eq!(wait(0.0, Some(3 * S)), Decision::Wait(3 * S));
        let exact = contract_defaults();
        assert_eq!(
            exact.jittered_backoff(3, 0.99),
            8 * S,
            "j = 0 keeps 2/4/8/10"
        );
    }

    #[test]
    fn the_min_remaining_rule_judges_the_jittered_wait() {
        // 45 s left after the failure; 30 s must stay. Attempt 4's 8 s × 1.5 = 12 s
        // leaves 33 s: retry. × 2 (j = 1, draw near 1) = 16 s leaves 29 s: give up.
        let base = Instant::now();
        let deadline = Deadline::after(base, 120 * S);
        let at = base + 75 * S;
        let with = |jitter, draw| {
            let policy = RetryPolicy {
                jitter,
                ..contract_defaults()
            };
            policy.decide(failed(3, FailureClass::Busy), at, deadline, draw)
        };
        assert_eq!(with(0.5, 1.0), Decision::Wait(12 * S));
        assert_eq!(with(1.0, 1.0), Decision::GiveUp);
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
            )),
            ..proptest::test_runner::Config::with_cases(256)
        })]

        #[test]
        fn backoff_never_decreases_and_never_exceeds_the_cap(
            base_ms in 1u64..5_000, cap_ms in 1u64..60_000, attempt in 1u32..100,
        ) {
            let policy = RetryPolicy {
                backoff_base: Duration::from_millis(base_ms),
                backoff_max: Duration::from_millis(cap_ms),
                ..contract_defaults()
            };
            proptest::prop_assert!(policy.backoff(attempt + 1) >= policy.backoff(attempt));
            proptest::prop_assert!(policy.backoff(attempt) <= Duration::from_millis(cap_ms));
        }

        #[test]
        fn a_jittered_back_off_stays_within_its_band(
            jitter in 0.0f64..=1.0, draw in 0.0f64..1.0, attempt in 1u32..10,
        ) {
            let policy = RetryPolicy { jitter, ..contract_defaults() };
            let plain = policy.backoff(attempt).as_secs_f64();
            let jittered = policy.jittered_backoff(attempt, draw).as_secs_f64();
            proptest::prop_assert!(jittered >= plain * (1.0 - jitter) - 1e-6);
            proptest::prop_assert!(jittered <= plain * (1.0 + jitter) + 1e-6);
        }
    }
}
