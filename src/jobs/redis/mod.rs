//! Jobs in Redis, for a fleet (contract 7.1 "Replicas", 6.7): a job submitted on
//! one replica is read, waited for and canceled on any, and run by whichever
//! replica has a free slot first, once at a time.
//!
//! A job is a hash at `{prefix}job:{id}` (`fields`), not one JSON string: the
//! scripts read and change its status, run number and times in place, and never
//! decode or re-encode the JSON parts (the versioned `JobRequest` and `Delivery`
//! of `record`, the result and error objects), which Lua's `cjson` would not give
//! back byte for byte (key order, numbers, empty arrays). Four sorted sets order
//! the jobs; each unfinished job is in exactly one of the first three:
//!
//! * `{prefix}jobs:queued`, scored by creation: `claim` takes the oldest.
//! * `{prefix}jobs:running`, scored by the end of the run's lease: the running
//!   replica renews it every tick (`renew`, which also tells it of a cancel made
//!   elsewhere); a lease that ran out means its replica died, and `sweep` queues
//!   the job again (or fails it `job_interrupted` when its runs are used up).
//! * `{prefix}jobs:waiting` (`retry_wait`), scored by the next run's time.
//! * `{prefix}jobs:deliveries`, finished jobs whose webhook delivery is pending,
//!   scored by when it is due; a sender holds what it takes by scoring it later.
//!
//! So the fleet's unfinished count (`LADLE_JOB_MAX_QUEUED`, `counts`) is three
//! `ZCARD`s. Every change of status is one script (`scripts`). A finished job's
//! key expires `LADLE_JOB_TTL_MS` after it finished (so `expire` has nothing to
//! do); while its delivery is pending it has no expiry, so a delivery is made
//! however long the fleet was down, as the state file keeps it too, and the
//! expiry is set once the delivery is made or given up. `get` hides a job past
//! its TTL either way. A write is as durable as the Redis's persistence
//! (operations.md: `--appendonly yes`).

mod fields;
mod kept;
mod quarantine;
mod redeliver;
mod scripts;
mod store;
mod submit;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;

use self::scripts::Scripts;
use super::{Delivery, Job, JobStatus, Moved, RunEnd, StoreDown};
use crate::fleet::{CALL_TIMEOUT, Redis};
use crate::store_down::Cause;

/// Jobs shared by a fleet through Redis.
pub struct RedisJobs {
    redis: Arc<Redis>,
    scripts: Scripts,
    /// Whether finished jobs get a webhook delivery.
    webhooks: bool,
    /// How long a finished job can still be read.
    ttl: Duration,
    /// Jobs ended because their hash could not be read, for the next sweep
    /// to report.
    quarantined: std::sync::Mutex<Vec<Moved>>,
    /// The fleet's epoch as last seen (its job ids carry it: `ids`).
    epoch: std::sync::Mutex<Option<String>>,
}

impl RedisJobs {
    /// A store on the fleet's `redis`; nothing is asked of Redis until a call.
    pub fn new(redis: Arc<Redis>, webhooks: bool, ttl: Duration) -> RedisJobs {
        RedisJobs {
            redis,
            scripts: Scripts::new(),
            webhooks,
            ttl,
            quarantined: std::sync::Mutex::default(),
            epoch: std::sync::Mutex::default(),
        }
    }

    fn job_key(&self, id: &str) -> String {
        self.redis.key(&format!("job:{id}"))
    }

    /// Where a submit's idempotency key is kept, beside its job.
    fn submit_key(&self, key: &str) -> String {
        self.redis.key(&format!("jobs:key:{key}"))
    }

    /// A script that may end job `id` gets its key and every set the job can be
    /// in or leave, in this order.
    fn ending<'i, 's>(
        &self,
        invocation: &'i mut redis::ScriptInvocation<'s>,
        id: &str,
    ) -> &'i mut redis::ScriptInvocation<'s> {
        invocation.key(self.job_key(id));
        for set in ["queued", "running", "waiting", "deliveries", "clients"] {
            invocation.key(self.set(set));
        }
        invocation
    }

    fn set(&self, name: &str) -> String {
        self.redis.key(&format!("jobs:{name}"))
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl.as_millis() as u64
    }

    /// Whether a finished job is past its TTL at `now`.
    fn expired(&self, job: &Job, now: u64) -> bool {
        job.status.finished() && job.updated_at + self.ttl_ms() <= now
    }

    /// The delivery a job finishing at `now` gets (its JSON), or `""` without
    /// webhooks.
    fn delivery(&self, now: u64) -> Result<String, StoreDown> {
        if !self.webhooks {
            return Ok(String::new());
        }
        serde_json::to_string(&Delivery::pending(now))
            .map_err(|e| StoreDown::new("finish", Cause::Encode(format!("a delivery: {e}"))))
    }

    /// One call through the fleet's handle (its timeout, health and metrics);
    /// while Redis is unreachable it is asked at most once a second, so an outage
    /// answers `503` at once instead of after a timeout.
    async fn call<T, F, Fut>(&self, op: &'static str, f: F) -> Result<T, StoreDown>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        if !self.redis.worth_trying() {
            return Err(StoreDown::new(op, Cause::Unreachable));
        }
        self.redis
            .call(op, CALL_TIMEOUT, f)
            .await
            .map_err(|e| StoreDown::new(op, Cause::Redis(e.to_string())))
    }

    /// Ends run `run` of job `id` as `end` if it still holds the job (and, with
    /// `lease_ended`, only if its lease has run out by Redis's clock).
    async fn end_run(
        &self,
        id: &str,
        run: u32,
        end: RunEnd,
        now: u64,
        lease_ended: bool,
    ) -> Result<Option<Moved>, StoreDown> {
        let (to, field, value, until) = match end {
            RunEnd::Succeeded(result) => (JobStatus::Succeeded, "result", result.to_string(), 0),
            RunEnd::Waiting { error, until } => {
                (JobStatus::RetryWait, "error", error.to_string(), until)
            }
            RunEnd::Failed(error) => (JobStatus::Failed, "error", error.to_string(), 0),
            RunEnd::Canceled => (JobStatus::Canceled, "", String::new(), 0),
        };
        let delivery = match to.finished() {
            true => self.delivery(now)?,
            false => String::new(),
        };
        let mut invocation = self.scripts.finish.prepare_invoke();
        invocation
            .key(self.job_key(id))
            .key(self.set("running"))
            .key(self.set("waiting"))
            .key(self.set("deliveries"))
            .key(self.set("clients"))
            .key(self.set("queued"))
            .arg(id)
            .arg(run)
            .arg(now)
            .arg(self.ttl_ms())
            .arg(to.name())
            .arg(field)
            .arg(value)
            .arg(until)
            .arg(delivery)
            .arg(if lease_ended { "1" } else { "" });
        let ended: Option<Vec<String>> = self
            .call("jobs_finish", |mut c| async move {
                invocation.invoke_async(&mut c).await
            })
            .await?;
        let Some(flat) = ended else {
            return Ok(None);
        };
        let from = JobStatus::Running.name().to_owned();
        self.moved((id.to_owned(), from, flat)).await
    }
}
