//! A cut answer continued (contract 11.4): where a continuation would go, the
//! policy's word on it, and the move to it. The next attempt then sends `P`
//! in its upstream's dialect (`start`), and the caller sees its chunks go on.

use std::time::Duration;

use tokio::time::Instant;

use super::{Completion, Phase, Progress};
use crate::engine::failure::{AttemptFailure, Classified, FailureKind};
use crate::engine::retry::{Cut, Decision, Failed, FailureClass};
use crate::engine::upstream::order::Next;

impl Completion {
    /// The policy's decision when this failure could be followed by a
    /// continuation, with where it would go; `None` when section 2's rule
    /// decides (the request cannot be continued, or output that could not be
    /// parsed: that stream ended well).
    pub(super) fn decide_cut(
        &mut self,
        failure: &AttemptFailure,
        classified: Classified,
        failed: Failed,
        now: Instant,
    ) -> Option<(Decision, Option<Next>)> {
        let was_continuation = self.prefix.continuing.is_some();
        if matches!(failure.kind, FailureKind::InvalidOutput(_))
            || !(was_continuation || self.prefix.continuable())
        {
            return None;
        }
        let order = self.order.as_ref()?;
        let refused = was_continuation
            && classified.class == FailureClass::Final
            && matches!(failure.kind, FailureKind::Status(_));
        if refused {
            self.prefix.refused.push(order.current());
        }
        let (shared, prefix) = (&self.shared, &self.prefix);
        let takes_one = |index: usize| {
            shared.upstreams[index].continuation.can_continue()
                && !prefix.refused.contains(&index)
                && shared.usable(index, now)
        };
        let after_content =
            prefix.wrote && matches!(classified.class, FailureClass::Other | FailureClass::Busy);
        let next = match (prefix.continuable(), after_content) {
            (false, _) => None,
            (true, true) => order.stay_or_next(takes_one),
            (true, false) => order.next(refused, takes_one),
        };
        let cut = Cut {
            wrote_content: prefix.wrote,
            was_continuation,
            refused,
            continued: prefix.continued,
            next: next.map(|next| next.upstream),
            budget_has_room: true,
        };
        let (policy, deadline) = (&self.spec.policy, self.spec.deadline);
        let decision = self.shared.decide_retry(next, now, |budget_has_room| {
            let cut = Cut {
                budget_has_room,
                ..cut
            };
            policy.decide_cut(failed, cut, now, deadline, rand::random::<f64>())
        })?;
        Some((decision, next))
    }

    /// The next attempt continues the answer so far on `to`'s upstream, after
    /// `wait`: the caller is told nothing until it starts.
    pub(super) fn continue_cut(
        &mut self,
        failure: AttemptFailure,
        classified: Classified,
        to: Next,
        wait: Duration,
        now: Instant,
    ) -> Option<Progress> {
        self.log_attempt(classified.outcome, Some(&failure.kind), Some(wait), false);
        if self.prefix.wrote {
            // A new cut: its text stays in the answer, and its usage in the bill.
            self.prefix.continued += 1;
            let usage = self.answer.usage.take();
            self.prefix.billed.add(usage.as_ref());
        }
        let first = self.prefix.first_cut.get_or_insert((failure, classified));
        // If no upstream takes the continuation when it is due, the request
        // ends with its first cut's code.
        self.last_failure = Some(first.clone());
        self.prefix.pending = true;
        let from = self.upstream().map(|u| u.name.clone()).unwrap_or_default();
        if let Some(order) = self.order.as_mut() {
            order.move_to(to);
        }
        let to = &self.shared.upstreams[to.index].name;
        if from != *to {
            self.shared.metrics.fallback(&from, to);
        }
        self.phase = Phase::Waiting {
            since: now,
            until: now + wait,
        };
        None
    }
}
