//! What the loop does when an attempt fails: count and log it, ask the pure policy
//! whether and when to retry, and pick the upstream the retry goes to.

use std::time::Duration;

use tokio::time::Instant;

use super::route::Next;
use super::{Completion, Phase, Progress};
use crate::breaker::Counted;
use crate::failure::{AttemptFailure, FailureKind};
use crate::retry::{Decision, Failed, FailureClass};

impl Completion {
    pub(super) fn on_failure(&mut self, failure: AttemptFailure) -> Progress {
        let output_began = matches!(&self.phase, Phase::Streaming(a) if a.output_began());
        let class = failure.class(output_began, &self.engine.busy_keywords);
        let outcome = failure.outcome(class);
        let counted = match (outcome, &failure.kind) {
            (_, FailureKind::InvalidOutput(_)) | ("rejected" | "deadline", _) => Counted::Neither,
            _ => Counted::Failure,
        };
        self.count_attempt(outcome, counted);
        let now = Instant::now();
        // A TLS failure is never retried on that upstream; another one not tried
        // yet is tried at once.
        let untrusted = matches!(failure.kind, FailureKind::Tls(_));
        let engine = &self.engine;
        let next = self.route.as_mut().and_then(|route| {
            route.remember_retry_after(failure.retry_after);
            if untrusted {
                route.distrust();
            }
            route.next(engine, false, now)
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
        let wait = match decision {
            Decision::Wait(wait) => wait,
            Decision::RetryNow | Decision::GiveUp => Duration::ZERO,
        };
        // A retry to an upstream this request called before spends its budget; a
        // fallback is a first attempt and needs none.
        let next = next.filter(|_| decision != Decision::GiveUp);
        let throttled = next.is_some_and(|next| {
            !next.untried && !self.engine.try_retry(self.upstream_index_at(next), now)
        });
        let Some(next) = next.filter(|_| !throttled) else {
            self.log_attempt(outcome, Some(&failure.kind), None, throttled);
            self.phase = Phase::Over;
            let hint = self.job.policy.backoff(self.attempt);
            return Progress::Failed(failure.into_api_error(class, self.attempt, hint));
        };
        self.log_attempt(outcome, Some(&failure.kind), Some(wait), false);
        // Kept until the next attempt starts: if no upstream will take it then,
        // the request ends with this failure's own code.
        self.last_failure = Some((failure, class));
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

    /// Counts an ended attempt by outcome and upstream, and tells its breaker.
    pub(super) fn count_attempt(&mut self, outcome: &str, counted: Counted) {
        let Some(index) = self.route.as_ref().map(|route| route.current()) else {
            return;
        };
        self.engine
            .metrics
            .attempt(outcome, &self.engine.upstreams[index].name);
        let probe = std::mem::take(&mut self.probe);
        self.engine.record(index, counted, probe, Instant::now());
    }

    /// The upstream index the `next` attempt would go to.
    fn upstream_index_at(&self, next: Next) -> usize {
        self.route
            .as_ref()
            .map_or(0, |route| route.index_at(next.position))
    }
}
