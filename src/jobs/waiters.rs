//! Long-polls of jobs (`GET /v1/jobs/{id}?wait_ms`, contract 7.1): every reader
//! waiting on one job shares one watch of it. One loop of the runner's reads
//! each watched job once per change it hears of (or once a tick, for a change
//! made on another replica), renders it once, and wakes its waiters only when
//! it changed. Thousands of waiters on one job cost one read per change, not
//! one each every tick; and at most `LADLE_MAX_WAITERS` wait at once.
//!
//! Reads of a finished job share its rendering too: for a second after one read
//! rendered it, every other read of it is answered with the same bytes, without
//! the store (300 reads of a 4 MB result hold one copy, not 300).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Job, JobStore};
use crate::engine::metrics::Metrics;

/// How often the watched jobs are read without news of a change (a change made
/// on another replica is seen within this).
pub const LOOK_EVERY: Duration = Duration::from_millis(100);

/// What a watch has seen of its job.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// Nothing yet (its first read has not come back).
    NotYet,
    /// The job as every answer shows it, rendered once, and whether it is over.
    Now(Bytes, bool),
    /// No such job (any more).
    Gone,
}

impl Seen {
    /// Whether nothing more will change.
    fn over(&self) -> bool {
        matches!(self, Seen::Now(_, true) | Seen::Gone)
    }
}

/// A job id and its client's name.
type Watched = (String, String);

/// How long a finished job's rendering answers other reads of it (its webhook
/// status may change meanwhile; nothing else of a finished job does).
const FRESH: Duration = Duration::from_secs(1);
/// The most bytes of finished jobs' renderings kept at once; a larger one is
/// answered but not kept.
const RECENT_BYTES: usize = 64 << 20;

/// Finished jobs rendered in the last `FRESH`.
#[derive(Default)]
struct Recent {
    views: HashMap<Watched, (Instant, Bytes)>,
    bytes: usize,
}

/// The waiters of this replica.
pub struct Waiters {
    most: usize,
    metrics: Metrics,
    waiting: Arc<AtomicUsize>,
    watches: Mutex<HashMap<Watched, Weak<watch::Sender<Seen>>>>,
    recent: Mutex<Recent>,
}

/// A place among the waiters, given back when dropped.
pub struct Place {
    waiting: Arc<AtomicUsize>,
    metrics: Metrics,
}

impl Drop for Place {
    fn drop(&mut self) {
        let now = self.waiting.fetch_sub(1, Ordering::Relaxed) - 1;
        self.metrics.job_waiters(now);
    }
}

impl Waiters {
    /// At most `most` waiting at once, counted in `ladle_job_waiters`.
    pub fn new(most: usize, metrics: Metrics) -> Waiters {
        Waiters {
            most,
            metrics,
            waiting: Arc::default(),
            watches: Mutex::default(),
            recent: Mutex::default(),
        }
    }

    /// Job `id` of `client` as a read rendered it in the last `FRESH`, if it was
    /// finished then.
    pub fn recent(&self, id: &str, client: &str) -> Option<Bytes> {
        let recent = lock(&self.recent);
        let (at, view) = recent.views.get(&(id.to_owned(), client.to_owned()))?;
        (at.elapsed() < FRESH).then(|| view.clone())
    }

    /// `job` of `client` rendered, and kept for other reads if it is finished.
    pub fn render(&self, job: &Job, client: &str) -> Bytes {
        let view = rendered(job);
        if !job.status.finished() {
            return view;
        }
        let mut recent = lock(&self.recent);
        let Recent { views, bytes } = &mut *recent;
        views.retain(|_, (at, view)| {
            let fresh = at.elapsed() < FRESH;
            if !fresh {
                *bytes -= view.len();
            }
            fresh
        });
        if *bytes + view.len() <= RECENT_BYTES {
            let key = (job.id.clone(), client.to_owned());
            *bytes += view.len();
            if let Some((_, old)) = views.insert(key, (Instant::now(), view.clone())) {
                *bytes -= old.len();
            }
        }
        view
    }

    /// A place to wait, unless `LADLE_MAX_WAITERS` are waiting already.
    pub fn enter(&self) -> Option<Place> {
        let before = self.waiting.fetch_add(1, Ordering::Relaxed);
        let place = Place {
            waiting: self.waiting.clone(),
            metrics: self.metrics.clone(),
        };
        self.metrics.job_waiters(before + 1);
        (before < self.most).then_some(place)
    }

    /// Waits until job `id` of `client` is over, `until` passes or `stopping` is
    /// cancelled; the job as it is then.
    pub async fn wait(
        &self,
        (id, client): (&str, &str),
        until: Instant,
        stopping: &CancellationToken,
    ) -> Seen {
        let watch = self.watch(id, client);
        let mut seen = watch.subscribe();
        tokio::select! {
            _ = seen.wait_for(Seen::over) => {}
            () = tokio::time::sleep_until(until) => {}
            () = stopping.cancelled() => {}
        }
        seen.borrow().clone()
    }

    /// Reads every watched job once and tells its waiters if it changed; the
    /// watches no one waits on, or whose job is over, are let go.
    pub async fn look(&self, store: &dyn JobStore) {
        let watched: Vec<(Watched, Arc<watch::Sender<Seen>>)> = {
            let mut watches = lock(&self.watches);
            watches.retain(|_, watch| watch.strong_count() > 0);
            let live = watches
                .iter()
                .filter_map(|(key, watch)| watch.upgrade().map(|watch| (key.clone(), watch)));
            live.collect()
        };
        for ((id, client), watch) in watched {
            // Unreachable: the waiters keep what was seen last.
            let Ok(found) = store.get(&id, &client).await else {
                continue;
            };
            let seen = found.as_ref().map_or(Seen::Gone, |job| {
                Seen::Now(rendered(job), job.status.finished())
            });
            watch.send_if_modified(|was| {
                let changed = *was != seen;
                *was = seen;
                changed
            });
        }
    }

    /// The job's watch, joined or started.
    fn watch(&self, id: &str, client: &str) -> Arc<watch::Sender<Seen>> {
        let mut watches = lock(&self.watches);
        let key = (id.to_owned(), client.to_owned());
        if let Some(watch) = watches.get(&key).and_then(Weak::upgrade) {
            return watch;
        }
        let watch = Arc::new(watch::Sender::new(Seen::NotYet));
        watches.insert(key, Arc::downgrade(&watch));
        watch
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The job as every answer shows it, as JSON text.
pub fn rendered(job: &Job) -> Bytes {
    // A view is plain fields and values: it always serializes.
    serde_json::to_vec(&job.view()).unwrap_or_default().into()
}
