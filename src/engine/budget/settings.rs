//! The budget's knobs, a leaf of their own: the configuration that reads them
//! needs nothing else of `budget` (whose fleet half talks to Redis).

use std::time::Duration;

/// The budget's knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetSettings {
    /// Retries may add this share of first attempts …
    pub ratio: f64,
    /// … plus this many per second …
    pub min_per_s: u32,
    /// … both counted over this sliding window.
    pub window: Duration,
}
