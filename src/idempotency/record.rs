//! What an idempotency record holds: a run's [`Kept`] result, or (in Redis) a
//! failed run's error, for the repeats waiting on it on other replicas. Each is
//! its own small type with a version, not `ApiError` or a rendered body: a later
//! build that renames a variant must still read what an older one wrote (a
//! rolling upgrade), and the tests below pin the encodings.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{ApiError, UpstreamRefusal};
use crate::kept::KeptAnswer;

/// What a run left for the repeats of its request.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    /// A completion's answer, whole: a repeat gets it in its own shape.
    Answer(Box<KeptAnswer>),
    /// The job a submit made (`{"job": id}`): a repeat gets that job as it is.
    Submitted(String),
}

/// A submit's record, as encoded.
#[derive(Serialize, Deserialize)]
struct SubmittedJob {
    job: String,
}

impl Kept {
    /// Its stored encoding (an answer's is `KeptAnswer`'s).
    pub fn encode(&self) -> String {
        match self {
            Kept::Answer(answer) => answer.encode(),
            Kept::Submitted(job) => {
                let job = SubmittedJob { job: job.clone() };
                // A struct of one string always serializes.
                serde_json::to_string(&job).unwrap_or_default()
            }
        }
    }

    /// A stored encoding read back; `None` for one this build cannot read (an
    /// answer of another version, or a rendered body an older build kept).
    pub fn decode(text: &str) -> Option<Kept> {
        if let Some(answer) = KeptAnswer::decode(text) {
            return Some(Kept::Answer(Box::new(answer)));
        }
        let submitted: SubmittedJob = serde_json::from_str(text).ok()?;
        Some(Kept::Submitted(submitted.job))
    }
}

/// The encoding's version; a record of another version reads as no outcome.
const VERSION: u8 = 1;

/// A failed run, as kept for its waiters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedRun {
    v: u8,
    /// Attempts the run made (for the waiters' `x-should-retry`).
    attempts: u32,
    #[serde(flatten)]
    error: StoredError,
}

/// The error, by what happened; field names are the encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
enum StoredError {
    Busy {
        retry_after_ms: u64,
    },
    Overloaded {
        retry_after_ms: u64,
    },
    Timeout,
    Deadline,
    Rejected {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Failed {
        detail: String,
    },
    Tls {
        detail: String,
    },
    InvalidOutput {
        detail: String,
    },
    TooLarge {
        limit: usize,
    },
    /// Anything a run cannot end with (validation happens before a key is
    /// claimed); kept as a generic failure.
    Other {
        detail: String,
    },
}

impl FailedRun {
    /// The record of a run that failed with `error` after `attempts` attempts.
    pub fn new(error: &ApiError, attempts: u32) -> Self {
        let ms = |wait: &Duration| wait.as_millis() as u64;
        let error = match error {
            ApiError::UpstreamBusy { retry_after } => StoredError::Busy {
                retry_after_ms: ms(retry_after),
            },
            ApiError::Overloaded { retry_after } => StoredError::Overloaded {
                retry_after_ms: ms(retry_after),
            },
            ApiError::UpstreamTimeout => StoredError::Timeout,
            ApiError::DeadlineExceeded => StoredError::Deadline,
            ApiError::UpstreamRejected(refusal) => StoredError::Rejected {
                status: refusal.status,
                code: refusal.code.clone(),
                kind: refusal.kind.clone(),
                message: refusal.message.clone(),
            },
            ApiError::UpstreamFailed(detail) => StoredError::Failed {
                detail: detail.clone(),
            },
            ApiError::UpstreamTls(detail) => StoredError::Tls {
                detail: detail.clone(),
            },
            ApiError::InvalidOutput(detail) => StoredError::InvalidOutput {
                detail: detail.clone(),
            },
            ApiError::AnswerTooLarge(limit) => StoredError::TooLarge { limit: *limit },
            other => StoredError::Other {
                detail: other.to_string(),
            },
        };
        FailedRun {
            v: VERSION,
            attempts,
            error,
        }
    }

