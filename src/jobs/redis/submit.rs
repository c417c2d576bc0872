//! A new job written to the fleet's Redis, its id made in the Redis's epoch
//! (`ids`): the submit script refuses an id of another epoch and names the
//! current one, so a replica learns a new epoch (a Redis that lost its data)
//! with its next submit and makes the id again in it.

use super::{RedisJobs, StoreDown, fields};
use crate::jobs::{Job, Submitted, ids};
use crate::store_down::Cause;
use crate::wall::unix_millis;

impl RedisJobs {
    /// `JobStore::submit` for Redis.
    pub(super) async fn write_new(
        &self,
        mut job: Job,
        max_queued: u64,
        client_max: Option<u32>,
    ) -> Result<Submitted, StoreDown> {
        let fields = fields::encode(&job)?;
        // At most twice: a first submit after an epoch changed learns it.
        for _ in 0..2 {
            let candidate = ids::new_epoch();
            let epoch = self.known_epoch().unwrap_or_else(|| candidate.clone());
            job.id = ids::in_epoch(&epoch);
            let mut invocation = self.scripts.submit.prepare_invoke();
            invocation
                .key(self.job_key(&job.id))
                .key(self.set("queued"))
                .key(self.set("running"))
                .key(self.set("waiting"))
                .key(self.set("clients"))
                .key(self.set("epoch"))
                .arg(max_queued)
                .arg(&job.id)
                .arg(job.created_at)
                .arg(client_max.map_or(String::new(), |n| n.to_string()))
                .arg(&job.client);
            match &job.key {
                Some(key) => invocation
                    .arg(self.submit_key(&key.key))
                    .arg(format!("{} {}", key.fingerprint, job.id))
                    .arg(key.until.saturating_sub(unix_millis())),
                None => invocation.arg("").arg("").arg(0),
            };
            invocation.arg(&epoch).arg(&candidate);
            for (name, value) in &fields {
                invocation.arg(*name).arg(value);
            }
            let (written, current): (i64, String) = self
                .call("jobs_submit", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            self.learn_epoch(current);
            match written {
                1 => return Ok(Submitted::Accepted(job)),
                2 => return Ok(Submitted::ClientFull),
                3 => continue,
                _ => return Ok(Submitted::Full),
            }
        }
        Err(StoreDown::new("submit", Cause::EpochMoved))
    }

    /// Whether job `id` (not found) was made in an epoch that is not the
    /// fleet's any more: its Redis lost its data since.
    pub(super) async fn made_before_a_loss(&self, id: &str) -> Result<bool, StoreDown> {
        let Some(made_in) = ids::epoch_of(id) else {
            return Ok(false);
        };
        let key = self.set("epoch");
        let current: Option<String> = self
            .call("jobs_epoch", |mut c| async move {
                redis::cmd("GET").arg(key).query_async(&mut c).await
            })
            .await?;
        Ok(current.as_deref() != Some(made_in))
    }

    fn known_epoch(&self) -> Option<String> {
        self.epoch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn learn_epoch(&self, epoch: String) {
        *self
            .epoch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(epoch);
    }
}
