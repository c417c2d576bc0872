//! The one error type that leaves a handler, and the one place it becomes JSON.
//!
//! Every variant maps to exactly one contract error code, status and `retryable`
//! flag, by exhaustive matches, so a new variant cannot forget one. `IntoResponse`
//! only stores the error in the response's extensions; `render_error`, called by
//! the request middleware that knows the request id, writes the body and logs it. Messages
//! never carry upstream bodies or secrets.

mod render;
mod store;
mod upstream;

pub use render::{AnsweredOn, ErrorCode, SHOULD_RETRY, below_the_router, render_error};

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

/// What an upstream said when it refused a request for good (contract 2): its
/// status, and from an error JSON its `code`, `type` and `message` (at most 500
/// characters, free of every configured secret), so a caller can tell a context
/// overflow from a content filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamRefusal {
    /// The upstream's HTTP status.
    pub status: u16,
    /// Its error JSON's `code`.
    pub code: Option<String>,
    /// Its error JSON's `type`.
    pub kind: Option<String>,
    /// Its error JSON's `message`.
    pub message: Option<String>,
}

/// Everything a client can be told went wrong. (What a store keeps of one is
/// its own type: `idempotency::record`.)
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// The body is not valid JSON, or not the right shape.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Unknown route or unknown task.
    #[error("{0}")]
    NotFound(String),
    /// The body is larger than `LADLE_MAX_BODY_BYTES`.
    #[error("request body exceeds {0} bytes")]
    BodyTooLarge(usize),
    /// Task variables missing, of the wrong type, or too long.
    #[error("variable `{name}`: {problem}")]
    InvalidVariables {
        /// The variable at fault.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The upstream answered with a final 4xx (or every upstream tried answered
    /// that the request does not fit it); what the last one said.
    #[error("upstream rejected the request with HTTP {}", .0.status)]
    UpstreamRejected(Box<UpstreamRefusal>),
    /// Retryable upstream failures, out of retries.
    #[error("upstream failed: {0}")]
    UpstreamFailed(String),
    /// The upstream's TLS handshake failed in a way asking again cannot fix.
    #[error("upstream failed: {0}")]
    UpstreamTls(String),
    /// The model's text could not be turned into the task's output.
    #[error("the model's output is unusable: {0}")]
    InvalidOutput(String),
    /// The answer ladle assembles grew past `LADLE_MAX_ANSWER_BYTES`.
    #[error("upstream failed: the answer passed LADLE_MAX_ANSWER_BYTES ({0} bytes per choice)")]
    AnswerTooLarge(usize),
    /// The upstream stayed busy until retries or time ran out.
    #[error("upstream is busy; try again later")]
    UpstreamBusy {
        /// What the caller should wait before asking again.
        retry_after: Duration,
    },
    /// The gateway's own queue is full.
    #[error("the gateway is at capacity; try again later")]
    Overloaded {
        /// What the caller should wait before asking again.
        retry_after: Duration,
    },
    /// The upstream never started writing, out of retries or time.
    #[error("upstream did not start answering in time")]
    UpstreamTimeout,
    /// The request's deadline passed.
    #[error("the request's deadline passed")]
    DeadlineExceeded,
    /// The `Idempotency-Key` is kept or running for another request.
    #[error("this Idempotency-Key was used for another request")]
    IdempotencyKeyReused,
    /// The request head is larger than the gateway reads.
    #[error("invalid request: the request head is over {0} bytes")]
    HeadTooLarge(usize),
    /// Missing or wrong admin token.
    #[error("missing or wrong admin token")]
    Unauthorized,
    /// A `/v1/*` request without a known client key (`LADLE_CLIENT_KEYS_FILE`).
    #[error("missing or unknown client key")]
    NoClientKey,
    /// The client key may not run this task.
    #[error("this client key may not run task `{0}`")]
    Forbidden(String),
    /// The client key is over its `max_inflight` or `rate_per_s`.
    #[error("this client key is over its {limit}; try again later")]
    RateLimited {
        /// Which limit: `max_inflight` or `rate_per_s`.
        limit: &'static str,
        /// When a request of the key can be admitted again.
        retry_after: Duration,
    },
    /// `If-Match` names a version that is no longer current.
    #[error("the prompt changed since it was read (ETag mismatch)")]
    EtagMismatch,
    /// A prompt file that cannot be used.
    #[error("invalid prompt: {message}")]
    InvalidPrompt {
        /// What is wrong.
        message: String,
        /// 1-based line, where known.
        line: Option<usize>,
        /// 1-based column, where known.
        column: Option<usize>,
    },
    /// The prompt store could not read or write a file.
    #[error("prompt storage failed: {0}")]
    Storage(String),
    /// The store a write or a job needs (the fleet's Redis, the state file) cannot
    /// be reached: nothing is accepted that cannot be kept.
    #[error("the store is unreachable; try again shortly")]
    StoreUnavailable,
    /// No such job (or another client's, or expired).
    #[error("no such job")]
    JobNotFound,
    /// The job is over already; it was left as it is.
    #[error("the job is finished already")]
    JobFinished,
    /// Every run of a job was cut short by the process that ran it dying.
    #[error("every run of the job was cut short by its process stopping")]
    JobInterrupted,
    /// The job's stored record could not be read back (written by an older build
    /// past what can be read, or damaged): it was ended rather than left to stop
    /// the queue.
    #[error("the job's stored record could not be read; submit it again")]
    JobUnreadable,
    /// The job was accepted, but the fleet's Redis lost its data since (it has
    /// no append-only file): submit it again.
    #[error("the job was lost: the fleet's Redis lost its data; submit it again")]
    JobLost,
    /// A redelivery was asked of a job whose webhook delivery has not failed.
    #[error("the job's webhook delivery has not failed (or there is none)")]
    DeliveryNotFailed,
}

