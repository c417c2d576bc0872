//! Contract 11.4's rules, one row each: when a cut is continued, where its
//! waits come from, and when a continuing request stops.

use super::*;

/// A cut the policy may continue: attempt `attempt` wrote content, then failed
/// as `class`; a continuation would go back to the same upstream.
fn cut(attempt: u32, class: FailureClass) -> (Failed, Cut) {
    let failed = Failed {
        output_began: true,
        ..failed(attempt, class)
    };
    let cut = Cut {
        wrote_content: true,
        was_continuation: false,
        refused: false,
        continued: 0,
        next: Some(again(None)),
        budget_has_room: true,
    };
    (failed, cut)
}

fn decide_cut(
    policy: RetryPolicy,
    (failed, cut): (Failed, Cut),
    elapsed: Duration,
) -> Option<Decision> {
    let base = Instant::now();
    let deadline = Deadline::after(base, 120 * S);
    policy.decide_cut(failed, cut, base + elapsed, deadline, 0.5)
}

const AT_ONCE: Option<Decision> = Some(Decision::Continue {
    wait: Duration::ZERO,
});

#[test]
fn a_cut_after_content_is_continued_at_once_and_a_busy_one_after_the_back_off() {
    let policy = contract_defaults();
    assert_eq!(
        decide_cut(policy, cut(1, FailureClass::Other), 70 * S),
        AT_ONCE
    );
    assert_eq!(
        decide_cut(policy, cut(2, FailureClass::Busy), 70 * S),
        Some(Decision::Continue { wait: 4 * S }),
        "backoff(2)"
    );
    let (failed, mut to_fallback) = cut(2, FailureClass::Busy);
    to_fallback.next = Some(NextUpstream {
        untried: true,
        retry_after: None,
    });
    to_fallback.budget_has_room = false;
    assert_eq!(
        decide_cut(policy, (failed, to_fallback), 70 * S),
        AT_ONCE,
        "an untried upstream: at once, and no budget needed"
    );
}

#[test]
fn reasoning_only_or_a_first_cut_that_cannot_be_continued_is_section_twos() {
    let policy = contract_defaults();
    let (failed, mut reasoning) = cut(1, FailureClass::Other);
    reasoning.wrote_content = false;
    assert_eq!(decide_cut(policy, (failed, reasoning), 70 * S), None);
    let (failed, mut nowhere) = cut(1, FailureClass::Other);
    nowhere.next = None;
    assert_eq!(decide_cut(policy, (failed, nowhere), 70 * S), None);
    assert_eq!(
        decide_cut(policy, cut(1, FailureClass::Other), 111 * S),
        None,
        "9 s left: less than CONTINUE_MIN_REMAINING_MS"
    );
    assert_eq!(
        decide_cut(policy, cut(5, FailureClass::Other), 70 * S),
        None
    );
    let never = RetryPolicy {
        max_continuations: 0,
        ..policy
    };
    assert_eq!(decide_cut(never, cut(1, FailureClass::Other), 70 * S), None);
    let (final_failure, cut_4xx) = cut(1, FailureClass::Final);
    assert_eq!(decide_cut(policy, (final_failure, cut_4xx), 70 * S), None);
}

#[test]
fn max_continuations_counts_cuts_and_then_a_continuing_request_stops() {
    let policy = contract_defaults();
    let (failed, mut again_cut) = cut(3, FailureClass::Other);
    again_cut.was_continuation = true;
    again_cut.continued = 1;
    assert_eq!(decide_cut(policy, (failed, again_cut), 80 * S), AT_ONCE);
    again_cut.continued = 2;
    assert_eq!(
        decide_cut(policy, (failed, again_cut), 80 * S),
        Some(Decision::GiveUp(GiveUp::OutOfAttempts))
    );
}

#[test]
fn a_continuation_that_fails_before_its_own_content() {
    let policy = contract_defaults();
    let before = |class| {
        let (failed, mut cut) = cut(2, class);
        cut.wrote_content = false;
        cut.was_continuation = true;
        cut.continued = 1;
        (
            Failed {
                output_began: false,
                ..failed
            },
            cut,
        )
    };
    assert_eq!(
        decide_cut(policy, before(FailureClass::Busy), 70 * S),
        Some(Decision::Continue { wait: 4 * S }),
        "busy: backed off, and a continuation again"
    );
    assert_eq!(
        decide_cut(policy, before(FailureClass::NotStarted), 70 * S),
        Some(Decision::Continue { wait: 4 * S })
    );
    assert_eq!(
        decide_cut(policy, before(FailureClass::Busy), 107 * S),
        Some(Decision::GiveUp(GiveUp::OutOfTime)),
        "the wait would leave less than CONTINUE_MIN_REMAINING_MS"
    );
    assert_eq!(
        decide_cut(policy, before(FailureClass::Other), 70 * S),
        Some(Decision::GiveUp(GiveUp::Final)),
        "an other failure before its output ends the request"
    );
    let (failed, mut refused) = before(FailureClass::Final);
    assert_eq!(
        decide_cut(policy, (failed, refused), 70 * S),
        Some(Decision::GiveUp(GiveUp::Final)),
        "a final failure that is no refusal (the deadline, say)"
    );
    refused.refused = true;
    refused.next = Some(NextUpstream {
        untried: true,
        retry_after: None,
    });
    assert_eq!(
        decide_cut(policy, (failed, refused), 70 * S),
        AT_ONCE,
        "rejected: the next upstream that continues, at once"
    );
    refused.next = None;
    assert_eq!(
        decide_cut(policy, (failed, refused), 70 * S),
        Some(Decision::GiveUp(GiveUp::NoUpstream))
    );
}

#[test]
fn a_continuation_to_an_upstream_called_before_needs_its_budget() {
    let (failed, mut cut) = cut(1, FailureClass::Other);
    cut.budget_has_room = false;
    assert_eq!(
        decide_cut(contract_defaults(), (failed, cut), 70 * S),
        Some(Decision::GiveUp(GiveUp::Throttled))
    );
}

#[test]
fn a_passed_deadline_is_never_continued() {
    assert_eq!(
        decide_cut(contract_defaults(), cut(1, FailureClass::Other), 121 * S),
        Some(Decision::GiveUp(GiveUp::OutOfTime))
    );
}
