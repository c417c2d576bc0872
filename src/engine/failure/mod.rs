//! The one family of attempt failures: what happened to an attempt (the upstream
//! client reports its own failures in it too). `classify` turns one into the one
//! classified value that the retry policy, the breaker, metrics, events and logs
//! all read, after linkerd2-proxy's `classify`.

mod classify;
pub mod outcome;

pub use classify::Classified;
pub use outcome::{Outcome, RetryReason};

use std::time::Duration;

/// One failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptFailure {
    /// What happened.
    pub kind: FailureKind,
    /// The upstream's `Retry-After`, if it sent one.
    pub retry_after: Option<Duration>,
}

/// What happened to an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureKind {
    /// No connection (refused, unreachable, proxy down).
    Connect(String),
    /// No connection within `LADLE_CONNECT_TIMEOUT_MS`.
    ConnectTimeout(String),
    /// A TLS handshake that waiting cannot fix (an untrusted certificate).
    Tls(String),
    /// No SSE event within the idle timeout.
    IdleTimeout,
    /// No output within the first-output timeout of the attempt's start, though
    /// events (role-only or empty deltas) may have kept the idle timer reset.
    FirstOutputTimeout,
    /// The connection broke (reset, or EOF in the middle of a body).
    Io(String),
    /// The stream ended without `[DONE]` or a `finish_reason`.
    EndedEarly,
    /// A non-2xx status, with what the upstream said (secrets scrubbed).
    Status(Box<Refusal>),
    /// A chunk carrying an `error` object.
    ErrorChunk(String),
    /// The upstream broke the protocol (non-JSON chunk, endless line, huge body).
    Protocol(String),
    /// The model's text could not be turned into the task's output.
    InvalidOutput(String),
    /// An answer ladle assembles grew past `LADLE_MAX_ANSWER_BYTES` (this many).
    AnswerTooLarge(usize),
    /// The request's deadline passed.
    Deadline,
}

impl AttemptFailure {
    /// A failure with no `Retry-After`.
    pub fn new(kind: FailureKind) -> Self {
        AttemptFailure {
            kind,
            retry_after: None,
        }
    }
}

impl FailureKind {
    /// The same failure with its text (the upstream's words) passed through `f`,
    /// as when secrets are scrubbed out of it.
    pub fn map_text(self, f: impl FnOnce(&str) -> String) -> Self {
        match self {
            FailureKind::Connect(text) => FailureKind::Connect(f(&text)),
            FailureKind::ConnectTimeout(text) => FailureKind::ConnectTimeout(f(&text)),
            FailureKind::Tls(text) => FailureKind::Tls(f(&text)),
            FailureKind::Io(text) => FailureKind::Io(f(&text)),
            FailureKind::ErrorChunk(text) => FailureKind::ErrorChunk(f(&text)),
            FailureKind::Protocol(text) => FailureKind::Protocol(f(&text)),
            FailureKind::InvalidOutput(text) => FailureKind::InvalidOutput(f(&text)),
            FailureKind::Status(mut refusal) => {
                refusal.message = f(&refusal.message);
                FailureKind::Status(refusal)
            }
            other @ (FailureKind::AnswerTooLarge(_)
            | FailureKind::IdleTimeout
            | FailureKind::FirstOutputTimeout
            | FailureKind::EndedEarly
            | FailureKind::Deadline) => other,
        }
    }

