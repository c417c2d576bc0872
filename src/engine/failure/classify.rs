//! One failure, classified once: how the retry policy treats it (`class`), what
//! section 5 calls it (`outcome`), how the breaker counts it (`counted`) and why a
//! retry after it is made (`reason`). The contract error a request that gives up
//! on it ends with is `error`'s to say (`ApiError::gave_up`).
//!
//! The same failure is classed differently before and after output: an idle timeout
//! before the model wrote a word is "not started" (worth waiting for), after it is
//! "other" (the answer is half-written). That is why `classify` takes
//! `output_began`.

use super::outcome::{Outcome, RetryReason};
use super::{AttemptFailure, BusyKeywords, FailureKind};
use crate::engine::breaker::Counted;
use crate::engine::retry::FailureClass;

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
}
