//! Every transition of contract 6.2, under instants offset from a base.

use super::*;

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

fn settings() -> BreakerSettings {
    BreakerSettings {
        failures: 5,
        error_ratio: 0.5,
        min_attempts: 20,
        window: 30 * S,
        open_base: 30 * S,
        open_max: 30 * S,
    }
}

/// A failure that was no timeout.
const FAILED: Counted = Counted::Failure { timed_out: false };
/// A failure by a timeout.
const TIMED_OUT: Counted = Counted::Failure { timed_out: true };

fn opened(transition: Option<Transition>) -> bool {
    transition.is_some_and(|t| t.to == State::Open)
}

#[test]
fn five_failures_in_a_row_open_it_and_a_success_resets_the_run() {
    let t0 = Instant::now();
    let mut breaker = Breaker::new(settings(), t0);
    for _ in 0..4 {
        assert!(!opened(breaker.record(FAILED, false, t0)));
    }
    assert_eq!(breaker.record(Counted::Success, false, t0), None);
    for i in 0..4 {
        assert!(!opened(breaker.record(FAILED, false, t0)), "failure {i}");
    }
    assert!(opened(breaker.record(FAILED, false, t0)));
    assert_eq!(breaker.usable(t0), (false, None));
}

#[test]
fn the_failed_share_opens_it_once_enough_attempts_are_in_the_window() {
    let t0 = Instant::now();
    let mut breaker = Breaker::new(settings(), t0);
    // Alternate success and failure: never 5 in a row, a share of one half.
    let mut last = None;
    for i in 0..20 {
        let counted = if i % 2 == 0 { Counted::Success } else { FAILED };
        last = breaker.record(counted, false, t0 + u32::try_from(i).unwrap_or(0) * MS);
        if i < 19 {
            assert!(!opened(last), "opened after {} attempts", i + 1);
        }
    }
    assert!(opened(last), "20 attempts, half failed");
}

#[test]
fn attempts_older_than_the_window_do_not_count() {
    let t0 = Instant::now();
    let mut breaker = Breaker::new(settings(), t0);
    for i in 0..19 {
        let counted = if i % 2 == 0 { FAILED } else { Counted::Success };
        breaker.record(counted, false, t0);
    }
    // 40 s later the 19 are out of the 30 s window: one more failure is 1 of 1.
    assert!(!opened(breaker.record(FAILED, false, t0 + 40 * S)));
}

#[test]
fn neutral_outcomes_count_neither_way() {
    let t0 = Instant::now();
    let mut breaker = Breaker::new(settings(), t0);
    for _ in 0..4 {
        breaker.record(FAILED, false, t0);
    }
    for _ in 0..10 {
        assert_eq!(breaker.record(Counted::Neither, false, t0), None);
    }
    assert!(
        opened(breaker.record(FAILED, false, t0)),
        "still 5 in a row"
    );
}

/// A breaker opened at `t0`.
fn open_at(t0: Instant) -> Breaker {
    let mut breaker = Breaker::new(settings(), t0);
    for _ in 0..5 {
        breaker.record(FAILED, false, t0);
    }
    breaker
}

#[test]
fn open_half_opens_after_its_time_with_exactly_one_probe() {
    let t0 = Instant::now();
    let mut breaker = open_at(t0);
    assert_eq!(breaker.opens_again_in(t0 + 10 * S), 20 * S);
    assert_eq!(breaker.admit(t0 + 29 * S).0, Admission::Refused);
    let (admission, moved) = breaker.admit(t0 + 30 * S);
    assert_eq!(admission, Admission::Probe);
    assert_eq!(
        moved.map(|t| (t.from, t.to)),
        Some((State::Open, State::HalfOpen))
    );
    assert_eq!(
        breaker.admit(t0 + 30 * S).0,
        Admission::Refused,
        "one probe"
    );
    assert_eq!(
        breaker.usable(t0 + 31 * S),
        (false, None),
        "not usable meanwhile"
    );
}

