//! What the loop does when an attempt fails: classify it once, count it, let the
//! pure policy decide whether and when to retry (told where the retry would go and
//! whether that upstream's budget has room), and move on.

use std::time::Duration;

use tokio::time::Instant;

use super::recent::Ended;
use super::{Completion, GaveUp, Phase, Progress};
use crate::engine::breaker::Counted;
use crate::engine::failure::{AttemptFailure, Classified, FailureKind, Outcome};
use crate::engine::retry::{Decision, Failed, FailureClass, GiveUp};
use crate::engine::upstream::order::Next;

impl Completion {
    /// The current attempt failed; `None` when what follows is for the caller
    /// to see only as the next attempt (a continuation).
    pub(super) fn on_failure(&mut self, failure: AttemptFailure) -> Option<Progress> {
        // The attempt is over: its upstream's slot is free for others, also
        // while this request backs off.
        self.upstream_slot = None;
        let output_began = matches!(&self.phase, Phase::Streaming(a) if a.output_began());
        let classified = failure.classify(output_began, &self.shared.busy_keywords);
        self.count_attempt(classified.outcome, classified.counted);
        let now = Instant::now();
        let (next, stayed) = match self.order.as_mut() {
            None => (None, true),
            Some(order) => {
                order.note_failure(
                    failure.retry_after,
                    classified.class == FailureClass::NotHere,
                );
                let usable = |index| self.shared.usable(index, now);
                let next = order.next_after(failure.kind.is_timeout(), usable);
                (next, order.stayed())
            }
        };
        let failed = Failed {
            attempt: self.attempt,
            class: classified.class,
            output_began,
            next: next.map(|next| next.upstream),
            budget_has_room: true,
            stayed,
        };
        if let Some((decision, to)) = self.decide_cut(&failure, classified, failed, now) {
            return match (decision, to) {
                (Decision::Continue { wait }, Some(to)) => {
                    self.continue_cut(failure, classified, to, wait, now)
                }
                (decision, to) => Some(self.stop(failure, classified, decision, to)),
            };
        }
        let (policy, deadline) = (&self.spec.policy, self.spec.deadline);
        let decision = self.shared.decide_retry(next, now, |budget_has_room| {
            let failed = Failed {
                budget_has_room,
                ..failed
            };
            policy.decide(failed, now, deadline, rand::random::<f64>())
        });
        Some(match (decision, next) {
            (Decision::Retry { wait }, Some(next)) => {
                self.retry(failure, classified, next, wait, output_began, now)
            }
            (decision, next) => self.stop(failure, classified, decision, next),
        })
    }

    /// The policy decided to stop (`next`: where it would have gone).
    fn stop(
        &mut self,
        failure: AttemptFailure,
        classified: Classified,
        decision: Decision,
        next: Option<Next>,
    ) -> Progress {
        let throttled = decision == Decision::GiveUp(GiveUp::Throttled);
        if let Some(next) = next.filter(|_| throttled) {
            let upstream = &self.shared.upstreams[next.index].name;
            self.shared.metrics.retry_throttled(upstream);
        }
        self.give_up(failure, classified, throttled)
    }

    /// The request ends with this failure's error (`throttled`: the retry's
    /// budget refused it); a continuing request with its first cut's, unless
    /// its deadline passed.
    fn give_up(
        &mut self,
        failure: AttemptFailure,
        classified: Classified,
        throttled: bool,
    ) -> Progress {
        self.log_attempt(classified.outcome, Some(&failure.kind), None, throttled);
        self.phase = Phase::Over;
        // A passed deadline is its own answer, and so is output that could not
        // be parsed: that stream ended well (11.4).
        let own = matches!(
            failure.kind,
            FailureKind::Deadline | FailureKind::InvalidOutput(_)
        );
        let (failure, classified) = match self.prefix.first_cut.take() {
            Some(first) if !own => first,
            _ => (failure, classified),
        };
        let hint = self.spec.policy.backoff(self.attempt);
        Progress::Failed(GaveUp::Failed {
            failure,
            classified,
            attempts: self.attempt,
            retry_after: hint,
        })
    }

    /// Another attempt follows, on `next`'s upstream, after `wait`.
    fn retry(
        &mut self,
        failure: AttemptFailure,
        classified: Classified,
        next: Next,
        wait: Duration,
        output_began: bool,
        now: Instant,
    ) -> Progress {
        self.log_attempt(classified.outcome, Some(&failure.kind), Some(wait), false);
        // Kept until the next attempt starts: if no upstream will take it then,
        // the request ends with this failure's own code.
        self.last_failure = Some((failure, classified));
        self.shared.metrics.retry(classified.reason);
        let from = self.upstream().map(|u| u.name.clone()).unwrap_or_default();
        if let Some(order) = self.order.as_mut() {
            order.move_to(next);
        }
        let to = self.upstream().map(|u| u.name.clone()).unwrap_or_default();
        if from != to {
            self.shared.metrics.fallback(&from, &to);
        }
        self.phase = Phase::Waiting {
            since: now,
            until: now + wait,
        };
        Progress::Retry {
            attempt: self.attempt,
            reason: classified.reason,
            wait,
            output_began,
            upstream: to,
        }
    }

    /// An attempt is over: its outcome and phases counted, its upstream's recent
    /// attempts and its breaker told.
    pub(super) fn count_attempt(&mut self, outcome: Outcome, counted: Counted) {
        let Some(index) = self.order.as_ref().map(|order| order.current()) else {
            return;
        };
        let (metrics, upstream) = (&self.shared.metrics, &self.shared.upstreams[index].name);
        metrics.attempt(outcome, upstream);
        if self.prefix.continuing.is_some() {
            metrics.continuation(upstream, outcome);
        }
        let phases = self.phases();
        if let Some(phases) = phases {
            phases.record(metrics, upstream);
        }
        let first_output_ms = phases.and_then(|p| p.millis().first_output_ms);
        self.in_attempt = None;
        self.shared.guards[index].recent.ended(Ended {
            outcome,
            first_output_ms,
        });
        let probe = std::mem::take(&mut self.probe);
        self.shared.record(index, counted, probe, Instant::now());
    }
}
