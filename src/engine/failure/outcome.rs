//! The names of what happened, as metrics, logs and task events say them: an
//! ended attempt's outcome and a retry's reason. A leaf of its own, so the metrics
//! that count them need nothing else of `failure`.

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
