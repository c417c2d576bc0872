//! An operator's redrive of a failed webhook delivery, in the fleet's store: the
//! job's hash is read, and its delivery replaced only if it is still the failed
//! one that was read (another replica may have redriven it meanwhile).

use futures_util::future::BoxFuture;

use super::{RedisJobs, StoreDown};
use crate::jobs::{DeliveryStatus, Redelivered};

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
            let text = serde_json::to_string(&delivery)
                .map_err(|e| StoreDown(format!("cannot encode a delivery: {e}")))?;
            let mut invocation = self.scripts.redeliver.prepare_invoke();
            invocation
                .key(self.job_key(id))
                .key(self.set("deliveries"))
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
}
