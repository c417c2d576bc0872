//! The attempt loop's log lines: one per attempt, one per request. They are
//! written inside the span the edge opened for the request, which names it
//! (request id, trace id, route, task, job).

use std::time::Duration;

use tokio::time::Instant;

use super::phases::Phases;
use super::{Completion, Phase};
use crate::engine::failure::{FailureKind, Outcome};

impl Completion {
    /// Back-off time actually spent: whole waits, and the part of the current one
    /// that has passed (a request cancelled mid-wait did not wait the rest).
    pub(super) fn time_waited(&self) -> Duration {
        match self.phase {
            Phase::Waiting { since, .. } => self.waited + since.elapsed(),
            _ => self.waited,
        }
    }

    /// One line per attempt: what happened (`outcome`; for a failure its `reason`
    /// and `detail`), what the loop does next (`decision` = `retry` after
    /// `wait_ms`, or `stop`), and where its time went (the phases, which
    /// `count_attempt` observes in `ladle_upstream_phase_seconds`).
    pub(super) fn log_attempt(
        &self,
        outcome: Outcome,
        failure: Option<&FailureKind>,
        retry_in: Option<Duration>,
        throttled: bool,
    ) {
        let decision = if retry_in.is_some() { "retry" } else { "stop" };
        let (reason, detail) = match failure {
            Some(kind) => (Some(kind.reason()), Some(kind.detail())),
            None if outcome == Outcome::Cancelled => {
                (Some("cancelled"), Some("the client went away"))
            }
            None => (None, None),
        };
        let upstream = self.upstream().map(|u| u.name.as_str());
        let at = self.phases().map(Phases::millis).unwrap_or_default();
        // One line, at the level its outcome calls for (a level is fixed per
        // call site, so the fields are written once, here, for both).
        macro_rules! attempt_line {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    upstream,
                    attempt = self.attempt,
                    elapsed_ms = self.elapsed_ms(),
                    outcome = outcome.name(),
                    decision,
                    wait_ms = retry_in.unwrap_or_default().as_millis() as u64,
                    reason,
                    detail,
                    throttled = throttled.then_some(true),
                    continuation = self.prefix.continuing.is_some().then_some(true),
                    prefix_chars = self.prefix.continuing,
                    connect_ms = at.connect_ms,
                    head_ms = at.head_ms,
                    first_event_ms = at.first_event_ms,
                    first_output_ms = at.first_output_ms,
                    reused = at.reused,
                    "attempt ended"
                )
            };
        }
        match outcome {
            Outcome::Ok | Outcome::Cancelled => attempt_line!(tracing::Level::INFO),
            _ => attempt_line!(tracing::Level::WARN),
        }
    }

    /// One line per request: `outcome` is `ok`, the error code, or `cancelled`;
    /// `attempt` is the number of attempts made; `wait_ms` adds up the back-offs.
    pub(super) fn log_request(&self, outcome: &str) {
        tracing::info!(
            attempt = self.attempt,
            elapsed_ms = self.elapsed_ms(),
            deadline_ms = (self.spec.deadline.at - self.spec.deadline.started).as_millis() as u64,
            outcome,
            wait_ms = self.time_waited().as_millis() as u64,
            queue_ms = self.queued.as_millis() as u64,
            "completion ended"
        );
    }

    /// How far the current attempt got (none while it connects).
    pub(super) fn phases(&self) -> Option<&Phases> {
        match &self.phase {
            Phase::Streaming(attempt) => Some(attempt.phases()),
            _ => self.failed_open.as_ref(),
        }
    }

    fn elapsed_ms(&self) -> u64 {
        (Instant::now() - self.spec.deadline.started).as_millis() as u64
    }
}
