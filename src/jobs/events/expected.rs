//! How long a task's answers usually are: the lower median of the content length
//! (Unicode code points) of its last 20 `200` answers on this replica, which a
//! `progress` event sends as `expected_chars` (contract 11.1) so a phone can show
//! "正在生成 45%".

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// Answers remembered per task.
const WINDOW: usize = 20;

/// Tasks remembered: task names come from prompt files, but a bound costs
/// nothing.
const MOST_TASKS: usize = 1_000;

/// The last answers' lengths, per task.
#[derive(Debug, Default)]
pub struct Expected {
    lengths: Mutex<HashMap<String, VecDeque<u64>>>,
}

impl Expected {
    /// Remembers an answer of `task` with `chars` characters of content.
    pub fn answered(&self, task: &str, chars: u64) {
        let mut lengths = self.lengths.lock().unwrap_or_else(PoisonError::into_inner);
        if !lengths.contains_key(task) && lengths.len() >= MOST_TASKS {
            return;
        }
        let window = lengths.entry(task.to_owned()).or_default();
        if window.len() == WINDOW {
            window.pop_front();
        }
        window.push_back(chars);
    }

    /// The lower median of `task`'s remembered lengths, if it has any.
    pub fn of(&self, task: &str) -> Option<u64> {
        let lengths = self.lengths.lock().unwrap_or_else(PoisonError::into_inner);
        let mut sorted: Vec<u64> = lengths.get(task)?.iter().copied().collect();
        sorted.sort_unstable();
        sorted.get((sorted.len().checked_sub(1)?) / 2).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_median_of_the_last_twenty() {
        let expected = Expected::default();
        assert_eq!(expected.of("recipe"), None);
        expected.answered("recipe", 10);
        assert_eq!(expected.of("recipe"), Some(10));
        expected.answered("recipe", 30);
        assert_eq!(expected.of("recipe"), Some(10), "the lower of two");
        expected.answered("recipe", 20);
        assert_eq!(expected.of("recipe"), Some(20));
        for _ in 0..20 {
            expected.answered("recipe", 1_500);
        }
        assert_eq!(
            expected.of("recipe"),
            Some(1_500),
            "only the last twenty count"
        );
        assert_eq!(expected.of("fridge"), None);
    }
}
