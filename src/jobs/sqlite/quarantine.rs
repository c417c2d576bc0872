//! A job whose row cannot be read is ended, not left in the way: one such row
//! (nested past what serde_json reads back, by a build that did not bound it, or
//! damaged) once stopped every claim and every webhook delivery for everyone.

use rusqlite::{Connection, OptionalExtension, params};

use super::Tally;
use super::rows::{self, COLUMNS, Unreadable};
use crate::error::ApiError;
use crate::jobs::{Delivery, Job, JobStatus, Moved};

/// Rewrites the row of `bad` as a job that `failed` with `job_unreadable`
/// (`retryable: false`): its request keeps only its task, its result is gone, and
/// with `webhooks` on a `job.failed` delivery is due now. The change is logged
/// and counted by the store's next sweep; the job, as it now reads, comes back.
pub fn quarantine(
    tx: &Connection,
    bad: Unreadable,
    webhooks: bool,
    tally: &mut Tally,
) -> rusqlite::Result<Option<Job>> {
    let now = crate::wall::unix_millis();
    tracing::warn!(job_id = %bad.id, why = %bad.why, "a job's stored row cannot be read: it is ended as failed (job_unreadable)");
    tally.metrics.store_error("read");
    let Some((status, run_id)) = tx
        .query_row(
            "SELECT status, run_id FROM jobs WHERE id = ?1",
            [&bad.id],
            |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?)),
        )
        .optional()?
    else {
        return Ok(None);
    };
    let from = JobStatus::from_name(&status);
    let error = ApiError::JobUnreadable.body(&run_id.unwrap_or_default())["error"].to_string();
    let delivery = webhooks
        .then(|| serde_json::to_string(&Delivery::pending(now)))
        .transpose()
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    tx.execute(
        "UPDATE jobs SET status = 'failed', updated_at = ?2, due_at = NULL, result = NULL, \
         error = ?3, delivery = ?4, delivery_due = CASE WHEN ?4 IS NULL THEN NULL ELSE ?2 END, \
         request = json_object('v', 1, 'task', COALESCE(CASE WHEN json_valid(request) THEN \
         CASE WHEN json_type(request, '$.task') = 'text' THEN json_extract(request, '$.task') \
         END END, ''), 'variables', json_object()) WHERE id = ?1",
        params![bad.id, now as i64, error, delivery],
    )?;
    if from.is_none_or(|from| !from.finished()) {
        tally.unfinished = tally.unfinished.saturating_sub(1);
    }
    let again = tx
        .prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"))?
        .query_row([&bad.id], rows::read)
        .optional()?;
    let Some(Ok(job)) = again else {
        // Still unreadable (another of its columns is what is damaged): the row
        // is `failed` in SQL and owes no delivery, so nothing picks it again.
        tx.execute(
            "UPDATE jobs SET delivery_due = NULL WHERE id = ?1",
            [&bad.id],
        )?;
        return Ok(None);
    };
    tally.quarantined.push(Moved {
        job: job.clone(),
        from: from.or(Some(JobStatus::Queued)),
    });
    Ok(Some(job))
}
