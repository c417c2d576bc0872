//! What the loop does when an attempt fails: count and log it, ask the pure policy
//! whether and when to retry, and pick the upstream the retry goes to.

use std::time::Duration;

use tokio::time::Instant;

use super::{Completion, Phase, Progress};
use crate::failure::{AttemptFailure, FailureKind};
use crate::retry::{Decision, Failed, FailureClass};

impl Completion {
    pub(super) fn on_failure(&mut self, failure: AttemptFailure) -> Progress {
        let output_began = matches!(&self.phase, Phase::Streaming(a) if a.output_began());
        let class = failure.class(output_began, &self.engine.busy_keywords);
        let outcome = failure.outcome(class);
        self.count_attempt(outcome);
        let now = Instant::now();
        // A TLS failure is never retried on that upstream; another one not tried
        // yet is tried at once.
        let untrusted = matches!(failure.kind, FailureKind::Tls(_));
        let next = self.route.as_mut().and_then(|route| {
            route.remember_retry_after(failure.retry_after);
            route.next(untrusted)
        });
        let decision = match next {
            None => Decision::GiveUp,
            Some(next) if untrusted => {
                let may = next.untried && self.attempt < self.job.policy.max_attempts;
                match may && now < self.job.deadline.at {
                    true => Decision::RetryNow,
                    false => Decision::GiveUp,
                }
            }
            Some(next) => {
                let failed = Failed {
                    attempt: self.attempt,
                    class,
                    output_began,
                    retry_after: next.retry_after,
                    fallback: next.untried,
                };
                let draw = rand::random::<f64>();
                self.job.policy.decide(failed, now, self.job.deadline, draw)
            }
        };
        let reason = match class {
            FailureClass::Busy => "busy",
            FailureClass::NotStarted => "not_started",
            FailureClass::Other | FailureClass::Final => "failed",
        };
        let (wait, Some(next)) = (
            match decision {
                Decision::Wait(wait) => wait,
                Decision::RetryNow | Decision::GiveUp => Duration::ZERO,
            },
            next.filter(|_| decision != Decision::GiveUp),
        ) else {
            self.log_attempt(outcome, Some(&failure.kind), None);
            self.phase = Phase::Over;
            let hint = self.job.policy.backoff(self.attempt);
            return Progress::Failed(failure.into_api_error(class, self.attempt, hint));
        };
        self.log_attempt(outcome, Some(&failure.kind), Some(wait));
        self.engine.metrics.retry(reason);
        let from = self.upstream().map(|u| u.name.clone()).unwrap_or_default();
        if let Some(route) = self.route.as_mut() {
            route.move_to(next);
        }
        let to = self.upstream().map(|u| u.name.clone()).unwrap_or_default();
        if from != to {
            self.engine.metrics.fallback(&from, &to);
        }
        self.phase = Phase::Waiting {
            since: now,
            until: now + wait,
        };
        Progress::Retry {
            attempt: self.attempt,
            reason,
            wait,
            output_began,
            upstream: to,
        }
    }

    /// Counts an ended attempt by outcome and upstream.
    pub(super) fn count_attempt(&self, outcome: &str) {
        if let Some(upstream) = self.upstream() {
            self.engine.metrics.attempt(outcome, &upstream.name);
        }
    }
}
