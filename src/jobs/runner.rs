//! This replica's runs of jobs: at most `LADLE_JOB_CONCURRENCY` at once, oldest
//! first, each an ordinary task request (`RunTask`, given by the request module),
//! its end judged by `outcome::judge` and written back. Runs are background work
//! of the app's one owner: `SIGTERM` stops new runs and waits for running ones,
//! and queued jobs stay queued for the next start.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::outcome::{RunError, judge};
mod looks;
mod moves;

use self::looks::{account, busy_clients};
use self::moves::{note_finished, note_move};
use super::events::JobEvents;
use super::settings::RunnerSettings;
use super::waiters::{LOOK_EVERY, Place, Seen, Waiters};
use super::{Job, JobStatus, JobStore, Moved};
use crate::background::Background;
use crate::engine::metrics::Metrics;
use crate::wall::unix_millis;

/// How one run of a job is made: the task request, by ladle itself.
pub trait RunTask: Send + Sync {
    /// Runs `job`'s request with `request_id`; its `200` body, or its error.
    fn run(&self, job: &Job, request_id: String) -> BoxFuture<'static, Result<Value, RunError>>;

    /// The most runs of `client`'s jobs at once on this replica (its key's
    /// `max_running`), if it has a limit.
    fn max_running(&self, client: &str) -> Option<u32>;
}

/// A run this replica holds.
struct Held {
    run: u32,
    client: String,
    /// Stops it (a cancel).
    switch: CancellationToken,
}

/// How often an idle replica (no unfinished job anywhere, no run here) looks at
/// the store: a submit here wakes it at once, and one on another replica is
/// seen within this.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// The runner's handle: what the API needs of it.
#[derive(Clone)]
pub struct Runner {
    shared: Arc<Shared>,
}

struct Shared {
    store: Arc<dyn JobStore>,
    /// How runs are made: given when the runner starts (the app it runs through
    /// holds the runner).
    task: std::sync::OnceLock<Arc<dyn RunTask>>,
    settings: RunnerSettings,
    metrics: Metrics,
    slots: Arc<Semaphore>,
    /// This replica's runs, by job id.
    running: Mutex<HashMap<String, Held>>,
    /// Bumped at every change of a job this replica saw: waiters look again.
    changes: watch::Sender<u64>,
    /// Asks the loop to look for work now (a submit).
    wake: tokio::sync::Notify,
    /// Cancelled at the shutdown signal: no run starts after it, while requests
    /// still drain and the background work goes on; waiting reads answer.
    claiming: CancellationToken,
    /// Reads waiting for jobs to finish.
    waiters: Waiters,
    /// Every job's event stream.
    events: JobEvents,
}

impl Runner {
    /// A runner for `store`'s jobs; it runs once `start`ed.
    pub fn new(
        store: Arc<dyn JobStore>,
        settings: RunnerSettings,
        metrics: Metrics,
        events: JobEvents,
    ) -> Runner {
        Runner {
            shared: Arc::new(Shared {
                events,
                store,
                task: std::sync::OnceLock::new(),
                settings,
                slots: Arc::new(Semaphore::new(settings.concurrency.max(1))),
                running: Mutex::default(),
                changes: watch::channel(0).0,
                wake: tokio::sync::Notify::new(),
                claiming: CancellationToken::new(),
                waiters: Waiters::new(settings.max_waiters, metrics.clone()),
                metrics,
            }),
        }
    }

