//! Every row of the contract's retry tables, under instants built by offsetting a
//! base instant.

use super::*;

const S: Duration = Duration::from_secs(1);

fn contract_defaults() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 5,
        backoff_base: 2 * S,
        backoff_max: 10 * S,
        early_retry_window: 20 * S,
        min_remaining: 30 * S,
        retry_after_output: true,
        jitter: 0.0,
        max_continuations: 2,
        continue_min_remaining: 10 * S,
    }
}

/// Decides for a failure `elapsed` into a request whose deadline is `allowed`
/// after its arrival.
fn decide(policy: RetryPolicy, failed: Failed, elapsed: Duration, allowed: Duration) -> Decision {
    let base = Instant::now();
    policy.decide(failed, base + elapsed, Deadline::after(base, allowed), 0.5)
}

/// A failure whose retry would go back to the same upstream, budget to spare.
fn failed(attempt: u32, class: FailureClass) -> Failed {
    Failed {
        attempt,
        class,
        output_began: false,
        next: Some(again(None)),
        budget_has_room: true,
        stayed: true,
    }
}

/// The upstream that failed, asked again (it sent `retry_after`, if any).
fn again(retry_after: Option<Duration>) -> NextUpstream {
    NextUpstream {
        untried: false,
        retry_after,
    }
}

fn wait(wait: Duration) -> Decision {
    Decision::Retry { wait }
}

const NOW: Decision = Decision::Retry {
    wait: Duration::ZERO,
};

fn gave_up(why: GiveUp) -> Decision {
    Decision::GiveUp(why)
}

#[test]
fn a_fallback_is_made_at_once_but_only_with_min_remaining_left() {
    let fallback = Failed {
        next: Some(NextUpstream {
            untried: true,
            retry_after: Some(60 * S),
        }),
        budget_has_room: false,
        ..failed(1, FailureClass::Busy)
    };
    let policy = contract_defaults();
    assert_eq!(
        decide(policy, fallback, 10 * S, 120 * S),
        NOW,
        "a fallback needs no budget"
    );
    // 25 s left: less than the 30 s to keep, even with no wait.
    assert_eq!(
        decide(policy, fallback, 95 * S, 120 * S),
        gave_up(GiveUp::OutOfTime)
    );
    let last = Failed {
        attempt: 5,
        ..fallback
    };
    assert_eq!(
        decide(policy, last, 10 * S, 120 * S),
        gave_up(GiveUp::OutOfAttempts),
        "MAX_ATTEMPTS counts all"
    );
}

#[test]
fn a_retry_to_an_upstream_called_before_needs_its_budget() {
    let policy = contract_defaults();
    let spent = Failed {
        budget_has_room: false,
        ..failed(1, FailureClass::Busy)
    };
    assert_eq!(
        decide(policy, spent, S, 120 * S),
        gave_up(GiveUp::Throttled)
    );
    let other = Failed {
        budget_has_room: false,
        ..failed(1, FailureClass::Other)
    };
    assert_eq!(
        decide(policy, other, S, 120 * S),
        gave_up(GiveUp::Throttled)
    );
}

#[test]
fn no_usable_upstream_ends_the_request() {
    let nowhere = Failed {
        next: None,
        ..failed(1, FailureClass::Busy)
    };
    assert_eq!(
        decide(contract_defaults(), nowhere, S, 120 * S),
        gave_up(GiveUp::NoUpstream)
    );
}

#[test]
fn an_untrusted_upstream_is_left_for_an_untried_one_at_once_only() {
    let policy = contract_defaults();
    let tls = failed(1, FailureClass::NotHere);
    assert_eq!(decide(policy, tls, S, 120 * S), gave_up(GiveUp::Final));
    let elsewhere = Failed {
        next: Some(NextUpstream {
            untried: true,
            retry_after: None,
        }),
        ..tls
    };
    // No min-remaining rule: nothing was waited for.
    assert_eq!(decide(policy, elsewhere, 100 * S, 120 * S), NOW);
    assert_eq!(
        decide(policy, elsewhere, 121 * S, 120 * S),
        gave_up(GiveUp::OutOfTime)
    );
}

