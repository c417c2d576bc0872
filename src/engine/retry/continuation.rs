//! Whether a failure is followed by a continuation of the answer so far
//! (contract 11.4) rather than by section 2's rule. A continuation is a retry
//! with another body, so it is decided here, by the same policy, as purely.

use std::time::Duration;

use tokio::time::Instant;

use super::{Deadline, Decision, Failed, FailureClass, GiveUp, NextUpstream, RetryPolicy};

/// A failed attempt of a request that can be continued at all (one choice, no
/// tool call begun, the text so far within its bound, a stream that broke
/// rather than output that could not be parsed), as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The attempt wrote content (not only reasoning) before it failed.
    pub wrote_content: bool,
    /// The attempt was itself a continuation.
    pub was_continuation: bool,
    /// It was a continuation refused with a final 4xx (the upstream takes no prefix).
    pub refused: bool,
    /// Cuts continued so far in this request.
    pub continued: u32,
    /// Where a continuation would go: an upstream that continues, is usable and
    /// has not refused one in this request; `None` when there is none.
    pub next: Option<NextUpstream>,
    /// Whether that upstream's retry budget has room (an untried one needs none).
    pub budget_has_room: bool,
}

/// A decision that may call an upstream again, which its retry budget pays
/// for when the request has called it before.
pub trait CallsAgain {
    /// Whether it does.
    fn calls_again(&self) -> bool;
}

impl CallsAgain for Decision {
    fn calls_again(&self) -> bool {
        matches!(self, Decision::Retry { .. } | Decision::Continue { .. })
    }
}

impl CallsAgain for Option<Decision> {
    fn calls_again(&self) -> bool {
        self.as_ref().is_some_and(CallsAgain::calls_again)
    }
}

impl RetryPolicy {
    /// Decides whether `failed` is followed by a continuation, with `draw` for
    /// the jitter. `None`: section 2's rule decides, as for any request (a first
    /// cut that cannot be continued). Once a request is continuing, a failure
    /// that cannot be continued again ends it: `GiveUp`.
    pub fn decide_cut(
        &self,
        failed: Failed,
        cut: Cut,
        now: Instant,
        deadline: Deadline,
        draw: f64,
    ) -> Option<Decision> {
        let after_content =
            cut.wrote_content && matches!(failed.class, FailureClass::Other | FailureClass::Busy);
        let stop = |why| cut.was_continuation.then_some(Decision::GiveUp(why));
        if after_content {
            if cut.continued >= self.max_continuations {
                return stop(GiveUp::OutOfAttempts);
            }
        } else if !cut.was_continuation {
            return None;
        } else {
            // A continuation that failed before its own content: busy or not
            // started is worth another continuation, a refusal moves on.
            let retried = matches!(failed.class, FailureClass::Busy | FailureClass::NotStarted);
            let refused = failed.class == FailureClass::Final && cut.refused;
            if !(retried || refused) {
                return stop(GiveUp::Final);
            }
        }
        if failed.attempt >= self.max_attempts {
            return stop(GiveUp::OutOfAttempts);
        }
        if now >= deadline.at {
            return Some(Decision::GiveUp(GiveUp::OutOfTime));
        }
        let Some(next) = cut.next else {
            return stop(GiveUp::NoUpstream);
        };
        let wait = match failed.class {
            FailureClass::Busy | FailureClass::NotStarted if !next.untried => self
                .jittered_backoff(failed.attempt, draw)
                .max(next.retry_after.unwrap_or_default()),
            _ => Duration::ZERO,
        };
        match deadline.remaining(now).checked_sub(wait) {
            Some(left) if left >= self.continue_min_remaining => {}
            _ => return stop(GiveUp::OutOfTime),
        }
        if !next.untried && !cut.budget_has_room {
            return Some(Decision::GiveUp(GiveUp::Throttled));
        }
        Some(Decision::Continue { wait })
    }
}
