//! Bulkheads (contract 8): at most N at once of one client key's requests, one
//! task's requests, or one upstream's attempts, so that one of them cannot take
//! every slot; and `LADLE_MAX_INFLIGHT`'s global one. A bulkhead is a semaphore by
//! name within its scope (`client`, `task`, `upstream`), its slots counted in
//! `ladle_inflight{scope,name}` (the global one in `ladle_inflight_requests`);
//! waits and refusals are counted by whoever decides them. [`Entry`] is the
//! one way a request or a job's run takes its task's slot and a global one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, timeout_at};

use crate::engine::metrics::{Metrics, ScopedGauge};

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
            gauge: Some(self.metrics.scoped_inflight(self.scope, name)),
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
    /// Its `ladle_inflight{scope,name}` (none for the global one, whose gauge is
    /// `ladle_inflight_requests`).
    gauge: Option<ScopedGauge>,
    scope: &'static str,
    metrics: Metrics,
}

impl Bulkhead {
    /// `LADLE_MAX_INFLIGHT`'s bulkhead: every request's and job run's.
    pub fn global(limit: u32, metrics: Metrics) -> Bulkhead {
        Bulkhead {
            limit,
            semaphore: Arc::new(Semaphore::new(limit as usize)),
            gauge: None,
            scope: "global",
            metrics,
        }
    }

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
        if let Some(gauge) = &self.gauge {
            gauge.add(1.0);
        }
        Slot {
            _permit: permit,
            gauge: self.gauge.clone(),
        }
    }
}

/// A slot of a bulkhead, given back when dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    gauge: Option<ScopedGauge>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(gauge) = &self.gauge {
            gauge.add(-1.0);
        }
    }
}

/// What a request or a job's run holds while it runs: for a task with a
/// `max_inflight`, one of its task's slots, and one of `LADLE_MAX_INFLIGHT`'s.
#[derive(Debug)]
pub struct Slots {
    /// The task's slot.
    pub task: Option<Slot>,
    /// The global slot.
    pub global: Slot,
}

/// Which bulkhead turned a request away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its task's, full until the wait's end (counted as its refusal).
    Task,
    /// The global one, full until the wait's end.
    Global,
    /// The gateway is stopping: no slot will be given.
    Closed,
}

/// The one way in: a request's or a run's slots, taken in one order (its task's,
/// then a global one), so two requests never hold one each of the other's.
#[derive(Clone)]
pub struct Entry {
    /// The task's bulkhead, if its prompt sets `max_inflight`.
    pub task: Option<Bulkhead>,
    /// `LADLE_MAX_INFLIGHT`'s.
    pub global: Bulkhead,
}

impl Entry {
    /// Both slots if both are free now; else the task's slot if it was taken, so
    /// that a wait for the global one keeps it.
    pub fn try_now(&self) -> Result<Slots, Option<Slot>> {
        let task = match &self.task {
            None => None,
            Some(bulkhead) => Some(bulkhead.try_enter().ok_or(None)?),
        };
        match self.global.try_enter() {
            Some(global) => Ok(Slots { task, global }),
            None => Err(task),
        }
    }

    /// The slots, each waited for oldest first, until `until` (`None`: however
    /// long it takes, as a job's run waits); `held` is a task slot taken already.
    pub async fn wait(self, held: Option<Slot>, until: Option<Instant>) -> Result<Slots, Refused> {
        let task = match (held, &self.task) {
            (Some(slot), _) => Some(slot),
            (None, Some(bulkhead)) => match within(until, bulkhead.enter()).await {
                Some(Some(slot)) => Some(slot),
                Some(None) => return Err(Refused::Closed),
                None => {
                    bulkhead.refused();
                    return Err(Refused::Task);
                }
            },
            (None, None) => None,
        };
        match within(until, self.global.wait()).await {
            Some(Some(global)) => Ok(Slots { task, global }),
            Some(None) => Err(Refused::Closed),
            None => Err(Refused::Global),
        }
    }
}

/// `wait`'s answer, or `None` when `until` came first.
async fn within<T>(until: Option<Instant>, wait: impl Future<Output = T>) -> Option<T> {
    match until {
        Some(until) => timeout_at(until, wait).await.ok(),
        None => Some(wait.await),
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

    #[tokio::test(start_paused = true)]
    async fn an_entry_takes_the_task_slot_then_a_global_one_and_says_which_was_full() {
        let metrics = Metrics::new();
        let tasks = Bulkheads::new("task", metrics.clone());
        let entry = Entry {
            task: Some(tasks.of("recipe", 1)),
            global: Bulkhead::global(1, metrics.clone()),
        };
        let Slots { task, global } = entry.try_now().expect("both free");
        assert!(matches!(entry.try_now(), Err(None)), "the task's is full");
        let soon = || Some(Instant::now() + std::time::Duration::from_millis(100));
        let refused = entry.clone().wait(None, soon()).await.err();
        assert_eq!(refused, Some(Refused::Task));
        drop(task);
        let Err(Some(kept)) = entry.try_now() else {
            panic!("the task's slot is taken and kept while the global one is full");
        };
        let refused = entry.clone().wait(Some(kept), soon()).await.err();
        assert_eq!(refused, Some(Refused::Global));
        drop(global);
        assert!(entry.wait(None, None).await.is_ok(), "both free again");
    }
}