#[test]
fn backoff_follows_the_contract_sequence() {
    let policy = contract_defaults();
    let waits: Vec<u64> = (1..=6).map(|k| policy.backoff(k).as_secs()).collect();
    assert_eq!(waits, [2, 4, 8, 10, 10, 10]);
    assert_eq!(
        policy.backoff(u32::MAX),
        10 * S,
        "huge attempts must not overflow"
    );
}

#[test]
fn busy_and_not_started_wait_for_the_backoff() {
    let table = [
        (1, FailureClass::Busy, wait(2 * S)),
        (2, FailureClass::Busy, wait(4 * S)),
        (3, FailureClass::NotStarted, wait(8 * S)),
        (4, FailureClass::NotStarted, wait(10 * S)),
        (5, FailureClass::Busy, gave_up(GiveUp::OutOfAttempts)),
    ];
    for (attempt, class, expected) in table {
        let got = decide(contract_defaults(), failed(attempt, class), 5 * S, 120 * S);
        assert_eq!(got, expected, "attempt {attempt} {class:?}");
    }
}

#[test]
fn busy_retry_gives_up_when_the_wait_would_leave_too_little_time() {
    // 120 s deadline, 85 s gone, 2 s wait: 33 s left ≥ 30 s → wait.
    let ok = decide(
        contract_defaults(),
        failed(1, FailureClass::Busy),
        85 * S,
        120 * S,
    );
    assert_eq!(ok, wait(2 * S));
    // 89 s gone: 29 s left after the wait < 30 s → give up now.
    let late = decide(
        contract_defaults(),
        failed(1, FailureClass::Busy),
        89 * S,
        120 * S,
    );
    assert_eq!(late, gave_up(GiveUp::OutOfTime));
    // Exactly the minimum left is still enough.
    let edge = decide(
        contract_defaults(),
        failed(1, FailureClass::Busy),
        88 * S,
        120 * S,
    );
    assert_eq!(edge, wait(2 * S));
}

#[test]
fn retry_after_longer_than_the_backoff_is_honoured_and_counted_against_the_deadline() {
    let mut busy = failed(1, FailureClass::Busy);
    busy.next = Some(again(Some(7 * S)));
    assert_eq!(decide(contract_defaults(), busy, S, 120 * S), wait(7 * S));
    busy.next = Some(again(Some(100 * S)));
    assert_eq!(
        decide(contract_defaults(), busy, S, 120 * S),
        gave_up(GiveUp::OutOfTime)
    );
    busy.next = Some(again(Some(S)));
    assert_eq!(decide(contract_defaults(), busy, S, 120 * S), wait(2 * S));
}

#[test]
fn other_failures_are_retried_once_and_only_early() {
    let table = [
        (1, 5 * S, NOW),
        (1, 20 * S, NOW),
        (1, 21 * S, gave_up(GiveUp::NotEarly)),
        (2, 5 * S, gave_up(GiveUp::NotEarly)),
    ];
    for (attempt, elapsed, expected) in table {
        let got = decide(
            contract_defaults(),
            failed(attempt, FailureClass::Other),
            elapsed,
            120 * S,
        );
        assert_eq!(got, expected, "attempt {attempt} at {elapsed:?}");
    }
}

mod continuation;

#[test]
fn an_untried_upstream_gets_the_early_retry_that_same_upstream_attempts_did_not_use() {
    let untried = NextUpstream {
        untried: true,
        retry_after: None,
    };
    // 6.1 as amended: the primary (`attempts: 2`) failed twice, the fallback is new.
    let second_on_primary = Failed {
        next: Some(untried),
        ..failed(2, FailureClass::Other)
    };
    let policy = contract_defaults();
    assert_eq!(decide(policy, second_on_primary, 5 * S, 120 * S), NOW);
    assert_eq!(
        decide(policy, second_on_primary, 21 * S, 120 * S),
        gave_up(GiveUp::NotEarly),
        "early only"
    );
    // Once the request has moved (the default `attempts: 1`), as before.
    let moved = Failed {
        stayed: false,
        ..second_on_primary
    };
    assert_eq!(
        decide(policy, moved, 5 * S, 120 * S),
        gave_up(GiveUp::NotEarly)
    );
    let back_to_a_tried_one = Failed {
        next: Some(again(None)),
        ..second_on_primary
    };
    assert_eq!(
        decide(policy, back_to_a_tried_one, 5 * S, 120 * S),
        gave_up(GiveUp::NotEarly)
    );
}

