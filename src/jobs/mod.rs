//! Background jobs (contract 7.1) and their webhooks (7.2): work a caller hands
//! ladle and comes back for. A job is committed to the store before its `202`
//! goes out, run by this replica's `runner` (at most `LADLE_JOB_CONCURRENCY` at
//! once, oldest first) as an ordinary task request, and its outcome decided by
//! `outcome` (the one judge of what a run's end means for its job).
//!
//! The store is an interface with two variants: `sqlite` (one file, one process,
//! one writer thread committing many calls at once) and `redis` (a fleet's, runs
//! held by a lease).

pub mod events;
pub mod ids;
pub mod outcome;
pub mod record;
pub mod redis;
pub mod runner;
pub mod settings;
pub mod sqlite;
pub mod waiters;
pub mod webhooks;

use std::time::Duration;

use futures_util::future::BoxFuture;

pub use self::outcome::RunEnd;
pub use self::record::{Delivery, DeliveryStatus, Job, JobRequest, JobStatus, SubmitKey};

/// The store could not be reached or could not write (`503 store_unavailable`:
/// nothing is accepted that cannot be kept).
pub use crate::store_down::StoreDown;

/// What a submit led to.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "one lives for a moment per submit; a box would buy nothing"
)]
pub enum Submitted {
    /// Written (committed) as given.
    Accepted(Job),
    /// `LADLE_JOB_MAX_QUEUED` jobs are not finished yet: nothing was written.
    Full,
    /// The state file would pass `LADLE_STATE_MAX_BYTES`: nothing was written.
    FileFull,
    /// Its client key has `max_queued` jobs unfinished: nothing was written.
    ClientFull,
}

/// What a redelivery led to.
#[derive(Debug, Clone, PartialEq)]
pub enum Redelivered {
    /// No such job.
    Unknown,
    /// Its delivery has not failed (pending, delivered, or none): unchanged.
    NotFailed,
    /// Its delivery is pending again, due now, under the same `webhook-id`.
    Now(Box<Job>),
}

/// What a cancel led to.
#[derive(Debug, Clone, PartialEq)]
pub enum Canceled {
    /// No such job (or another client's, or expired).
    Unknown,
    /// The job was already over: unchanged.
    Finished(Job),
    /// The job is canceled now (the status it left is in the change).
    Now(Moved),
}

/// How many jobs are in each unfinished status (`ladle_jobs{status}`), and how
/// old the oldest queued one is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Queued jobs.
    pub queued: u64,
    /// Running jobs.
    pub running: u64,
    /// Jobs waiting for their next run.
    pub retry_wait: u64,
    /// When the oldest queued job was created (Unix milliseconds).
    pub oldest_queued: Option<u64>,
    /// The state file's size on disk, with its log (`None` with Redis, or in
    /// memory).
    pub state_bytes: Option<u64>,
    /// The free space of the state file's folder (`None` likewise).
    pub state_free_bytes: Option<u64>,
}

/// A status change, for its log line and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// The job after the change.
    pub job: Job,
    /// The status it left (`None` for a new job).
    pub from: Option<JobStatus>,
}

/// Where jobs live. Times are Unix milliseconds; every write is durable when
/// its future resolves.
pub trait JobStore: Send + Sync {
    /// Writes a new job, unless `max_queued` jobs are unfinished already, or
    /// `client_max` of its client's.
    fn submit(
        &self,
        job: Job,
        max_queued: u64,
        client_max: Option<u32>,
    ) -> BoxFuture<'_, Result<Submitted, StoreDown>>;

    /// The fingerprint and job id a submit's idempotency `key` was written with,
    /// while it is kept.
    fn keyed<'a>(&'a self, key: &'a str)
    -> BoxFuture<'a, Result<Option<(u64, String)>, StoreDown>>;

    /// Whether job `id`, not found, was made by this store before it lost its
    /// data (a fleet's Redis without persistence, restarted): `410 job_lost`.
    fn lost<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreDown>> {
        let _ = id;
        Box::pin(std::future::ready(Ok(false)))
    }

