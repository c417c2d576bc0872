//! What a round of the runner looks at besides claiming: the gauges (and the
//! finished jobs past their time, forgotten), and the clients whose runs here
//! are at their key's `max_running`.

use std::collections::HashMap;
use std::time::Duration;

use super::{Shared, lock};
use crate::wall::unix_millis;

/// The clients with `max_running` of their jobs running here: their other jobs
/// wait while other clients' run.
pub(super) fn busy_clients(shared: &Shared) -> Vec<String> {
    let Some(task) = shared.task.get() else {
        return Vec::new();
    };
    let mut runs: HashMap<&str, u32> = HashMap::new();
    let running = lock(&shared.running);
    for held in running.values() {
        *runs.entry(held.client.as_str()).or_default() += 1;
    }
    runs.into_iter()
        .filter(|(client, n)| task.max_running(client).is_some_and(|most| *n >= most))
        .map(|(client, _)| client.to_owned())
        .collect()
}

/// The gauges, and the finished jobs past their time forgotten: whether no job
/// is unfinished anywhere (the store could say).
pub(super) async fn account(shared: &Shared) -> bool {
    let _ = shared
        .store
        .expire(unix_millis(), shared.settings.ttl)
        .await;
    shared.events.upkeep();
    let Ok(counts) = shared.store.counts().await else {
        return false;
    };
    let metrics = &shared.metrics;
    metrics.job_counts(counts.queued, counts.running, counts.retry_wait);
    let age = counts
        .oldest_queued
        .map(|at| unix_millis().saturating_sub(at));
    metrics.job_queue_age(Duration::from_millis(age.unwrap_or(0)));
    if let Some(bytes) = counts.state_bytes {
        metrics.state_file_bytes(bytes);
    }
    if let Some(free) = counts.state_free_bytes {
        metrics.state_free_bytes(free);
    }
    counts.queued + counts.running + counts.retry_wait == 0
}
