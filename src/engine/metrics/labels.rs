//! Bounds on what clients and upstreams can put into the metrics (contract 10):
//! a label whose values come from requests or upstreams holds the first 100
//! distinct values seen, per metric and label, and counts later ones as `other`;
//! counters fed by upstream numbers saturate instead of wrapping.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use metrics::Key;

/// Distinct values a bounded label holds before `other`.
pub const MOST_VALUES: usize = 100;

/// The values seen so far, by metric and label.
#[derive(Default)]
pub struct Bounded(Mutex<HashMap<(&'static str, &'static str), HashSet<String>>>);

impl Bounded {
    /// `value` if it is among the first `MOST_VALUES` of this metric's label,
    /// else `"other"`.
    pub fn value(&self, metric: &'static str, label: &'static str, value: &str) -> String {
        let mut seen = lock(&self.0);
        let values = seen.entry((metric, label)).or_default();
        if values.contains(value) {
            return value.to_owned();
        }
        if values.len() < MOST_VALUES {
            values.insert(value.to_owned());
            return value.to_owned();
        }
        "other".to_owned()
    }
}

/// What each saturating counter holds.
#[derive(Default)]
pub struct Totals(Mutex<HashMap<Key, u64>>);

impl Totals {
    /// Adds `count` to the counter at `key` as far as it goes before `u64::MAX`;
    /// what was added.
    pub fn add(&self, key: &Key, count: u64) -> u64 {
        let mut totals = lock(&self.0);
        let total = totals.entry(key.clone()).or_default();
        let added = count.min(u64::MAX - *total);
        *total += added;
        added
    }
}

/// A poisoned lock only means another request panicked mid-update.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_holds_its_first_hundred_values_then_other() {
        let bounded = Bounded::default();
        for i in 0..150 {
            let kept = bounded.value("m", "model", &format!("model-{i}"));
            let expected = if i < MOST_VALUES {
                format!("model-{i}")
            } else {
                "other".into()
            };
            assert_eq!(kept, expected);
        }
        assert_eq!(
            bounded.value("m", "model", "model-7"),
            "model-7",
            "a value seen stays"
        );
        assert_eq!(
            bounded.value("n", "model", "model-150"),
            "model-150",
            "per metric"
        );
    }

    #[test]
    fn a_saturating_counter_never_wraps() {
        let totals = Totals::default();
        let key = Key::from_name("ladle_tokens_total");
        assert_eq!(totals.add(&key, u64::MAX - 5), u64::MAX - 5);
        assert_eq!(totals.add(&key, 10), 5);
        assert_eq!(totals.add(&key, 1), 0);
    }
}