    /// The jobs' store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.shared.store
    }

    /// The jobs' event streams.
    pub fn events(&self) -> &JobEvents {
        &self.shared.events
    }

    /// Whether job `id`'s run goes on in this process.
    pub fn runs_here(&self, id: &str) -> bool {
        lock(&self.shared.running).contains_key(id)
    }

    /// The shutdown signal: cancelled when this process stops taking runs.
    pub fn stopping(&self) -> CancellationToken {
        self.shared.claiming.clone()
    }

    /// Starts the loop (until shutdown): sweeps, claims, renews, counts; a round
    /// every tick, or at once after a submit.
    pub fn start(&self, task: Arc<dyn RunTask>, background: &Background) {
        if self.shared.task.set(task).is_err() {
            return;
        }
        self.shared.events.start(background);
        let (shared, stopping) = (self.shared.clone(), background.stopping());
        // The waiting reads' jobs, read at every change seen here and every tick.
        drop(background.spawn(async move {
            let mut changes = shared.changes.subscribe();
            loop {
                tokio::select! {
                    () = stopping.cancelled() => break,
                    _ = tokio::time::timeout(LOOK_EVERY, changes.changed()) => {}
                }
                shared.waiters.look(&*shared.store).await;
            }
        }));
        let (shared, owner) = (self.shared.clone(), background.clone());
        let stopping = background.stopping();
        drop(background.spawn(async move {
            let mut accounted: Option<tokio::time::Instant> = None;
            let mut idle = false;
            loop {
                round(&shared, &owner, &stopping).await;
                // Counting and forgetting need not be as prompt as claiming.
                if accounted.is_none_or(|at| at.elapsed() >= shared.settings.account_every) {
                    idle = account(&shared).await && lock(&shared.running).is_empty();
                    accounted = Some(tokio::time::Instant::now());
                }
                // An idle gateway costs next to nothing: one look a second.
                let pause = match idle {
                    true => IDLE_TICK.max(shared.settings.tick),
                    false => shared.settings.tick,
                };
                tokio::select! {
                    () = stopping.cancelled() => break,
                    () = shared.claiming.cancelled() => break,
                    () = shared.wake.notified() => idle = false,
                    () = tokio::time::sleep(pause) => {}
                }
            }
            // Stopping: no new runs, but the runs still going (up to their
            // deadline) keep their leases, or another replica would start them
            // again meanwhile; a cancel made elsewhere still stops them.
            while !lock(&shared.running).is_empty() {
                renew(&shared).await;
                tokio::time::sleep(shared.settings.tick).await;
            }
            // The last run here has written its events.
            shared.events.close();
        }));
    }

    /// The shutdown signal: runs already going finish, no other starts here.
    pub fn stop_claiming(&self) {
        self.shared.claiming.cancel();
    }

    /// A new job was written: it is worth looking for work before the next tick.
    pub async fn submitted(&self, moved: &Moved) {
        note_move(&self.shared, moved).await;
        self.shared.changes.send_modify(|n| *n += 1);
        self.shared.wake.notify_one();
    }

    /// A job was canceled (counted as finished here, where the cancel was
    /// made): its run on this replica, if any, stops now.
    pub async fn canceled(&self, moved: &Moved) {
        note_move(&self.shared, moved).await;
        note_finished(&self.shared, moved);
        if let Some(held) = lock(&self.shared.running).get(&moved.job.id) {
            held.switch.cancel();
        }
        self.shared.changes.send_modify(|n| *n += 1);
    }

    /// The reads of jobs: their waits, and finished jobs' shared renderings.
    pub fn reads(&self) -> &Waiters {
        &self.shared.waiters
    }

    /// A place to wait for a job, unless `LADLE_MAX_WAITERS` are waiting.
    pub fn enter_wait(&self) -> Option<Place> {
        self.shared.waiters.enter()
    }

    /// Waits until job `id` of `client` is over, `until` passes or shutdown
    /// begins (a waiting read never holds the shutdown); the job as it is then.
    pub async fn wait(&self, id: &str, client: &str, until: tokio::time::Instant) -> Seen {
        let shared = &self.shared;
        shared
            .waiters
            .wait((id, client), until, &shared.claiming)
            .await
    }
}

