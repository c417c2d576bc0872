//! One failure, classified once: how the retry policy treats it (`class`), what
//! section 5 calls it (`outcome`), how the breaker counts it (`counted`), why a
//! retry after it is made (`reason`), and the contract error a request that gives
//! up on it ends with.
//!
//! The same failure is classed differently before and after output: an idle timeout
//! before the model wrote a word is "not started" (worth waiting for), after it is
//! "other" (the answer is half-written). That is why `classify` takes
//! `output_began`.

use std::time::Duration;

use super::{AttemptFailure, BusyKeywords, FailureKind};
use crate::breaker::Counted;
use crate::error::{ApiError, UpstreamRefusal};
use crate::retry::FailureClass;

/// An ended attempt, as section 5 names it (metrics and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It answered.
    Ok,
    /// The upstream said it is busy.
    Busy,
    /// It died before any output.
    NotStarted,
    /// Something else broke.
    Failed,
    /// The upstream refused the request for good.
    Rejected,
    /// The request's deadline passed.
    Deadline,
    /// The client went away.
    Cancelled,
}

impl Outcome {
    /// Every outcome, for metrics registered up front.
    pub const ALL: [Outcome; 7] = [
        Outcome::Ok,
        Outcome::Busy,
        Outcome::NotStarted,
        Outcome::Failed,
        Outcome::Rejected,
        Outcome::Deadline,
        Outcome::Cancelled,
    ];

    /// The name in logs and in `ladle_upstream_attempts_total{outcome}`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Busy => "busy",
            Outcome::NotStarted => "not_started",
            Outcome::Failed => "failed",
            Outcome::Rejected => "rejected",
            Outcome::Deadline => "deadline",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Why a retry is made: the task `retry` event's `reason` and
/// `ladle_retries_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    /// After a busy attempt.
    Busy,
    /// After an attempt that never started.
    NotStarted,
    /// After any other failure.
    Failed,
    /// After a does-not-fit rejection: the next upstream is tried at once.
    Rejected,
}

impl RetryReason {
    /// Every reason, for metrics registered up front.
    pub const ALL: [RetryReason; 4] = [
        RetryReason::Busy,
        RetryReason::NotStarted,
        RetryReason::Failed,
        RetryReason::Rejected,
    ];

    /// The contract's name for it.
    pub fn name(self) -> &'static str {
        match self {
            RetryReason::Busy => "busy",
            RetryReason::NotStarted => "not_started",
            RetryReason::Failed => "failed",
            RetryReason::Rejected => "rejected",
        }
    }
}

/// What one failure is, for every reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    /// How the retry policy treats it.
    pub class: FailureClass,
    /// Its name in metrics and logs.
    pub outcome: Outcome,
    /// How its upstream's breaker counts it.
    pub counted: Counted,
    /// Why a retry after it is made.
    pub reason: RetryReason,
}

impl AttemptFailure {
    /// Classifies the failure of an attempt that had (or had not) written output.
    pub fn classify(&self, output_began: bool, busy: &BusyKeywords) -> Classified {
        let class = self.class(output_began, busy);
        let does_not_fit = matches!(&self.kind, FailureKind::Status(r) if r.does_not_fit());
        let outcome = match (class, &self.kind) {
            (_, FailureKind::Deadline) => Outcome::Deadline,
            (_, FailureKind::AnswerTooLarge(_)) => Outcome::Failed,
            (FailureClass::Busy, _) => Outcome::Busy,
            (FailureClass::NotStarted, _) => Outcome::NotStarted,
            (FailureClass::Final, _) => Outcome::Rejected,
            (FailureClass::NotHere, _) if does_not_fit => Outcome::Rejected,
            (FailureClass::Other | FailureClass::NotHere, _) => Outcome::Failed,
        };
        // Section 6.2: unparsable output, rejections and a passed deadline say
        // nothing about the upstream's health; a timeout costs a probing caller
        // seconds, so the breaker's next opening grows after one.
        let counted = match (outcome, &self.kind) {
            (_, FailureKind::InvalidOutput(_)) | (Outcome::Rejected | Outcome::Deadline, _) => {
                Counted::Neither
            }
            (_, kind) => Counted::Failure {
                timed_out: matches!(
                    kind,
                    FailureKind::ConnectTimeout(_)
                        | FailureKind::IdleTimeout
                        | FailureKind::FirstOutputTimeout
                ),
            },
        };
        let reason = match class {
            FailureClass::Busy => RetryReason::Busy,
            FailureClass::NotStarted => RetryReason::NotStarted,
            FailureClass::NotHere if does_not_fit => RetryReason::Rejected,
            FailureClass::Other | FailureClass::NotHere | FailureClass::Final => {
                RetryReason::Failed
            }
        };
        Classified {
            class,
            outcome,
            counted,
            reason,
        }
    }

