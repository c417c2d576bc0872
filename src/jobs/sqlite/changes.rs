//! How a job's row changes outside a run's own calls: the runs a dead process
//! held, a status change and its delivery, expiry, and an operator's redrive of a
//! failed delivery.

use std::time::Duration;

use rusqlite::Connection;

use super::Tally;
use super::lookups::{find, select};
use super::rows;
use crate::error::ApiError;
use crate::jobs::{Delivery, DeliveryStatus, Job, JobStatus, Moved, Redelivered};

/// Ends the runs the last process on the file held (it died, or was killed):
/// queued again, or failed with `job_interrupted` when they used all `max_runs`;
/// and lets go of the deliveries it held for an attempt it never finished, due
/// again when their own back-off says.
pub fn recover(
    tx: &Connection,
    webhooks: bool,
    max_runs: u32,
    tally: &mut Tally,
) -> rusqlite::Result<Vec<Moved>> {
    let now = crate::wall::unix_millis();
    let mut changed = Vec::new();
    for mut job in select(
        tx,
        "status = 'running' AND ?1 = ?1 ORDER BY seq",
        0,
        webhooks,
        tally,
    )? {
        let to = if job.runs >= max_runs {
            let request_id = job.run_id.clone().unwrap_or_default();
            job.error = Some(ApiError::JobInterrupted.body(&request_id)["error"].clone());
            JobStatus::Failed
        } else {
            JobStatus::Queued
        };
        let moved = moved(webhooks, job, to, now, tally);
        rows::write(tx, &moved.job)?;
        changed.push(moved);
    }
    tx.execute(
        "UPDATE jobs SET delivery_due = json_extract(delivery, '$.next_at') \
         WHERE delivery_due IS NOT NULL",
        [],
    )?;
    Ok(changed)
}

/// `job` moved to `to` at `now`; a job that finishes with `webhooks` on gets its
/// delivery, due now.
pub fn moved(webhooks: bool, mut job: Job, to: JobStatus, now: u64, tally: &mut Tally) -> Moved {
    let from = job.status;
    if !from.finished() && to.finished() {
        tally.unfinished = tally.unfinished.saturating_sub(1);
        if webhooks {
            job.delivery = Some(Delivery::pending(now));
        }
    }
    job.status = to;
    job.updated_at = now;
    Moved {
        job,
        from: Some(from),
    }
}

/// Whether a finished job is past its `ttl`.
pub fn expired(ttl: Duration, job: &Job, now: u64) -> bool {
    job.status.finished() && job.updated_at + ttl.as_millis() as u64 <= now
}

/// Makes job `id`'s failed delivery pending again at `now` (`redeliver`).
pub fn redrive(
    tx: &Connection,
    id: &str,
    now: u64,
    webhooks: bool,
    tally: &mut Tally,
) -> rusqlite::Result<Redelivered> {
    let Some(mut job) = find(tx, id, webhooks, tally)? else {
        return Ok(Redelivered::Unknown);
    };
    let failed = job
        .delivery
        .as_mut()
        .filter(|d| d.status == DeliveryStatus::Failed);
    let Some(delivery) = failed else {
        return Ok(Redelivered::NotFailed);
    };
    delivery.redrive(now);
    rows::write(tx, &job)?;
    Ok(Redelivered::Now(Box::new(job)))
}