/// One round of the loop.
async fn round(shared: &Arc<Shared>, owner: &Background, stopping: &CancellationToken) {
    let now = unix_millis();
    let settings = shared.settings;
    // This replica's runs first: after an outage, they are asserted before
    // anyone's expired runs are looked for.
    renew(shared).await;
    if let Ok(moved) = shared.store.sweep(now, settings.max_runs).await {
        for change in &moved {
            note_move(shared, change).await;
            // A run the last process (or a dead replica) held was cut.
            if change.from == Some(JobStatus::Running) {
                shared
                    .metrics
                    .job_run(&change.job.request.task, "interrupted");
            }
            note_finished(shared, change);
        }
        if !moved.is_empty() {
            shared.changes.send_modify(|n| *n += 1);
        }
    }
    while !stopping.is_cancelled() && !shared.claiming.is_cancelled() {
        let Ok(slot) = shared.slots.clone().try_acquire_owned() else {
            break;
        };
        // The lease starts now, not when the round began.
        let busy = busy_clients(shared);
        let claimed = shared
            .store
            .claim(unix_millis(), settings.lease, &busy)
            .await;
        let Ok(Some(claimed)) = claimed else {
            break;
        };
        note_move(shared, &claimed).await;
        shared.changes.send_modify(|n| *n += 1);
        let (shared, job) = (shared.clone(), claimed.job);
        drop(owner.spawn(async move {
            run(&shared, job).await;
            drop(slot);
        }));
    }
}

/// Tells the store this replica still holds its runs (those whose outcome waits
/// to be written too), and stops the ones whose job was canceled on another
/// replica.
async fn renew(shared: &Shared) {
    let held: Vec<(String, u32)> = lock(&shared.running)
        .iter()
        .map(|(id, held)| (id.clone(), held.run))
        .collect();
    if held.is_empty() {
        return;
    }
    let renewed = shared
        .store
        .renew(&held, unix_millis(), shared.settings.lease)
        .await;
    if let Ok(gone) = renewed {
        let running = lock(&shared.running);
        for id in gone {
            if let Some(held) = running.get(&id) {
                held.switch.cancel();
            }
        }
    }
}

/// One run: the task request, unless the job is canceled meanwhile; its end is
/// written back (again and again while the store is unreachable). The run is
/// this replica's (its lease renewed) until its end is written.
async fn run(shared: &Arc<Shared>, job: Job) {
    ran(shared, &job).await;
    let mut running = lock(&shared.running);
    // Only this run's entry: a later run of the job may have replaced it.
    if running
        .get(&job.id)
        .is_some_and(|held| held.run == job.runs)
    {
        running.remove(&job.id);
    }
}

/// The run itself, and its end written.
async fn ran(shared: &Arc<Shared>, job: &Job) {
    let switch = CancellationToken::new();
    let held = Held {
        run: job.runs,
        client: job.client.clone(),
        switch: switch.clone(),
    };
    lock(&shared.running).insert(job.id.clone(), held);
    let request_id = job.run_id.clone().unwrap_or_default();
    let task = &job.request.task;
    let Some(runs) = shared.task.get() else {
        return;
    };
    let ended = tokio::select! {
        () = switch.cancelled() => None,
        ended = runs.run(job, request_id) => Some(ended),
    };
    let Some(ended) = ended else {
        shared.metrics.job_run(task, "canceled");
        return;
    };
    let class = match &ended {
        Ok(_) => "2xx",
        Err(error) if (400..500).contains(&error.status) => "4xx",
        Err(_) => "5xx",
    };
    shared.metrics.job_run(task, class);
    let settings = shared.settings;
    let end = judge(
        ended,
        job.runs,
        settings.max_runs,
        settings.retry,
        unix_millis(),
    );
    loop {
        match shared
            .store
            .finish(&job.id, job.runs, end.clone(), unix_millis())
            .await
        {
            Ok(Some(moved)) => {
                note_move(shared, &moved).await;
                note_finished(shared, &moved);
                shared.changes.send_modify(|n| *n += 1);
                return;
            }
            // Canceled (or taken over) meanwhile: left as it is.
            Ok(None) => return,
            Err(down) => {
                tracing::warn!(job_id = %job.id, error = %down, "a run's outcome waits for the store");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