impl ApiError {
    /// The contract's error code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) | ApiError::HeadTooLarge(_) => "invalid_request",
            ApiError::NotFound(_) => "not_found",
            ApiError::BodyTooLarge(_) => "body_too_large",
            ApiError::InvalidVariables { .. } => "invalid_variables",
            ApiError::UpstreamRejected(_) => "upstream_rejected",
            ApiError::UpstreamFailed(_)
            | ApiError::UpstreamTls(_)
            | ApiError::AnswerTooLarge(_) => "upstream_failed",
            ApiError::InvalidOutput(_) => "invalid_output",
            ApiError::UpstreamBusy { .. } => "upstream_busy",
            ApiError::Overloaded { .. } => "overloaded",
            ApiError::UpstreamTimeout => "upstream_timeout",
            ApiError::DeadlineExceeded => "deadline_exceeded",
            ApiError::IdempotencyKeyReused => "idempotency_key_reused",
            ApiError::Unauthorized | ApiError::NoClientKey => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::EtagMismatch => "etag_mismatch",
            ApiError::InvalidPrompt { .. } => "invalid_prompt",
            ApiError::Storage(_) => "storage_failed",
            ApiError::StoreUnavailable => "store_unavailable",
            ApiError::JobNotFound => "job_not_found",
            ApiError::JobFinished => "job_finished",
            ApiError::JobInterrupted => "job_interrupted",
            ApiError::JobUnreadable => "job_unreadable",
            ApiError::DeliveryNotFailed => "delivery_not_failed",
            ApiError::JobLost => "job_lost",
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::HeadTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BodyTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::InvalidVariables { .. }
            | ApiError::InvalidPrompt { .. }
            | ApiError::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::UpstreamRejected(_)
            | ApiError::UpstreamFailed(_)
            | ApiError::UpstreamTls(_)
            | ApiError::AnswerTooLarge(_)
            | ApiError::InvalidOutput(_) => StatusCode::BAD_GATEWAY,
            ApiError::UpstreamBusy { .. }
            | ApiError::Overloaded { .. }
            | ApiError::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::JobNotFound => StatusCode::NOT_FOUND,
            ApiError::JobFinished => StatusCode::CONFLICT,
            ApiError::JobInterrupted => StatusCode::BAD_GATEWAY,
            ApiError::JobUnreadable => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::DeliveryNotFailed => StatusCode::CONFLICT,
            ApiError::JobLost => StatusCode::GONE,
            ApiError::UpstreamTimeout | ApiError::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Unauthorized | ApiError::NoClientKey => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::EtagMismatch => StatusCode::PRECONDITION_FAILED,
            ApiError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The status on `/v1/chat/completions`: an upstream's final `400`, `404`,
    /// `413` or `422` is kept (what the caller sent does not fit the upstream, and
    /// every OpenAI client's error classes key on the status); everything else is
    /// `status`. Tasks and jobs keep `502`: their caller sent variables, not the
    /// upstream's request.
    pub fn status_on_chat(&self) -> StatusCode {
        match self {
            ApiError::UpstreamRejected(refusal)
                if matches!(refusal.status, 400 | 404 | 413 | 422) =>
            {
                StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_GATEWAY)
            }
            _ => self.status(),
        }
    }

    /// Whether asking again later can help.
    pub fn retryable(&self) -> bool {
        match self {
            ApiError::UpstreamFailed(_)
            | ApiError::InvalidOutput(_)
            | ApiError::UpstreamBusy { .. }
            | ApiError::Overloaded { .. }
            | ApiError::UpstreamTimeout
            | ApiError::DeadlineExceeded
            | ApiError::Storage(_)
            | ApiError::StoreUnavailable
            | ApiError::RateLimited { .. } => true,
            ApiError::InvalidRequest(_)
            | ApiError::HeadTooLarge(_)
            | ApiError::NotFound(_)
            | ApiError::BodyTooLarge(_)
            | ApiError::InvalidVariables { .. }
            | ApiError::UpstreamRejected(_)
            | ApiError::UpstreamTls(_)
            | ApiError::AnswerTooLarge(_)
            | ApiError::IdempotencyKeyReused
            | ApiError::Unauthorized
            | ApiError::NoClientKey
            | ApiError::Forbidden(_)
            | ApiError::EtagMismatch
            | ApiError::InvalidPrompt { .. }
            | ApiError::JobNotFound
            | ApiError::JobFinished
            | ApiError::JobInterrupted
            | ApiError::JobUnreadable
            | ApiError::DeliveryNotFailed
            | ApiError::JobLost => false,
        }
    }

    /// The `Retry-After` the caller is given, for the 503 codes.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::UpstreamBusy { retry_after }
            | ApiError::Overloaded { retry_after }
            | ApiError::RateLimited { retry_after, .. } => Some(*retry_after),
            // Redis is looked at again every second; two cover a reconnect.
            ApiError::StoreUnavailable => Some(Duration::from_secs(2)),
            _ => None,
        }
    }

    /// The contract's error body, also sent as the `error` event of a stream.
    pub fn body(&self, request_id: &str) -> Value {
        let mut error = json!({
            "code": self.code(),
            "message": self.to_string(),
            "retryable": self.retryable(),
            "request_id": request_id,
        });
        if let ApiError::InvalidPrompt { line, column, .. } = self {
            error["line"] = json!(line);
            error["column"] = json!(column);
        }
        if let ApiError::InvalidVariables { name, .. } = self {
            error["variable"] = json!(name);
        }
        if let ApiError::UpstreamRejected(refusal) = self {
            let mut upstream = json!({ "status": refusal.status });
            for (field, value) in [
                ("code", &refusal.code),
                ("type", &refusal.kind),
                ("message", &refusal.message),
            ] {
                if let Some(value) = value {
                    upstream[field] = json!(value);
                }
            }
            error["upstream"] = upstream;
        }
        json!({ "error": error })
    }
}

#[cfg(test)]
mod tests;
