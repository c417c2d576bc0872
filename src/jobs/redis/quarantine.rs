//! A job whose hash cannot be read back is ended, not left in the way: as in the
//! state file (`sqlite::quarantine`), one such hash (nested past what serde_json
//! reads back, by a build that did not bound it, or damaged) would otherwise stop
//! every claim, sweep or delivery that meets it, on every replica.

use std::sync::{MutexGuard, PoisonError};

use super::fields::{self, Unreadable};
use super::{RedisJobs, StoreDown};
use crate::error::ApiError;
use crate::jobs::{Job, JobStatus, Moved};
use crate::wall::unix_millis;

/// A change a script reports: the job's id, the status it left, its fields.
pub(super) type Change = (String, String, Vec<String>);

impl RedisJobs {
    /// The job a hash holds; one that cannot be read back is ended first, and
    /// is as it then reads (or `None`, if even that cannot be read).
    pub(super) async fn read(&self, id: &str, flat: Vec<String>) -> Result<Option<Job>, StoreDown> {
        match fields::decode(id, flat) {
            Ok(job) => Ok(Some(job)),
            Err(bad) => self.quarantine(id, bad).await,
        }
    }

    /// A change a script reported; `None` when its hash could not be read and
    /// the job was ended instead (the next sweep reports that change).
    pub(super) async fn moved(&self, (id, from, flat): Change) -> Result<Option<Moved>, StoreDown> {
        match fields::decode(&id, flat) {
            Ok(job) => Ok(Some(Moved {
                job,
                from: JobStatus::from_name(&from),
            })),
            Err(bad) => self.quarantine(&id, bad).await.map(|_| None),
        }
    }

    /// The jobs ended because they could not be read, since the last call.
    pub(super) fn take_quarantined(&self) -> Vec<Moved> {
        std::mem::take(&mut *self.lock_quarantined())
    }

    /// Ends job `id` as `failed` (`job_unreadable`, `retryable: false`): a
    /// `WARN` line names it and `ladle_store_errors_total{op="read"}` counts it.
    pub(super) async fn quarantine(
        &self,
        id: &str,
        bad: Unreadable,
    ) -> Result<Option<Job>, StoreDown> {
        tracing::warn!(job_id = %id, why = %bad.0, "a job's stored hash cannot be read: it is ended as failed (job_unreadable)");
        self.redis.metrics().store_error("read");
        let now = unix_millis();
        let error = ApiError::JobUnreadable.body("")["error"].to_string();
        let mut invocation = self.scripts.quarantine.prepare_invoke();
        self.ending(&mut invocation, id)
            .arg(id)
            .arg(now)
            .arg(error)
            .arg(self.ttl_ms())
            .arg(self.delivery(now)?);
        let ended: Option<(String, Vec<String>)> = self
            .call("jobs_quarantine", |mut c| async move {
                invocation.invoke_async(&mut c).await
            })
            .await?;
        let Some((from, flat)) = ended else {
            return Ok(None);
        };
        // Out of every set, it stops nothing even if it still cannot be read.
        let Ok(job) = fields::decode(id, flat) else {
            return Ok(None);
        };
        let from = JobStatus::from_name(&from).or(Some(JobStatus::Queued));
        self.lock_quarantined().push(Moved {
            job: job.clone(),
            from,
        });
        Ok(Some(job))
    }

    fn lock_quarantined(&self) -> MutexGuard<'_, Vec<Moved>> {
        self.quarantined
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