    /// The error and the run's attempts, if the record is of this version.
    pub fn into_error(self) -> Option<(ApiError, u32)> {
        if self.v != VERSION {
            return None;
        }
        let wait = Duration::from_millis;
        let error = match self.error {
            StoredError::Busy { retry_after_ms } => ApiError::UpstreamBusy {
                retry_after: wait(retry_after_ms),
            },
            StoredError::Overloaded { retry_after_ms } => ApiError::Overloaded {
                retry_after: wait(retry_after_ms),
            },
            StoredError::Timeout => ApiError::UpstreamTimeout,
            StoredError::Deadline => ApiError::DeadlineExceeded,
            StoredError::Rejected {
                status,
                code,
                kind,
                message,
            } => ApiError::UpstreamRejected(Box::new(UpstreamRefusal {
                status,
                code,
                kind,
                message,
            })),
            StoredError::Failed { detail } | StoredError::Other { detail } => {
                ApiError::UpstreamFailed(detail)
            }
            StoredError::Tls { detail } => ApiError::UpstreamTls(detail),
            StoredError::InvalidOutput { detail } => ApiError::InvalidOutput(detail),
            StoredError::TooLarge { limit } => ApiError::AnswerTooLarge(limit),
        };
        Some((error, self.attempts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoding_is_pinned() {
        // Pinned: replicas of different builds read each other's records.
        let busy = FailedRun::new(
            &ApiError::UpstreamBusy {
                retry_after: Duration::from_millis(2500),
            },
            3,
        );
        assert_eq!(
            serde_json::to_string(&busy).expect("encodes"),
            r#"{"v":1,"attempts":3,"error":"busy","retry_after_ms":2500}"#
        );
        let failed: FailedRun =
            serde_json::from_str(r#"{"v":1,"attempts":1,"error":"failed","detail":"reset"}"#)
                .expect("decodes");
        let (error, attempts) = failed.into_error().expect("version 1");
        assert_eq!((error.code(), attempts), ("upstream_failed", 1));
        assert_eq!(error.to_string(), "upstream failed: reset");
    }

    #[test]
    fn every_error_a_run_ends_with_comes_back_the_same() {
        let errors = [
            ApiError::UpstreamBusy {
                retry_after: Duration::from_secs(4),
            },
            ApiError::Overloaded {
                retry_after: Duration::from_secs(2),
            },
            ApiError::UpstreamTimeout,
            ApiError::DeadlineExceeded,
            ApiError::UpstreamRejected(Box::new(UpstreamRefusal {
                status: 400,
                code: Some("context_length_exceeded".into()),
                kind: Some("invalid_request_error".into()),
                message: Some("This model's maximum context length is 8192 tokens".into()),
            })),
            ApiError::UpstreamFailed("the upstream connection broke".into()),
            ApiError::UpstreamTls("UnknownIssuer".into()),
            ApiError::InvalidOutput("no JSON object".into()),
            ApiError::AnswerTooLarge(4 << 20),
        ];
        for error in errors {
            let text = serde_json::to_string(&FailedRun::new(&error, 2)).expect("encodes");
            let read: FailedRun = serde_json::from_str(&text).expect("decodes");
            let (back, attempts) = read.into_error().expect("version 1");
            assert_eq!(attempts, 2);
            assert_eq!(back, error, "{text}");
        }
    }

    #[test]
    fn a_submit_is_kept_as_its_job_and_a_rendered_body_is_unreadable() {
        let submitted = Kept::Submitted("job_1".into());
        assert_eq!(submitted.encode(), r#"{"job":"job_1"}"#);
        assert_eq!(Kept::decode(&submitted.encode()), Some(submitted));
        // What builds before the kept-answer record kept for a chat request.
        let rendered = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[]}"#;
        assert_eq!(Kept::decode(rendered), None);
    }

    #[test]
    fn another_version_reads_as_no_outcome() {
        let later: FailedRun =
            serde_json::from_str(r#"{"v":2,"attempts":1,"error":"timeout"}"#).expect("decodes");
        assert_eq!(later.into_error(), None);
    }
}
