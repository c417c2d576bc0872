//! The one family of attempt failures: what happened to an attempt (the upstream
//! client reports its own failures in it too). `classify` turns one into the one
//! classified value that the retry policy, the breaker, metrics, events and logs
//! all read, after linkerd2-proxy's `classify`.

mod classify;

pub use classify::{Classified, Outcome, RetryReason};

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
    /// No connection (refused, unreachable, connect timeout, proxy down).
    Connect(String),
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
    /// A non-2xx status, with the upstream's message (key scrubbed).
    Status {
        /// The HTTP status.
        status: u16,
        /// The error message the upstream gave.
        message: String,
    },
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
            FailureKind::Tls(text) => FailureKind::Tls(f(&text)),
            FailureKind::Io(text) => FailureKind::Io(f(&text)),
            FailureKind::ErrorChunk(text) => FailureKind::ErrorChunk(f(&text)),
            FailureKind::Protocol(text) => FailureKind::Protocol(f(&text)),
            FailureKind::InvalidOutput(text) => FailureKind::InvalidOutput(f(&text)),
            FailureKind::Status { status, message } => FailureKind::Status {
                status,
                message: f(&message),
            },
            other @ (FailureKind::AnswerTooLarge(_)
            | FailureKind::IdleTimeout
            | FailureKind::FirstOutputTimeout
            | FailureKind::EndedEarly
            | FailureKind::Deadline) => other,
        }
    }

    /// What happened, as one word for the attempt's log line (`reason`).
    pub fn reason(&self) -> &'static str {
        match self {
            FailureKind::Connect(_) => "connect",
            FailureKind::Tls(_) => "tls",
            FailureKind::Io(_) => "broken",
            FailureKind::IdleTimeout => "idle_timeout",
            FailureKind::FirstOutputTimeout => "first_output_timeout",
            FailureKind::EndedEarly => "ended_early",
            FailureKind::Status { .. } => "status",
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
            FailureKind::Tls(_) => "the TLS handshake with the upstream failed".into(),
            FailureKind::IdleTimeout => "the upstream went silent".into(),
            FailureKind::FirstOutputTimeout => "the upstream wrote nothing in time".into(),
            FailureKind::Io(_) => "the upstream connection broke".into(),
            FailureKind::EndedEarly => "the upstream stream ended early".into(),
            FailureKind::Status { status, .. } => format!("the upstream answered HTTP {status}"),
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
            | FailureKind::Tls(text)
            | FailureKind::Io(text)
            | FailureKind::ErrorChunk(text)
            | FailureKind::Protocol(text)
            | FailureKind::InvalidOutput(text)
            | FailureKind::Status { message: text, .. } => text,
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
mod tests {
    use super::*;
    use crate::config::DEFAULT_BUSY_KEYWORDS;
    use crate::retry::FailureClass::{self, Busy, Final, NotHere, NotStarted, Other};

    fn class(kind: FailureKind, output_began: bool) -> FailureClass {
        let busy = BusyKeywords::parse(DEFAULT_BUSY_KEYWORDS);
        AttemptFailure::new(kind)
            .classify(output_began, &busy)
            .class
    }

    fn status(status: u16, message: &str) -> FailureKind {
        FailureKind::Status {
            status,
            message: message.into(),
        }
    }

    #[test]
    fn every_row_of_the_contract_failure_table() {
        let table = [
            (status(503, ""), false, Busy),
            (status(429, ""), false, Busy),
            (status(529, ""), false, Busy),
            (FailureKind::Tls("UnknownIssuer".into()), false, NotHere),
            (status(500, "当前模型访问量较大，请稍后重试"), false, Busy),
            (
                FailureKind::ErrorChunk("Model overloaded".into()),
                true,
                Busy,
            ),
            (FailureKind::Connect("refused".into()), false, NotStarted),
            (FailureKind::IdleTimeout, false, NotStarted),
            (FailureKind::Io("reset".into()), false, NotStarted),
            (FailureKind::EndedEarly, false, NotStarted),
            (FailureKind::IdleTimeout, true, Other),
            (FailureKind::FirstOutputTimeout, false, NotStarted),
            (FailureKind::Io("reset".into()), true, Other),
            (FailureKind::EndedEarly, true, Other),
            (status(500, "boom"), false, Other),
            (status(502, ""), false, Other),
            (status(504, ""), false, Other),
            (status(408, ""), false, Other),
            (
                FailureKind::ErrorChunk("content filter".into()),
                false,
                Other,
            ),
            (FailureKind::InvalidOutput("no json".into()), true, Other),
            (status(400, ""), false, Final),
            (status(401, ""), false, Final),
            (status(403, ""), false, Final),
            (status(404, ""), false, Final),
            (status(413, ""), false, Final),
            (status(422, ""), false, Final),
            (FailureKind::Deadline, false, Final),
        ];
        for (kind, output_began, expected) in table {
            assert_eq!(
                class(kind.clone(), output_began),
                expected,
                "{kind:?} output_began={output_began}"
            );
        }
    }

    #[test]
    fn giving_up_maps_each_class_to_its_contract_code() {
        let give_up = |kind: FailureKind, output_began| {
            let failure = AttemptFailure::new(kind);
            let classified = failure.classify(output_began, &BusyKeywords::parse("busy"));
            failure
                .into_error(classified, 2, Duration::from_secs(4))
                .code()
        };
        assert_eq!(give_up(status(503, ""), false), "upstream_busy");
        assert_eq!(give_up(FailureKind::IdleTimeout, false), "upstream_timeout");
        assert_eq!(give_up(FailureKind::IdleTimeout, true), "upstream_failed");
        assert_eq!(give_up(status(401, ""), false), "upstream_rejected");
        assert_eq!(
            give_up(FailureKind::InvalidOutput("x".into()), true),
            "invalid_output"
        );
        assert_eq!(give_up(FailureKind::Deadline, true), "deadline_exceeded");
        assert_eq!(
            give_up(FailureKind::Tls("x".into()), false),
            "upstream_failed"
        );
    }

    #[test]
    fn busy_keywords_match_case_insensitively() {
        let keywords = BusyKeywords::parse("访问量较大, Overloaded ,,rate limit");
        assert!(keywords.matches("当前模型访问量较大，请稍后重试"));
        assert!(keywords.matches("Model OVERLOADED"));
        assert!(keywords.matches("Rate Limit reached"));
        assert!(!keywords.matches("invalid api key"));
    }
}