    /// The job, if it exists, belongs to `client`, and has not expired.
    fn get<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
    ) -> BoxFuture<'a, Result<Option<Job>, StoreDown>>;

    /// Writes a job that is over already and is never run: a response made
    /// without `background` and stored (contract 12), kept like any finished
    /// job for `LADLE_JOB_TTL_MS`. `false`: the state file is full, nothing was
    /// written.
    fn keep_finished(&self, job: Job) -> BoxFuture<'_, Result<bool, StoreDown>>;

    /// Forgets job `id` of `client` whatever its status (a deleted response):
    /// whether there was one to forget.
    fn forget<'a>(&'a self, id: &'a str, client: &'a str)
    -> BoxFuture<'a, Result<bool, StoreDown>>;

    /// Cancels a job of `client` that is not over.
    fn cancel<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Canceled, StoreDown>>;

    /// Starts the next run of the oldest queued job whose client is not one of
    /// `busy` (at its `max_running` here): it is `running` with one more run,
    /// held for `lease`.
    fn claim<'a>(
        &'a self,
        now: u64,
        lease: Duration,
        busy: &'a [String],
    ) -> BoxFuture<'a, Result<Option<Moved>, StoreDown>>;

    /// Ends run `run` of job `id` as `end`, if that run still holds the job (a
    /// canceled or taken-over job is left as it is); the change, if made.
    fn finish<'a>(
        &'a self,
        id: &'a str,
        run: u32,
        end: RunEnd,
        now: u64,
    ) -> BoxFuture<'a, Result<Option<Moved>, StoreDown>>;

    /// Keeps this replica's runs (id, run) held for another `lease`; the ones
    /// that no longer hold their job (canceled meanwhile) come back.
    fn renew<'a>(
        &'a self,
        runs: &'a [(String, u32)],
        now: u64,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<String>, StoreDown>>;

    /// Ends runs that no process holds any more (cut by a crash): queued again,
    /// or `failed` with `job_interrupted` when `max_runs` were used; and moves
    /// waiting jobs whose time has come back to `queued`. The changes made.
    fn sweep(&self, now: u64, max_runs: u32) -> BoxFuture<'_, Result<Vec<Moved>, StoreDown>>;

    /// Forgets jobs finished more than `ttl` ago.
    fn expire(&self, now: u64, ttl: Duration) -> BoxFuture<'_, Result<u64, StoreDown>>;

    /// The unfinished jobs by status.
    fn counts(&self) -> BoxFuture<'_, Result<Counts, StoreDown>>;

    /// Why the store cannot take writes now (a full disk), for `/readyz`.
    fn unhealthy(&self) -> Option<String> {
        None
    }

    /// At most `most` finished jobs whose webhook delivery is due at `now`
    /// (oldest due first), each held for `lease` so that no other sender takes
    /// it meanwhile.
    fn due_deliveries(
        &self,
        now: u64,
        lease: Duration,
        most: usize,
    ) -> BoxFuture<'_, Result<Vec<Job>, StoreDown>>;

    /// Makes job `id`'s failed delivery pending again at `now`, its attempts
    /// counted afresh and its `webhook-id` kept (an operator's redrive).
    fn redeliver<'a>(
        &'a self,
        id: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Redelivered, StoreDown>>;

    /// The newest jobs (at most `most`) whose webhook delivery failed.
    fn failed_deliveries(&self, most: usize) -> BoxFuture<'_, Result<Vec<Job>, StoreDown>>;

    /// Keeps `event` as the id of job `id`'s final `job` event (contract 11.2).
    fn keep_final_event<'a>(
        &'a self,
        id: &'a str,
        event: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreDown>>;

    /// Records a delivery attempt's result.
    fn delivered<'a>(
        &'a self,
        id: &'a str,
        delivery: Delivery,
    ) -> BoxFuture<'a, Result<(), StoreDown>>;
}
