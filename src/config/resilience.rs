//! The breaker and retry-budget settings (contract 6.2, 6.3).

use super::ConfigError;
use super::settings::{Millis, Sources, invalid};
use crate::engine::breaker::BreakerSettings;
use crate::engine::budget::settings::BudgetSettings;

/// `LADLE_BREAKER`: which upstreams get a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerMode {
    /// One per upstream when two or more are configured.
    Auto,
    /// One per upstream, a single one included.
    On,
    /// None.
    Off,
}

impl BreakerMode {
    /// Whether upstreams get breakers, given how many there are.
    pub fn applies(self, upstreams: usize) -> bool {
        match self {
            BreakerMode::Auto => upstreams >= 2,
            BreakerMode::On => true,
            BreakerMode::Off => false,
        }
    }
}

/// The breaker's mode and settings, and the retry budget's.
pub fn load(
    src: &Sources<'_>,
) -> Result<(BreakerMode, BreakerSettings, BudgetSettings), ConfigError> {
    let mode = match src.get::<String>("LADLE_BREAKER")?.trim() {
        "auto" => BreakerMode::Auto,
        "on" => BreakerMode::On,
        "off" => BreakerMode::Off,
        _ => return Err(invalid("LADLE_BREAKER", "must be auto, on or off")),
    };
    let breaker = BreakerSettings {
        failures: src.get("LADLE_BREAKER_FAILURES")?,
        error_ratio: src.get("LADLE_BREAKER_ERROR_RATIO")?,
        min_attempts: src.get("LADLE_BREAKER_MIN_ATTEMPTS")?,
        window: src.get::<Millis>("LADLE_BREAKER_WINDOW_MS")?.0,
        open_base: src.get::<Millis>("LADLE_BREAKER_OPEN_BASE_MS")?.0,
        open_max: src.get::<Millis>("LADLE_BREAKER_OPEN_MS")?.0,
    };
    if breaker.failures == 0 {
        return Err(invalid("LADLE_BREAKER_FAILURES", "must be at least 1"));
    }
    if !(breaker.error_ratio > 0.0 && breaker.error_ratio <= 1.0) {
        return Err(invalid("LADLE_BREAKER_ERROR_RATIO", "must be in (0, 1]"));
    }
    for (key, value) in [
        ("LADLE_BREAKER_WINDOW_MS", breaker.window),
        ("LADLE_BREAKER_OPEN_BASE_MS", breaker.open_base),
        ("LADLE_BREAKER_OPEN_MS", breaker.open_max),
    ] {
        if value.is_zero() {
            return Err(invalid(key, "must be greater than 0"));
        }
    }
    let budget = BudgetSettings {
        ratio: src.get("LADLE_RETRY_BUDGET_RATIO")?,
        min_per_s: src.get("LADLE_RETRY_BUDGET_MIN_PER_S")?,
        window: src.get::<Millis>("LADLE_RETRY_BUDGET_WINDOW_MS")?.0,
    };
    if !(0.0..=1_000.0).contains(&budget.ratio) {
        return Err(invalid(
            "LADLE_RETRY_BUDGET_RATIO",
            "must be a ratio of 0 or more",
        ));
    }
    if budget.window.is_zero() {
        return Err(invalid(
            "LADLE_RETRY_BUDGET_WINDOW_MS",
            "must be greater than 0",
        ));
    }
    Ok((mode, breaker, budget))
}