#[test]
fn final_failures_and_a_passed_deadline_are_never_retried() {
    let policy = contract_defaults();
    assert_eq!(
        decide(policy, failed(1, FailureClass::Final), S, 120 * S),
        gave_up(GiveUp::Final)
    );
    let busy_after_deadline = decide(policy, failed(1, FailureClass::Busy), 121 * S, 120 * S);
    assert_eq!(busy_after_deadline, gave_up(GiveUp::OutOfTime));
}

#[test]
fn a_committed_stream_never_retries_after_output() {
    let policy = RetryPolicy {
        retry_after_output: false,
        ..contract_defaults()
    };
    let mut broke = failed(1, FailureClass::Other);
    broke.output_began = true;
    assert_eq!(
        decide(policy, broke, S, 120 * S),
        gave_up(GiveUp::AfterOutput)
    );
    broke.output_began = false;
    assert_eq!(decide(policy, broke, S, 120 * S), NOW);
}

#[test]
fn jitter_spreads_a_back_off_but_retry_after_stays_a_floor() {
    let policy = RetryPolicy {
        jitter: 0.5,
        ..contract_defaults()
    };
    let decided = |draw, retry_after: Option<Duration>| {
        let base = Instant::now();
        let busy = Failed {
            next: Some(again(retry_after)),
            ..failed(2, FailureClass::Busy)
        };
        policy.decide(busy, base, Deadline::after(base, 120 * S), draw)
    };
    // Attempt 2: 4 s × [0.5, 1.5].
    assert_eq!(decided(0.0, None), wait(2 * S));
    assert_eq!(decided(0.5, None), wait(4 * S));
    assert_eq!(decided(0.75, None), wait(5 * S));
    assert_eq!(decided(0.0, Some(3 * S)), wait(3 * S));
    let exact = contract_defaults();
    assert_eq!(
        exact.jittered_backoff(3, 0.99),
        8 * S,
        "j = 0 keeps 2/4/8/10"
    );
}

#[test]
fn the_min_remaining_rule_judges_the_jittered_wait() {
    // 45 s left after the failure; 30 s must stay. Attempt 4's 8 s × 1.5 = 12 s
    // leaves 33 s: retry. × 2 (j = 1, draw near 1) = 16 s leaves 29 s: give up.
    let base = Instant::now();
    let deadline = Deadline::after(base, 120 * S);
    let at = base + 75 * S;
    let with = |jitter, draw| {
        let policy = RetryPolicy {
            jitter,
            ..contract_defaults()
        };
        policy.decide(failed(3, FailureClass::Busy), at, deadline, draw)
    };
    assert_eq!(with(0.5, 1.0), wait(12 * S));
    assert_eq!(with(1.0, 1.0), gave_up(GiveUp::OutOfTime));
}

proptest::proptest! {
    #![proptest_config(crate::test_support::proptest_config(256))]

    #[test]
    fn backoff_never_decreases_and_never_exceeds_the_cap(
        base_ms in 1u64..5_000, cap_ms in 1u64..60_000, attempt in 1u32..100,
    ) {
        let policy = RetryPolicy {
            backoff_base: Duration::from_millis(base_ms),
            backoff_max: Duration::from_millis(cap_ms),
            ..contract_defaults()
        };
        proptest::prop_assert!(policy.backoff(attempt + 1) >= policy.backoff(attempt));
        proptest::prop_assert!(policy.backoff(attempt) <= Duration::from_millis(cap_ms));
    }

    #[test]
    fn a_jittered_back_off_stays_within_its_band(
        jitter in 0.0f64..=1.0, draw in 0.0f64..1.0, attempt in 1u32..10,
    ) {
        let policy = RetryPolicy { jitter, ..contract_defaults() };
        let plain = policy.backoff(attempt).as_secs_f64();
        let jittered = policy.jittered_backoff(attempt, draw).as_secs_f64();
        proptest::prop_assert!(jittered >= plain * (1.0 - jitter) - 1e-6);
        proptest::prop_assert!(jittered <= plain * (1.0 + jitter) + 1e-6);
    }
}
