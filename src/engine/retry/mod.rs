//! The retry policy: whether a failed attempt is worth another, and after how long.
//!
//! Everything here is a pure function of its arguments. It reads no clock and never
//! sleeps, so every row of the contract's retry tables is a one-line unit test with
//! instants built by offsetting a base instant. `completion` is the only caller, and
//! the only code that waits.

mod continuation;

pub use continuation::{CallsAgain, Cut};

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
    /// Never again on this upstream, but an upstream this request has not tried
    /// is tried at once (its TLS cannot be trusted).
    NotHere,
    /// Retrying cannot help (a 4xx, or the deadline passed).
    Final,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Try again after `wait` (zero: at once).
    Retry {
        /// How long until the next attempt.
        wait: Duration,
    },
    /// Continue the answer so far after `wait` (contract 11.4): a retry whose
    /// body carries what the caller has already received.
    Continue {
        /// How long until the continuation.
        wait: Duration,
    },
    /// Stop and report the failure.
    GiveUp(GiveUp),
}

/// Why the policy gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// The failure is final.
    Final,
    /// `MAX_ATTEMPTS` attempts were made.
    OutOfAttempts,
    /// The deadline passed, or the wait would leave less than `min_remaining`.
    OutOfTime,
    /// An other failure that was not attempt 1, or not early.
    NotEarly,
    /// The caller has seen output that a retry could not take back.
    AfterOutput,
    /// No upstream is usable for the retry.
    NoUpstream,
    /// The retry's upstream has no retry budget left.
    Throttled,
}

/// The one deadline a request has, fixed when it arrived and shared by every attempt,
/// every wait and every read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When the request arrived.
    pub started: Instant,
    /// When the request must be over.
    pub at: Instant,
}

impl Deadline {
    /// A deadline `allowed` after `started`.
    pub fn after(started: Instant, allowed: Duration) -> Self {
        Deadline {
            started,
            at: started + allowed,
        }
    }

    /// Time left at `now` (zero once passed).
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
    /// A busy/not-started retry must leave at least this much time after its wait.
    pub min_remaining: Duration,
    /// Whether a retry may follow output the caller has already seen. A committed
    /// OpenAI stream cannot take its words back, so it never retries after output.
    pub retry_after_output: bool,
    /// `j` in [0, 1]: a back-off is multiplied by a factor in [1−j, 1+j].
    pub jitter: f64,
    /// `LADLE_MAX_CONTINUATIONS`: cuts continued per request (`0`: never).
    pub max_continuations: u32,
    /// `LADLE_CONTINUE_MIN_REMAINING_MS`: a continuation starts (or is retried)
    /// only while at least this much of the deadline is left.
    pub continue_min_remaining: Duration,
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
    /// The upstream a retry would go to; `None` when none is usable.
    pub next: Option<NextUpstream>,
    /// Whether that upstream's retry budget has room for one more retry (a
    /// fallback to an untried upstream needs none).
    pub budget_has_room: bool,
    /// Every attempt so far went to the upstream that just failed: the request
    /// has not moved yet (6.1, as amended: an untried upstream still gets the
    /// early retry that same-upstream attempts did not use).
    pub stayed: bool,
}

/// The upstream a retry would go to, as the policy needs to see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextUpstream {
    /// This request has not called it yet: a fallback, made at once (the
    /// min-remaining rule still applies) and a first attempt for its budget.
    pub untried: bool,
    /// What it asked for in `Retry-After` earlier in this request, if anything.
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
    /// the jitter: the one place that decides whether and when to retry. Pure:
    /// reads no clock, draws no number, never sleeps.
    pub fn decide(&self, failed: Failed, now: Instant, deadline: Deadline, draw: f64) -> Decision {
        if failed.attempt >= self.max_attempts {
            return Decision::GiveUp(GiveUp::OutOfAttempts);
        }
        if now >= deadline.at {
            return Decision::GiveUp(GiveUp::OutOfTime);
        }
        if failed.output_began && !self.retry_after_output {
            return Decision::GiveUp(GiveUp::AfterOutput);
        }
        let Some(next) = failed.next else {
            return Decision::GiveUp(GiveUp::NoUpstream);
        };
        let wait = match failed.class {
            FailureClass::Busy | FailureClass::NotStarted => {
                // A `Retry-After` stays a lower bound; the min-remaining rule
                // below judges the wait chosen.
                let wait = if next.untried {
                    Duration::ZERO
                } else {
                    self.jittered_backoff(failed.attempt, draw)
                        .max(next.retry_after.unwrap_or_default())
                };
                match deadline.remaining(now).checked_sub(wait) {
                    Some(left) if left >= self.min_remaining => wait,
                    _ => return Decision::GiveUp(GiveUp::OutOfTime),
                }
            }
            FailureClass::Other => {
                let early =
                    now.saturating_duration_since(deadline.started) <= self.early_retry_window;
                let first_move = failed.stayed && next.untried;
                if !(failed.attempt == 1 || first_move) || !early {
                    return Decision::GiveUp(GiveUp::NotEarly);
                }
                Duration::ZERO
            }
            FailureClass::NotHere if next.untried => Duration::ZERO,
            FailureClass::NotHere | FailureClass::Final => return Decision::GiveUp(GiveUp::Final),
        };
        if !next.untried && !failed.budget_has_room {
            return Decision::GiveUp(GiveUp::Throttled);
        }
        Decision::Retry { wait }
    }
}

#[cfg(test)]
mod tests;
