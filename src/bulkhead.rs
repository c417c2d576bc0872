//! Bulkheads (contract 8): at most N at once of one client key's requests, one
//! task's requests, or one upstream's attempts, so that one of them cannot take
//! every slot. A bulkhead is a semaphore by name within its scope (`client`,
//! `task`, `upstream`), its slots counted in `ladle_inflight{scope,name}`; waits
//! and refusals are counted by whoever decides them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ops::metrics::{Metrics, ScopedGauge};

/// The bulkheads of one scope, by name.
pub struct Bulkheads {
    scope: &'static str,
    metrics: Metrics,
    by_name: Mutex<HashMap<String, Bulkhead>>,
}

impl Bulkheads {
    /// No bulkhead yet in `scope`.
    pub fn new(scope: &'static str, metrics: Metrics) -> Bulkheads {
        Bulkheads {
            scope,
            metrics,
            by_name: Mutex::default(),
        }
    }

    /// The bulkhead of `name` with `limit` slots: the same one while the limit
    /// stays, a new one when it changes (slots held in the old one are given back
    /// to it).
    pub fn of(&self, name: &str, limit: u32) -> Bulkhead {
        let mut by_name = self.by_name.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = by_name.get(name).filter(|b| b.limit == limit) {
            return found.clone();
        }
        let bulkhead = Bulkhead {
            limit,
            semaphore: Arc::new(Semaphore::new(limit as usize)),
            gauge: self.metrics.scoped_inflight(self.scope, name),
            scope: self.scope,
            metrics: self.metrics.clone(),
        };
        by_name.insert(name.to_owned(), bulkhead.clone());
        bulkhead
    }
}

/// One bulkhead.
#[derive(Clone)]
pub struct Bulkhead {
    limit: u32,
    semaphore: Arc<Semaphore>,
    gauge: ScopedGauge,
    scope: &'static str,
    metrics: Metrics,
}

impl Bulkhead {
    /// Its `max_inflight`.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// A slot if one is free now.
    pub fn try_enter(&self) -> Option<Slot> {
        let permit = self.semaphore.clone().try_acquire_owned().ok()?;
        Some(self.slot(permit))
    }

    /// A slot, waiting for one (oldest first) if none is free; the wait is
    /// counted in `ladle_limit_waits_total`. The caller bounds the wait.
    pub async fn enter(&self) -> Option<Slot> {
        if let Some(slot) = self.try_enter() {
            return Some(slot);
        }
        self.metrics.limit_wait(self.scope);
        let permit = self.semaphore.clone().acquire_owned().await.ok()?;
        Some(self.slot(permit))
    }

    /// A slot once one is free, uncounted: for a caller that waits on several
    /// bulkheads at once and counts its wait itself.
    pub async fn wait(&self) -> Option<Slot> {
        let permit = self.semaphore.clone().acquire_owned().await.ok()?;
        Some(self.slot(permit))
    }

    /// Counts a request this bulkhead turned away.
    pub fn refused(&self) {
        self.metrics.limit_rejection(self.scope);
    }

    fn slot(&self, permit: OwnedSemaphorePermit) -> Slot {
        self.gauge.add(1.0);
        Slot {
            _permit: permit,
            gauge: self.gauge.clone(),
        }
    }
}

/// A slot of a bulkhead, given back when dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    gauge: ScopedGauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.gauge.add(-1.0);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bulkhead_holds_its_limit_and_a_new_limit_makes_a_new_one() {
        let metrics = Metrics::new();
        let tasks = Bulkheads::new("task", metrics.clone());
        let recipe = tasks.of("recipe", 2);
        let (a, b) = (recipe.try_enter(), recipe.try_enter());
        assert!(a.is_some() && b.is_some());
        assert!(recipe.try_enter().is_none(), "two at once");
        assert!(
            tasks.of("recipe", 2).try_enter().is_none(),
            "the same bulkhead"
        );
        assert!(
            metrics
                .render()
                .contains(r#"ladle_inflight{scope="task",name="recipe"} 2"#)
        );
        drop(a);
        assert!(tasks.of("recipe", 2).try_enter().is_some());
        let wider = tasks.of("recipe", 5);
        let held: Vec<_> = (0..5).filter_map(|_| wider.try_enter()).collect();
        assert_eq!(held.len(), 5, "an edit's new limit holds at once");
    }
}
