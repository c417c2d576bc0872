//! What a request that gave up ends with: the engine's `GaveUp` (the attempt
//! loop's last failure, as classified, or a limit that let no attempt begin),
//! mapped to the contract's error once, here. The engine knows nothing of the
//! errors a client is shown.

use std::time::Duration;

use super::{ApiError, UpstreamRefusal};
use crate::engine::completion::GaveUp;
use crate::engine::failure::{AttemptFailure, Classified, FailureKind, Refusal};
use crate::engine::retry::FailureClass;

/// The most characters of the upstream's message an error body shows.
const MAX_REFUSAL_MESSAGE: usize = 500;

impl From<GaveUp> for ApiError {
    fn from(gave_up: GaveUp) -> Self {
        match gave_up {
            GaveUp::Failed {
                failure,
                classified,
                attempts,
                retry_after,
            } => ApiError::gave_up(failure, classified, attempts, retry_after),
            GaveUp::Overloaded { retry_after } => ApiError::Overloaded { retry_after },
            GaveUp::Deadline => ApiError::DeadlineExceeded,
            GaveUp::AllOpen { retry_after } => ApiError::UpstreamBusy { retry_after },
        }
    }
}

impl ApiError {
    /// The error a request ends with when it gives up after `failure`, its
    /// `attempts`-th; `retry_after` is the hint for a busy upstream that sent none.
    fn gave_up(
        failure: AttemptFailure,
        classified: Classified,
        attempts: u32,
        retry_after: Duration,
    ) -> ApiError {
        match (classified.class, failure.kind) {
            (_, FailureKind::Deadline) => ApiError::DeadlineExceeded,
            (FailureClass::Busy, _) => ApiError::UpstreamBusy {
                retry_after: failure.retry_after.unwrap_or(retry_after),
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

impl From<Refusal> for UpstreamRefusal {
    /// What a caller is told of the upstream's refusal: its status, and from an
    /// error JSON its `code`, `type` and `message` (already free of secrets, and
    /// cut here at 500 characters, never inside one).
    fn from(refusal: Refusal) -> Self {
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
