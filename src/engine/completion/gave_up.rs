//! Why a completion ended without an answer, in the engine's own words: the last
//! attempt's failure as classified, or a limit that let no attempt begin. The
//! edge turns it into the client's error (`error/upstream.rs`, once); the engine
//! names the contract's code only for its own log line, and a test pins the two
//! to agree.

use std::time::Duration;

use crate::engine::failure::{AttemptFailure, Classified, FailureKind};
use crate::engine::retry::FailureClass;

/// How a completion gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaveUp {
    /// After `attempts` attempts, the last one's failure; `retry_after` is the
    /// hint for a busy upstream that sent none.
    Failed {
        /// The last attempt's failure.
        failure: AttemptFailure,
        /// How it was classified.
        classified: Classified,
        /// Attempts made.
        attempts: u32,
        /// What a busy caller should wait when the upstream said nothing.
        retry_after: Duration,
    },
    /// No slot came within `LADLE_QUEUE_TIMEOUT_MS`.
    Overloaded {
        /// What the caller should wait.
        retry_after: Duration,
    },
    /// The deadline passed before an attempt could begin.
    Deadline,
    /// Every upstream's breaker is open.
    AllOpen {
        /// When the first one lets a probe through.
        retry_after: Duration,
    },
}

impl GaveUp {
    /// The contract's error code, for the request's log line.
    pub fn code(&self) -> &'static str {
        match self {
            GaveUp::Failed {
                failure,
                classified,
                ..
            } => match (classified.class, &failure.kind) {
                (_, FailureKind::Deadline) => "deadline_exceeded",
                (FailureClass::Busy, _) => "upstream_busy",
                (FailureClass::NotStarted, _) => "upstream_timeout",
                (_, FailureKind::Tls(_) | FailureKind::AnswerTooLarge(_)) => "upstream_failed",
                (FailureClass::Final | FailureClass::NotHere, FailureKind::Status(_)) => {
                    "upstream_rejected"
                }
                (_, FailureKind::InvalidOutput(_)) => "invalid_output",
                _ => "upstream_failed",
            },
            GaveUp::Overloaded { .. } => "overloaded",
            GaveUp::Deadline => "deadline_exceeded",
            GaveUp::AllOpen { .. } => "upstream_busy",
        }
    }
}