    fn class(&self, output_began: bool, busy: &BusyKeywords) -> FailureClass {
        use FailureClass::{Busy, Final, NotHere, NotStarted, Other};
        match &self.kind {
            FailureKind::Status(r) if matches!(r.status, 503 | 429 | 529) => Busy,
            FailureKind::Status(r) if busy.matches(&r.message) => Busy,
            FailureKind::ErrorChunk(message) if busy.matches(message) => Busy,
            FailureKind::Status(r) if r.does_not_fit() => NotHere,
            FailureKind::Status(r) if (400..500).contains(&r.status) && r.status != 408 => Final,
            FailureKind::Status(_) | FailureKind::ErrorChunk(_) => Other,
            FailureKind::Connect(_) | FailureKind::ConnectTimeout(_) => NotStarted,
            FailureKind::FirstOutputTimeout => NotStarted,
            FailureKind::Tls(_) => NotHere,
            FailureKind::IdleTimeout | FailureKind::Io(_) | FailureKind::EndedEarly
                if !output_began =>
            {
                NotStarted
            }
            FailureKind::IdleTimeout | FailureKind::Io(_) | FailureKind::EndedEarly => Other,
            FailureKind::Protocol(_) | FailureKind::InvalidOutput(_) => Other,
            // More of the same would not be smaller.
            FailureKind::AnswerTooLarge(_) | FailureKind::Deadline => Final,
        }
    }

    /// The error the request ends with when it gives up after this failure, the
    /// `attempts`-th; `retry_after` is the hint for a busy upstream that sent none.
    pub fn into_error(
        self,
        classified: Classified,
        attempts: u32,
        retry_after: Duration,
    ) -> ApiError {
        match (classified.class, self.kind) {
            (_, FailureKind::Deadline) => ApiError::DeadlineExceeded,
            (FailureClass::Busy, _) => ApiError::UpstreamBusy {
                retry_after: self.retry_after.unwrap_or(retry_after),
            },
            (FailureClass::NotStarted, _) => ApiError::UpstreamTimeout,
            (_, FailureKind::Tls(why)) => ApiError::UpstreamTls(why),
            (_, FailureKind::AnswerTooLarge(limit)) => ApiError::AnswerTooLarge(limit),
            (FailureClass::Final | FailureClass::NotHere, FailureKind::Status(refusal)) => {
                ApiError::UpstreamRejected(Box::new(UpstreamRefusal::from(*refusal)))
            }
            (_, FailureKind::InvalidOutput(why)) => ApiError::InvalidOutput(why),
            (_, kind) => {
                ApiError::UpstreamFailed(format!("{} after {attempts} attempt(s)", kind.summary()))
            }
        }
    }
}

/// The most characters of the upstream's message an error body shows.
const MAX_REFUSAL_MESSAGE: usize = 500;

impl From<super::Refusal> for UpstreamRefusal {
    /// What a caller is told of the upstream's refusal: its status, and from an
    /// error JSON its `code`, `type` and `message` (already free of secrets, and
    /// cut here at 500 characters, never inside one).
    fn from(refusal: super::Refusal) -> Self {
        let message = refusal
            .from_json
            .then(|| refusal.message.chars().take(MAX_REFUSAL_MESSAGE).collect());
        UpstreamRefusal {
            status: refusal.status,
            code: refusal.code,
            kind: refusal.kind,
            message,
        }
    }
}
