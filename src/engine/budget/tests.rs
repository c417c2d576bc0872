//! The budget's arithmetic, under instants offset from a base.

use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::*;

/// A retry if it fits, as the attempt loop makes one.
pub(crate) fn try_retry(budget: &mut impl Budget, now: Instant) -> bool {
    let room = budget.has_room(now);
    if room {
        budget.withdraw(now);
    }
    room
}

const S: Duration = Duration::from_secs(1);

/// Budget knobs over a 10 s window.
pub(crate) fn settings(ratio: f64, min_per_s: u32) -> BudgetSettings {
    BudgetSettings {
        ratio,
        min_per_s,
        window: 10 * S,
    }
}

#[test]
fn retries_may_add_the_ratio_of_first_attempts_plus_the_floor() {
    let t0 = Instant::now();
    let mut budget = RetryBudget::new(settings(0.2, 1));
    for _ in 0..50 {
        budget.deposit(t0);
    }
    // 0.2 × 50 + 1/s × 10 s = 20.
    let allowed = (0..30).filter(|_| try_retry(&mut budget, t0)).count();
    assert_eq!(allowed, 20);
}

#[test]
fn a_lone_caller_never_runs_out_with_the_defaults() {
    let t0 = Instant::now();
    let mut budget = RetryBudget::new(settings(0.2, 10));
    budget.deposit(t0);
    assert!(
        (0..4).all(|_| try_retry(&mut budget, t0)),
        "MAX_ATTEMPTS = 5: four retries"
    );
}

#[test]
fn the_window_slides() {
    let t0 = Instant::now();
    let mut budget = RetryBudget::new(settings(0.0, 1));
    assert!((0..10).all(|_| try_retry(&mut budget, t0)));
    assert!(
        !try_retry(&mut budget, t0 + 5 * S),
        "ten in the window already"
    );
    assert!(
        try_retry(&mut budget, t0 + 10 * S),
        "the first ten are out of it"
    );
}

proptest! {
    #![proptest_config(crate::test_support::proptest_config(256))]

    /// However first attempts and retries interleave within one window, the
    /// retries let through never exceed ratio × first attempts + the floor.
    #[test]
    fn retries_within_a_window_stay_within_the_budget(
        steps in proptest::collection::vec(any::<bool>(), 0..300),
        ratio in 0.0f64..1.0,
        min_per_s in 0u32..3,
    ) {
        let t0 = Instant::now();
        let mut budget = RetryBudget::new(settings(ratio, min_per_s));
        let (mut firsts, mut retries) = (0u32, 0u32);
        for (i, first) in steps.iter().enumerate() {
            let now = t0 + Duration::from_millis(i as u64);
            if *first {
                budget.deposit(now);
                firsts += 1;
            } else if try_retry(&mut budget, now) {
                retries += 1;
            }
            let allowed = ratio * f64::from(firsts) + f64::from(min_per_s) * 10.0;
            prop_assert!(f64::from(retries) <= allowed + 1e-9);
        }
    }
}