    /// Whether the upstream kept silent too long: the one failure after which
    /// asking another upstream first is the better bet (6.1).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            FailureKind::ConnectTimeout(_)
                | FailureKind::IdleTimeout
                | FailureKind::FirstOutputTimeout
        )
    }

    /// What happened, as one word for the attempt's log line (`reason`).
    pub fn reason(&self) -> &'static str {
        match self {
            FailureKind::Connect(_) => "connect",
            FailureKind::ConnectTimeout(_) => "connect_timeout",
            FailureKind::Tls(_) => "tls",
            FailureKind::Io(_) => "broken",
            FailureKind::IdleTimeout => "idle_timeout",
            FailureKind::FirstOutputTimeout => "first_output_timeout",
            FailureKind::EndedEarly => "ended_early",
            FailureKind::Status(_) => "status",
            FailureKind::ErrorChunk(_) => "error_chunk",
            FailureKind::Protocol(_) => "protocol",
            FailureKind::InvalidOutput(_) => "invalid_output",
            FailureKind::AnswerTooLarge(_) => "answer_too_large",
            FailureKind::Deadline => "deadline",
        }
    }

    /// A short description for logs and error messages; never an upstream body.
    pub fn summary(&self) -> String {
        match self {
            FailureKind::Connect(_) => "could not connect to the upstream".into(),
            FailureKind::ConnectTimeout(_) => "connecting to the upstream timed out".into(),
            FailureKind::Tls(_) => "the TLS handshake with the upstream failed".into(),
            FailureKind::IdleTimeout => "the upstream went silent".into(),
            FailureKind::FirstOutputTimeout => "the upstream wrote nothing in time".into(),
            FailureKind::Io(_) => "the upstream connection broke".into(),
            FailureKind::EndedEarly => "the upstream stream ended early".into(),
            FailureKind::Status(refusal) => {
                format!("the upstream answered HTTP {}", refusal.status)
            }
            FailureKind::ErrorChunk(_) => "the upstream stream carried an error".into(),
            FailureKind::Protocol(_) => "the upstream broke the protocol".into(),
            FailureKind::InvalidOutput(_) => "the model's output was unusable".into(),
            FailureKind::AnswerTooLarge(limit) => {
                format!("the answer passed LADLE_MAX_ANSWER_BYTES ({limit} bytes)")
            }
            FailureKind::Deadline => "the deadline passed".into(),
        }
    }

    /// The upstream's own words, for the log line (already free of the key).
    pub fn detail(&self) -> &str {
        match self {
            FailureKind::Connect(text)
            | FailureKind::ConnectTimeout(text)
            | FailureKind::Tls(text)
            | FailureKind::Io(text)
            | FailureKind::ErrorChunk(text)
            | FailureKind::Protocol(text)
            | FailureKind::InvalidOutput(text) => text,
            FailureKind::Status(refusal) => &refusal.message,
            FailureKind::IdleTimeout => "no SSE event within LADLE_IDLE_TIMEOUT_MS",
            FailureKind::FirstOutputTimeout => {
                "no output within LADLE_FIRST_OUTPUT_TIMEOUT_MS of the attempt's start"
            }
            FailureKind::EndedEarly => "the stream ended without [DONE] or a finish_reason",
            FailureKind::AnswerTooLarge(_) => "the answer passed LADLE_MAX_ANSWER_BYTES",
            FailureKind::Deadline => "the request's deadline passed",
        }
    }
}

/// What an upstream's non-2xx answer said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The error JSON's `message`, or else the body's text (for the busy
    /// keywords, the does-not-fit rules and the log line).
    pub message: String,
    /// The error JSON's `code`, when its body is one and has it.
    pub code: Option<String>,
    /// The error JSON's `type`, when its body is one and has it.
    pub kind: Option<String>,
    /// Whether `message` is the error JSON's own (else it is the raw text).
    pub from_json: bool,
}

impl Refusal {
    /// An answer with `status` and only a text to go by.
    pub fn text(status: u16, message: &str) -> Refusal {
        Refusal {
            status,
            message: message.to_owned(),
            ..Refusal::default()
        }
    }

    /// Whether it says the request cannot be served by this upstream's model,
    /// though another might (contract 2, "does-not-fit"): a 413; a 400 or 422 about
    /// the context length or the number of tokens; a 404 about a model that does
    /// not exist.
    pub fn does_not_fit(&self) -> bool {
        let message = self.message.to_lowercase();
        let code_is = |wanted: &str| {
            self.code.as_deref() == Some(wanted) || self.kind.as_deref() == Some(wanted)
        };
        match self.status {
            413 => true,
            400 | 422 => {
                code_is("context_length_exceeded")
                    || [
                        "context length",
                        "maximum context",
                        "too many tokens",
                        "上下文",
                    ]
                    .iter()
                    .any(|words| message.contains(words))
            }
            404 => {
                code_is("model_not_found")
                    || (message.contains("model")
                        && (message.contains("does not exist") || message.contains("not found")))
            }
            _ => false,
        }
    }
}

/// Case-insensitive substrings that mark an upstream error message as "busy".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BusyKeywords(Vec<String>);

impl BusyKeywords {
    /// Keywords from a comma-separated list; blanks are dropped.
    pub fn parse(list: &str) -> Self {
        BusyKeywords(
            list.split(',')
                .map(|k| k.trim().to_lowercase())
                .filter(|k| !k.is_empty())
                .collect(),
        )
    }

    /// Whether `message` contains any keyword, ignoring case.
    pub fn matches(&self, message: &str) -> bool {
        let message = message.to_lowercase();
        self.0.iter().any(|k| message.contains(k.as_str()))
    }
}

#[cfg(test)]
mod tests;