#[test]
fn the_probe_decides_closed_or_open_again_and_a_neutral_probe_leaves_it_half_open() {
    let t0 = Instant::now();
    let later = t0 + 30 * S;
    let mut breaker = open_at(t0);
    assert_eq!(breaker.admit(later).0, Admission::Probe);
    let closed = breaker.record(Counted::Success, true, later);
    assert_eq!(closed.map(|t| t.to), Some(State::Closed));
    assert_eq!(breaker.admit(later).0, Admission::Pass);
    // Counts were cleared: four failures do not open it.
    for _ in 0..4 {
        assert!(!opened(breaker.record(FAILED, false, later)));
    }

    let mut breaker = open_at(t0);
    assert_eq!(breaker.admit(later).0, Admission::Probe);
    assert!(opened(breaker.record(FAILED, true, later)));
    assert_eq!(
        breaker.opens_again_in(later),
        30 * S,
        "open for a whole period again"
    );

    let mut breaker = open_at(t0);
    assert_eq!(breaker.admit(later).0, Admission::Probe);
    assert_eq!(breaker.record(Counted::Neither, true, later), None);
    assert_eq!(breaker.state(later).0, State::HalfOpen);
    assert_eq!(
        breaker.admit(later).0,
        Admission::Probe,
        "the next attempt probes"
    );
}

#[test]
fn attempts_that_end_while_it_is_open_change_nothing() {
    let t0 = Instant::now();
    let mut breaker = open_at(t0);
    assert_eq!(breaker.record(Counted::Success, false, t0 + S), None);
    assert_eq!(breaker.state(t0 + S).0, State::Open);
}

/// A breaker with the contract's defaults: open 5 s at first, at most 30 s.
fn growing() -> BreakerSettings {
    BreakerSettings {
        open_base: 5 * S,
        open_max: 30 * S,
        ..settings()
    }
}

/// Opens `breaker` at `at` (five failures in a row) and returns its open time.
fn open_time(breaker: &mut Breaker, at: Instant) -> Duration {
    for _ in 0..5 {
        breaker.record(FAILED, false, at);
    }
    breaker.opens_again_in(at)
}

/// Lets the probe of an opened breaker fail as `how` when its open time is up;
/// returns when that was and the next open time.
fn probe_fails(breaker: &mut Breaker, now: Instant, how: Counted) -> (Instant, Duration) {
    let at = now + breaker.opens_again_in(now);
    assert_eq!(breaker.admit(at).0, Admission::Probe);
    breaker.record(how, true, at);
    (at, breaker.opens_again_in(at))
}

#[test]
fn the_first_opening_lasts_the_base_and_fast_failing_probes_keep_it() {
    let t0 = Instant::now();
    let mut breaker = Breaker::new(growing(), t0);
    assert_eq!(open_time(&mut breaker, t0), 5 * S);
    let (at, next) = probe_fails(&mut breaker, t0, FAILED);
    assert_eq!(
        next,
        5 * S,
        "a busy or refused probe costs nothing: the same time"
    );
    let (_, next) = probe_fails(&mut breaker, at, FAILED);
    assert_eq!(next, 5 * S);
}

#[test]
fn probes_that_time_out_double_the_opening_up_to_the_cap_and_a_close_resets_it() {
    let t0 = Instant::now();
    let mut breaker = Breaker::new(growing(), t0);
    open_time(&mut breaker, t0);
    let mut now = t0;
    let mut times = Vec::new();
    for _ in 0..4 {
        let (at, next) = probe_fails(&mut breaker, now, TIMED_OUT);
        times.push(next.as_secs());
        now = at;
    }
    assert_eq!(
        times,
        [10, 20, 30, 30],
        "doubled, capped at LADLE_BREAKER_OPEN_MS"
    );
    let (at, next) = probe_fails(&mut breaker, now, FAILED);
    assert_eq!(next, 30 * S, "a fast failure keeps the grown time");
    let probe_at = at + next;
    assert_eq!(breaker.admit(probe_at).0, Admission::Probe);
    breaker.record(Counted::Success, true, probe_at);
    assert_eq!(
        open_time(&mut breaker, probe_at),
        5 * S,
        "closing resets it to the base"
    );
}

#[test]
fn a_base_above_the_cap_opens_for_the_cap() {
    let t0 = Instant::now();
    let settings = BreakerSettings {
        open_base: 60 * S,
        open_max: 30 * S,
        ..settings()
    };
    assert_eq!(open_time(&mut Breaker::new(settings, t0), t0), 30 * S);
}
