//! The settings of the runner and of the jobs' event streams, as the
//! configuration gives them: a leaf, so that `config` names them without
//! reaching what runs jobs (and, through it, the fleet's Redis).

use std::time::Duration;

/// The settings the runner works by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerSettings {
    /// `LADLE_JOB_CONCURRENCY`.
    pub concurrency: usize,
    /// `LADLE_JOB_MAX_RUNS`.
    pub max_runs: u32,
    /// `LADLE_JOB_RETRY_MS`.
    pub retry: Duration,
    /// `LADLE_JOB_TTL_MS`.
    pub ttl: Duration,
    /// How long a run holds its job without renewal (`LADLE_REDIS_LEASE_MS`).
    pub lease: Duration,
    /// How often the store is looked at for new work and canceled runs.
    pub tick: Duration,
    /// How often the gauges (`ladle_jobs`, the queue's age) are counted and
    /// finished jobs past their time forgotten.
    pub account_every: Duration,
    /// `LADLE_MAX_WAITERS`: job reads waiting (`?wait_ms`) at once.
    pub max_waiters: usize,
}

/// The settings of job event streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSettings {
    /// `LADLE_STREAM_TTL_MS`: how long a finished job's events are kept.
    pub ttl: Duration,
    /// `LADLE_STREAM_MAX_BYTES`: finished jobs' kept events without Redis.
    pub max_bytes: u64,
    /// `LADLE_STREAM_PROGRESS_MS`: the `progress` interval (`None`: none).
    pub progress: Option<Duration>,
    /// `LADLE_STREAM_STALL_MS`: a reader's client must take each frame within
    /// this, or its connection is cut (a reader that never reads holds nothing).
    pub stall: Duration,
}
