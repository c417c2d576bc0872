//! Every error's code, status and retryability, and its rendered body.
use super::*;
use axum::http::header;
use axum::response::IntoResponse;

use crate::engine::failure::{AttemptFailure, BusyKeywords, FailureKind, Refusal};

fn status(status: u16, message: &str) -> FailureKind {
    FailureKind::Status(Box::new(Refusal::text(status, message)))
}

#[test]
fn every_503_and_504_is_retryable_and_carries_the_contract_code() {
    let cases = [
        (
            ApiError::UpstreamBusy {
                retry_after: Duration::from_millis(1500),
            },
            503,
            "upstream_busy",
            true,
        ),
        (
            ApiError::Overloaded {
                retry_after: Duration::from_secs(1),
            },
            503,
            "overloaded",
            true,
        ),
        (ApiError::UpstreamTimeout, 504, "upstream_timeout", true),
        (ApiError::DeadlineExceeded, 504, "deadline_exceeded", true),
        (
            ApiError::UpstreamRejected(Box::new(UpstreamRefusal {
                status: 401,
                ..UpstreamRefusal::default()
            })),
            502,
            "upstream_rejected",
            false,
        ),
        (
            ApiError::UpstreamFailed("reset".into()),
            502,
            "upstream_failed",
            true,
        ),
        (
            ApiError::InvalidOutput("no json".into()),
            502,
            "invalid_output",
            true,
        ),
        (ApiError::BodyTooLarge(10), 413, "body_too_large", false),
        (
            ApiError::UpstreamTls("invalid peer certificate: UnknownIssuer".into()),
            502,
            "upstream_failed",
            false,
        ),
    ];
    for (error, status, code, retryable) in cases {
        assert_eq!(
            (error.status().as_u16(), error.code(), error.retryable()),
            (status, code, retryable)
        );
    }
}

#[test]
fn a_rejection_shows_what_the_upstream_said_and_only_that() {
    let refusal = UpstreamRefusal {
        status: 400,
        code: Some("context_length_exceeded".into()),
        kind: None,
        message: Some("too long".into()),
    };
    let body = ApiError::UpstreamRejected(Box::new(refusal)).body("r");
    assert_eq!(
        body["error"]["upstream"],
        json!({"status": 400, "code": "context_length_exceeded", "message": "too long"})
    );
    assert_eq!(
        body["error"]["message"],
        "upstream rejected the request with HTTP 400"
    );
}

#[test]
fn retry_after_is_at_most_an_hour_and_every_401_says_bearer() {
    let response = ApiError::UpstreamBusy {
        retry_after: Duration::from_secs(99_999_999_999),
    }
    .into_response();
    assert_eq!(response.headers()[header::RETRY_AFTER], "3600");
    let response = ApiError::Unauthorized.into_response();
    assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
}

#[test]
fn busy_responses_round_retry_after_up_to_whole_seconds() {
    let response = ApiError::UpstreamBusy {
        retry_after: Duration::from_millis(1500),
    }
    .into_response();
    assert_eq!(response.headers()[header::RETRY_AFTER], "2");
}

#[test]
fn giving_up_maps_each_class_to_its_contract_code() {
    let give_up = |kind: FailureKind, output_began| {
        let failure = AttemptFailure::new(kind);
        let classified = failure.classify(output_began, &BusyKeywords::parse("busy"));
        let gave_up = crate::engine::completion::GaveUp::Failed {
            failure,
            classified,
            attempts: 2,
            retry_after: Duration::from_secs(4),
        };
        // The engine's own word for its log line is the client's error's code.
        let code = ApiError::from(gave_up.clone()).code();
        assert_eq!(gave_up.code(), code, "{gave_up:?}");
        code
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
fn a_completion_that_gave_up_before_any_attempt_has_its_own_error() {
    use crate::engine::completion::GaveUp;
    let wait = Duration::from_secs(3);
    for (gave_up, code) in [
        (GaveUp::Overloaded { retry_after: wait }, "overloaded"),
        (GaveUp::Deadline, "deadline_exceeded"),
        (GaveUp::AllOpen { retry_after: wait }, "upstream_busy"),
    ] {
        assert_eq!(gave_up.code(), code);
        assert_eq!(ApiError::from(gave_up).code(), code);
    }
}

#[test]
fn every_store_that_is_down_is_a_retryable_503_store_unavailable_whatever_the_cause() {
    use crate::store_down::{Cause, StoreDown};
    let causes = [
        Cause::Unreachable,
        Cause::Redis("connection refused".into()),
        Cause::File("DiskFull".into()),
        Cause::Stopped,
        Cause::Encode("a delivery".into()),
        Cause::EpochMoved,
    ];
    for cause in causes {
        let down = StoreDown::new("submit", cause.clone());
        assert!(
            down.to_string().starts_with("the store could not submit: "),
            "{down}"
        );
        let error = ApiError::from(down);
        assert_eq!(error, ApiError::StoreUnavailable, "{cause:?}");
        assert_eq!(
            (error.status().as_u16(), error.code(), error.retryable()),
            (503, "store_unavailable", true)
        );
    }
}
