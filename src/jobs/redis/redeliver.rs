//! Failed webhook deliveries in the fleet's store: the newest listed (a sorted
//! set the delivery script keeps), and an operator's redrive, which replaces the
//! delivery only if it is still the failed one that was read (another replica
//! may have redriven it meanwhile).

use futures_util::future::BoxFuture;

use super::{RedisJobs, StoreDown};
use crate::jobs::{DeliveryStatus, Job, Redelivered};
use crate::store_down::Cause;

impl RedisJobs {
    /// `JobStore::redeliver` for Redis.
    pub(super) fn redrive<'a>(
        &'a self,
        id: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Redelivered, StoreDown>> {
        Box::pin(async move {
            let key = self.job_key(id);
            let flat: Vec<String> = self
                .call("jobs_read", |mut c| async move {
                    redis::cmd("HGETALL").arg(key).query_async(&mut c).await
                })
                .await?;
            let read = flat.chunks(2).find(|pair| pair[0] == "delivery");
            let was = read
                .and_then(|pair| pair.get(1))
                .cloned()
                .unwrap_or_default();
            let Some(job) = self.read(id, flat).await? else {
                return Ok(Redelivered::Unknown);
            };
            let Some(mut delivery) = job
                .delivery
                .clone()
                .filter(|d| d.status == DeliveryStatus::Failed)
            else {
                return Ok(Redelivered::NotFailed);
            };
            delivery.redrive(now);
            let text = serde_json::to_string(&delivery).map_err(|e| {
                StoreDown::new("redeliver", Cause::Encode(format!("a delivery: {e}")))
            })?;
            let mut invocation = self.scripts.redeliver.prepare_invoke();
            invocation
                .key(self.job_key(id))
                .key(self.set("deliveries"))
                .key(self.set("failed"))
                .arg(id)
                .arg(was)
                .arg(text)
                .arg(now);
            let written: Option<Vec<String>> = self
                .call("jobs_redeliver", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            let Some(flat) = written else {
                // Changed meanwhile (redriven, or expired): as it is now.
                return Ok(Redelivered::NotFailed);
            };
            let job = self.read(id, flat).await?;
            Ok(job.map_or(Redelivered::Unknown, |job| Redelivered::Now(Box::new(job))))
        })
    }

    /// The newest jobs whose delivery failed (`JobStore::failed_deliveries`);
    /// those gone (expired) or redriven meanwhile leave the list.
    pub(super) async fn failed_listed(&self, most: usize) -> Result<Vec<Job>, StoreDown> {
        let set = self.set("failed");
        let listed = set.clone();
        let ids: Vec<String> = self
            .call("jobs_failed", |mut c| async move {
                redis::cmd("ZREVRANGE")
                    .arg(listed)
                    .arg(0)
                    .arg(most.saturating_sub(1))
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let mut jobs = Vec::with_capacity(ids.len());
        for id in ids {
            let key = self.job_key(&id);
            let flat: Vec<String> = self
                .call("jobs_read", |mut c| async move {
                    redis::cmd("HGETALL").arg(key).query_async(&mut c).await
                })
                .await?;
            let failed = match self.read(&id, flat).await? {
                Some(job)
                    if job
                        .delivery
                        .as_ref()
                        .is_some_and(|d| d.status == DeliveryStatus::Failed) =>
                {
                    Some(job)
                }
                _ => None,
            };
            match failed {
                Some(job) => jobs.push(job),
                None => {
                    let (set, id) = (set.clone(), id.clone());
                    let _: i64 = self
                        .call("jobs_failed", |mut c| async move {
                            redis::cmd("ZREM")
                                .arg(set)
                                .arg(id)
                                .query_async(&mut c)
                                .await
                        })
                        .await?;
                }
            }
        }
        Ok(jobs)
    }
}
