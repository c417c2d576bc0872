//! Every job's event stream (contract 11.1–11.3): its status changes and its
//! runs' events, each with an id `{run}.{seq}`, kept so that a client that lost
//! its connection reads on from the last id it saw, on any replica.
//!
//! The run writes each event once; readers follow a `Feed` (the job's events as
//! this replica holds them) by index, never copying it. Without Redis the feeds
//! are the log (`memory`); with Redis the log is a Redis Stream per job and a
//! feed is a replica's copy of it, read on opening and followed by one loop for
//! every job read here (`redis`). Where a reader starts is 11.2's table
//! (`Feed::start`); what it is sent is `read`'s.

mod expected;
mod feed;
mod kept;
mod memory;
pub mod read;
mod redis;

use std::sync::Arc;

use bytes::Bytes;

pub use self::expected::Expected;
pub use self::feed::{Feed, JobEnd, ResumedFrom, Start};
pub use self::kept::{EventId, Kept, Kind};
use self::memory::MemoryLog;
use self::redis::RedisLog;
pub use super::settings::StreamSettings;
use super::{Job, JobStatus, JobStore, StoreDown};
use crate::background::Background;
use crate::fleet::Redis;
use crate::wall::unix_millis;

/// The event log of every job, and what its readers need.
#[derive(Clone)]
pub struct JobEvents(Arc<Inner>);

struct Inner {
    log: Log,
    /// Where each final event's id is kept with its job.
    store: Arc<dyn JobStore>,
    settings: StreamSettings,
    expected: Expected,
}

enum Log {
    Memory(MemoryLog),
    Redis(Arc<RedisLog>),
}

impl JobEvents {
    /// The log of `store`'s jobs: in Redis with `redis`, else in memory.
    pub fn new(
        store: Arc<dyn JobStore>,
        settings: StreamSettings,
        redis: Option<Arc<Redis>>,
    ) -> JobEvents {
        let log = match redis {
            Some(redis) => Log::Redis(Arc::new(RedisLog::new(redis, settings.ttl))),
            None => Log::Memory(MemoryLog::new(settings.ttl, settings.max_bytes)),
        };
        JobEvents(Arc::new(Inner {
            log,
            store,
            settings,
            expected: Expected::default(),
        }))
    }

    /// Starts the loops a Redis log needs (its writer and its follower).
    pub fn start(&self, background: &Background) {
        if let Log::Redis(log) = &self.0.log {
            log.start(self.0.store.clone(), background);
        }
    }

    /// No event is made after this (the last run here has ended): a Redis log's
    /// writer ends once it has written what it holds.
    pub fn close(&self) {
        if let Log::Redis(log) = &self.0.log {
            log.close();
        }
    }

    /// The settings.
    pub fn settings(&self) -> StreamSettings {
        self.0.settings
    }

    /// How long each task's answers usually are.
    pub fn expected(&self) -> &Expected {
        &self.0.expected
    }

    /// A `job` event: `job` as it is after a change of its status. A final
    /// one's id is kept with the job.
    pub async fn job_changed(&self, job: &Job) {
        let data = Bytes::from(job.view().to_string());
        let ends = job.status.finished();
        match &self.0.log {
            // A runner can claim a job before its submit wrote its `queued`
            // event (`0.1`), which would then be refused as older than the
            // run's: the first run writes it first, and the submit's is refused.
            Log::Memory(log) if first_run(job) => {
                log.append_first(&job.id, 0, "job", queued_view(job));
                drop(log.append(&job.id, job.runs, "job", data, unix_millis()));
            }
            Log::Redis(log) if first_run(job) => {
                log.append_first(&job.id, 0, "job", queued_view(job));
                log.append(&job.id, job.runs, "job", data, ends);
            }
            Log::Memory(log) => {
                let made = log.append(&job.id, job.runs, "job", data, unix_millis());
                if let Some(kept) = made.filter(|_| ends) {
                    keep_final(&*self.0.store, &job.id, kept.id).await;
                }
            }
            Log::Redis(log) => log.append(&job.id, job.runs, "job", data, ends),
        }
    }

    /// One of a run's events (never a final one).
    pub fn run_event(&self, id: &str, run: u32, name: &str, data: Bytes) {
        match &self.0.log {
            Log::Memory(log) => drop(log.append(id, run, name, data, unix_millis())),
            Log::Redis(log) => log.append(id, run, name, data, false),
        }
    }

    /// A `progress` event of job `id`'s run `run`, with `chars` written of
    /// task `task`'s answer: to the live readers, on every replica.
    pub fn progress(&self, id: &str, task: &str, run: u32, chars: u64) {
        let data = serde_json::json!({
            "run": run,
            "chars": chars,
            "expected_chars": self.0.expected.of(task),
        })
        .to_string();
        match &self.0.log {
            Log::Memory(log) => log.progress(id, kept::progress_frame(data.as_bytes())),
            Log::Redis(log) => log.progress(id, run, data.into()),
        }
    }

    /// Job `id`'s feed, for a reader.
    pub async fn feed(&self, id: &str, finished: bool) -> Result<Arc<Feed>, StoreDown> {
        match &self.0.log {
            Log::Memory(log) => Ok(log.feed(id, finished)),
            Log::Redis(log) => log.feed(id).await,
        }
    }

    /// Drops finished jobs' events past their time (without Redis; Redis
    /// expires its own).
    pub fn upkeep(&self) {
        if let Log::Memory(log) = &self.0.log {
            log.upkeep(unix_millis());
        }
    }
}

/// Whether `job` has just started its first run.
fn first_run(job: &Job) -> bool {
    job.status == JobStatus::Running && job.runs == 1
}

/// The `queued` event of a job whose first run started: `job` as it was when
/// submitted.
fn queued_view(job: &Job) -> Bytes {
    let mut queued = job.clone();
    queued.status = JobStatus::Queued;
    (queued.runs, queued.updated_at, queued.run_id) = (0, job.created_at, None);
    Bytes::from(queued.view().to_string())
}

/// Keeps `event` as job `id`'s final event's id; a store that cannot is told
/// in a log line (a reader then gets the job's final event with `{runs}.1`).
async fn keep_final(store: &dyn JobStore, id: &str, event: EventId) {
    if let Err(down) = store.keep_final_event(id, &event.to_string()).await {
        tracing::warn!(job_id = %id, error = %down, "a job's final event id could not be kept");
    }
}

/// The final `job` event of a finished `job` whose events are gone, with the
/// id it was made with.
pub fn final_alone(job: &Job) -> Kept {
    let made = job
        .final_event
        .as_deref()
        .and_then(|id| EventId::parse(id).ok().flatten());
    let id = made.unwrap_or(EventId {
        run: job.runs,
        seq: 1,
    });
    Kept::new(id, "job", Bytes::from(job.view().to_string()))
}
