//! The job store's calls, each one script or command through the fleet's handle.

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::quarantine::Change;
use super::{RedisJobs, fields};
use crate::error::ApiError;
use crate::jobs::{
    Canceled, Counts, Delivery, DeliveryStatus, Job, JobStatus, JobStore, Moved, Redelivered,
    RunEnd, StoreDown, Submitted,
};
use crate::store_down::Cause;
use crate::wall::unix_millis;

impl JobStore for RedisJobs {
    fn submit(
        &self,
        job: Job,
        max_queued: u64,
        client_max: Option<u32>,
    ) -> BoxFuture<'_, Result<Submitted, StoreDown>> {
        Box::pin(self.write_new(job, max_queued, client_max))
    }

    fn lost<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreDown>> {
        Box::pin(self.made_before_a_loss(id))
    }

    fn keyed<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<(u64, String)>, StoreDown>> {
        Box::pin(async move {
            let name = self.submit_key(key);
            let kept: Option<String> = self
                .call("jobs_keyed", |mut c| async move {
                    redis::cmd("GET").arg(name).query_async(&mut c).await
                })
                .await?;
            Ok(kept.and_then(|kept| {
                let (fingerprint, id) = kept.split_once(' ')?;
                Some((fingerprint.parse().ok()?, id.to_owned()))
            }))
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
    ) -> BoxFuture<'a, Result<Option<Job>, StoreDown>> {
        Box::pin(async move {
            let key = self.job_key(id);
            let flat: Vec<String> = self
                .call("jobs_get", |mut c| async move {
                    redis::cmd("HGETALL").arg(key).query_async(&mut c).await
                })
                .await?;
            if flat.is_empty() {
                return Ok(None);
            }
            let job = self.read(id, flat).await?;
            let now = unix_millis();
            Ok(job.filter(|job| job.client == client && !self.expired(job, now)))
        })
    }

    fn cancel<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Canceled, StoreDown>> {
        Box::pin(async move {
            let mut invocation = self.scripts.cancel.prepare_invoke();
            self.ending(&mut invocation, id)
                .arg(id)
                .arg(client)
                .arg(now)
                .arg(self.ttl_ms())
                .arg(self.delivery(now)?);
            let (outcome, from, flat): Change = self
                .call("jobs_cancel", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            Ok(match outcome.as_str() {
                "finished" => match self.read(id, flat).await? {
                    Some(job) => Canceled::Finished(job),
                    None => Canceled::Unknown,
                },
                "now" => match self.moved((id.to_owned(), from, flat)).await? {
                    Some(moved) => Canceled::Now(moved),
                    None => Canceled::Unknown,
                },
                _ => Canceled::Unknown,
            })
        })
    }

    fn keep_finished(&self, job: Job) -> BoxFuture<'_, Result<bool, StoreDown>> {
        Box::pin(self.write_finished(job))
    }

    fn forget<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreDown>> {
        Box::pin(self.forget_job(id, client))
    }

    fn claim<'a>(
        &'a self,
        now: u64,
        lease: Duration,
        busy: &'a [String],
    ) -> BoxFuture<'a, Result<Option<Moved>, StoreDown>> {
        Box::pin(async move {
            let run_id = uuid::Uuid::new_v4().hyphenated().to_string();
            let mut invocation = self.scripts.claim.prepare_invoke();
            invocation
                .key(self.set("queued"))
                .key(self.set("running"))
                .arg(self.job_key(""))
                .arg(now)
                // Held by Redis's clock, not this replica's.
                .arg(lease.as_millis() as u64)
                .arg(run_id);
            for client in busy {
                invocation.arg(client);
            }
            let claimed: Option<(String, Vec<String>)> = self
                .call("jobs_claim", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            let Some((id, flat)) = claimed else {
                return Ok(None);
            };
            // A job that cannot be read is ended, and the next round claims on.
            let queued = JobStatus::Queued.name().to_owned();
            self.moved((id, queued, flat)).await
        })
    }

    fn finish<'a>(
        &'a self,
        id: &'a str,
        run: u32,
        end: RunEnd,
        now: u64,
    ) -> BoxFuture<'a, Result<Option<Moved>, StoreDown>> {
        Box::pin(self.end_run(id, run, end, now, false))
    }

    fn renew<'a>(
        &'a self,
        runs: &'a [(String, u32)],
        _now: u64,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<String>, StoreDown>> {
        Box::pin(async move {
            if runs.is_empty() {
                return Ok(Vec::new());
            }
            let mut invocation = self.scripts.renew.prepare_invoke();
            invocation
                .key(self.set("running"))
                .arg(self.job_key(""))
                .arg(lease.as_millis() as u64);
            for (id, run) in runs {
                invocation.arg(id).arg(*run);
            }
            self.call("jobs_renew", |mut c| async move {
                invocation.invoke_async(&mut c).await
            })
            .await
        })
    }

    fn sweep(&self, now: u64, max_runs: u32) -> BoxFuture<'_, Result<Vec<Moved>, StoreDown>> {
        Box::pin(async move {
            let mut invocation = self.scripts.sweep.prepare_invoke();
            invocation
                .key(self.set("running"))
                .key(self.set("queued"))
                .key(self.set("waiting"))
                .arg(self.job_key(""))
                .arg(now)
                .arg(max_runs)
                // Back from an outage: every replica's runs are renewed before
                // any is found expired (the runs' own replicas renew every tick).
                .arg(if self.redis.unreachable_within(self.redis.lease()) {
                    "1"
                } else {
                    ""
                });
            let (changes, cut): (Vec<Change>, Vec<(String, u32, String)>) = self
                .call("jobs_sweep", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            let mut read = Vec::with_capacity(changes.len());
            for change in changes {
                read.extend(self.moved(change).await?);
            }
            let mut changes = read;
            // Runs cut with no run left fail, each if its lease is still over
            // (another replica may have failed it, or its replica renewed it, since).
            for (id, run, run_id) in cut {
                let error = ApiError::JobInterrupted.body(&run_id)["error"].clone();
                let failed = RunEnd::Failed(error);
                if let Some(change) = self.end_run(&id, run, failed, now, true).await? {
                    changes.push(change);
                }
            }
            changes.append(&mut self.take_quarantined());
            Ok(changes)
        })
    }

    fn expire(&self, _now: u64, _ttl: Duration) -> BoxFuture<'_, Result<u64, StoreDown>> {
        // Finished jobs' keys expire by themselves.
        Box::pin(std::future::ready(Ok(0)))
    }

    fn counts(&self) -> BoxFuture<'_, Result<Counts, StoreDown>> {
        Box::pin(async move {
            let sets = ["queued", "running", "waiting"].map(|name| self.set(name));
            type Read = (u64, u64, u64, Vec<(String, f64)>);
            let (queued, running, retry_wait, oldest): Read = self
                .call("jobs_counts", |mut c| async move {
                    let mut pipe = redis::pipe();
                    for set in &sets {
                        pipe.zcard(set);
                    }
                    // Scored by creation: the first is the oldest.
                    pipe.zrange_withscores(&sets[0], 0, 0);
                    pipe.query_async(&mut c).await
                })
                .await?;
            Ok(Counts {
                queued,
                running,
                retry_wait,
                oldest_queued: oldest.first().map(|(_, at)| at.max(0.0) as u64),
                state_bytes: None,
                state_free_bytes: None,
            })
        })
    }

    fn due_deliveries(
        &self,
        now: u64,
        lease: Duration,
        most: usize,
    ) -> BoxFuture<'_, Result<Vec<Job>, StoreDown>> {
        Box::pin(async move {
            let mut invocation = self.scripts.due.prepare_invoke();
            invocation
                .key(self.set("deliveries"))
                .arg(self.job_key(""))
                .arg(now)
                .arg(now + lease.as_millis() as u64)
                .arg(most);
            let due: Vec<(String, Vec<String>)> = self
                .call("jobs_due_deliveries", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            let mut jobs = Vec::with_capacity(due.len());
            for (id, flat) in due {
                match fields::decode(&id, flat) {
                    Ok(job) => jobs.push(job),
                    // Ended as failed: its `job.failed` delivery is due next.
                    Err(bad) => drop(self.quarantine(&id, bad).await?),
                }
            }
            Ok(jobs)
        })
    }

    fn failed_deliveries(&self, most: usize) -> BoxFuture<'_, Result<Vec<Job>, StoreDown>> {
        Box::pin(self.failed_listed(most))
    }

    fn redeliver<'a>(
        &'a self,
        id: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Redelivered, StoreDown>> {
        self.redrive(id, now)
    }

    fn keep_final_event<'a>(
        &'a self,
        id: &'a str,
        event: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreDown>> {
        Box::pin(async move {
            let mut invocation = self.scripts.final_event.prepare_invoke();
            invocation.key(self.job_key(id)).arg(event);
            let _: i64 = self
                .call("jobs_final_event", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            Ok(())
        })
    }

    fn delivered<'a>(
        &'a self,
        id: &'a str,
        delivery: Delivery,
    ) -> BoxFuture<'a, Result<(), StoreDown>> {
        Box::pin(async move {
            let text = serde_json::to_string(&delivery).map_err(|e| {
                StoreDown::new("delivered", Cause::Encode(format!("a delivery: {e}")))
            })?;
            let mut invocation = self.scripts.delivered.prepare_invoke();
            invocation
                .key(self.job_key(id))
                .key(self.set("deliveries"))
                .key(self.set("failed"))
                .arg(id)
                .arg(text)
                .arg(match delivery.status {
                    DeliveryStatus::Pending => "1",
                    DeliveryStatus::Failed => "f",
                    DeliveryStatus::Delivered => "0",
                })
                .arg(delivery.next_at)
                .arg(self.ttl_ms())
                .arg(unix_millis());
            let _: i64 = self
                .call("jobs_delivered", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            Ok(())
        })
    }
}
