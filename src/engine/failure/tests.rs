//! The contract's failure table, row by row, and what each class gives up as.

use super::*;
use crate::config::DEFAULT_BUSY_KEYWORDS;
use crate::engine::breaker::Counted;
use crate::engine::retry::FailureClass::{self, Busy, Final, NotHere, NotStarted, Other};

fn class(kind: FailureKind, output_began: bool) -> FailureClass {
    let busy = BusyKeywords::parse(DEFAULT_BUSY_KEYWORDS);
    AttemptFailure::new(kind)
        .classify(output_began, &busy)
        .class
}

fn status(status: u16, message: &str) -> FailureKind {
    FailureKind::Status(Box::new(Refusal::text(status, message)))
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
        (status(413, ""), false, NotHere),
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

fn refused(status: u16, code: Option<&str>, kind: Option<&str>, message: &str) -> Refusal {
    Refusal {
        status,
        message: message.into(),
        code: code.map(Into::into),
        kind: kind.map(Into::into),
        from_json: true,
    }
}

#[test]
fn every_does_not_fit_form_moves_on_and_other_4xx_stay_final() {
    let fits_not = [
        refused(413, None, None, "payload too large"),
        refused(400, Some("context_length_exceeded"), None, "nope"),
        refused(422, None, Some("context_length_exceeded"), "nope"),
        refused(
            400,
            None,
            None,
            "This model's maximum context length is 8192 tokens",
        ),
        refused(400, None, None, "Too many tokens in the request"),
        refused(400, None, None, "输入超过模型上下文长度"),
        refused(404, Some("model_not_found"), None, "x"),
        refused(404, None, None, "The model `gpt-9` does not exist"),
        refused(404, None, None, "model not found"),
    ];
    for refusal in fits_not {
        assert!(refusal.does_not_fit(), "{refusal:?}");
        let classified = AttemptFailure::new(FailureKind::Status(Box::new(refusal)))
            .classify(false, &BusyKeywords::parse(DEFAULT_BUSY_KEYWORDS));
        assert_eq!(
            (
                classified.class,
                classified.outcome,
                classified.counted,
                classified.reason
            ),
            (
                NotHere,
                Outcome::Rejected,
                Counted::Neither,
                RetryReason::Rejected
            )
        );
    }
    let final_everywhere = [
        refused(
            400,
            Some("content_filter"),
            None,
            "The response was filtered",
        ),
        refused(401, None, None, "bad key"),
        refused(404, None, None, "no such route"),
        refused(400, None, None, "messages must be an array"),
    ];
    for refusal in final_everywhere {
        assert!(!refusal.does_not_fit(), "{refusal:?}");
        assert_eq!(class(FailureKind::Status(Box::new(refusal)), false), Final);
    }
}

#[test]
fn a_tls_failure_moves_on_but_counts_as_a_failure_and_timeouts_are_marked() {
    let busy = BusyKeywords::parse(DEFAULT_BUSY_KEYWORDS);
    let tls = AttemptFailure::new(FailureKind::Tls("x".into())).classify(false, &busy);
    assert_eq!(
        (tls.class, tls.outcome, tls.counted, tls.reason),
        (
            NotHere,
            Outcome::Failed,
            Counted::Failure { timed_out: false },
            RetryReason::Failed
        )
    );
    for (kind, timed_out) in [
        (FailureKind::ConnectTimeout("t".into()), true),
        (FailureKind::IdleTimeout, true),
        (FailureKind::FirstOutputTimeout, true),
        (FailureKind::Connect("refused".into()), false),
        (FailureKind::Io("reset".into()), false),
        (status(503, ""), false),
    ] {
        let counted = AttemptFailure::new(kind.clone())
            .classify(false, &busy)
            .counted;
        assert_eq!(counted, Counted::Failure { timed_out }, "{kind:?}");
    }
}

#[test]
fn busy_keywords_match_case_insensitively() {
    let keywords = BusyKeywords::parse("访问量较大, Overloaded ,,rate limit");
    assert!(keywords.matches("当前模型访问量较大，请稍后重试"));
    assert!(keywords.matches("Model OVERLOADED"));
    assert!(keywords.matches("Rate Limit reached"));
    assert!(!keywords.matches("invalid api key"));
}
