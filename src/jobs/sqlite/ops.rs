//! The job store's calls, as SQL run by the writer thread.

use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{OptionalExtension, params};

use super::SqliteJobs;
use super::changes::{expired, moved, redrive};
use super::lookups::{UNFINISHED, client_unfinished, find, select};
use super::quarantine::quarantine;
use super::rows::{self, COLUMNS};
use crate::jobs::{
    Canceled, Counts, Delivery, Job, JobStatus, JobStore, Moved, Redelivered, RunEnd, StoreDown,
    Submitted,
};
use crate::state_file;

impl JobStore for SqliteJobs {
    fn submit(
        &self,
        job: Job,
        max_queued: u64,
        client_max: Option<u32>,
    ) -> BoxFuture<'_, Result<Submitted, StoreDown>> {
        let (max_bytes, adding) = (self.max_bytes, job_bytes(&job));
        self.call("submit", move |tx, tally| {
            if tally.unfinished >= max_queued {
                return Ok(Submitted::Full);
            }
            if !state_file::has_room(tx, max_bytes, adding)? {
                return Ok(Submitted::FileFull);
            }
            if let Some(most) = client_max
                && client_unfinished(tx, &job.client, most)? >= u64::from(most)
            {
                return Ok(Submitted::ClientFull);
            }
            rows::write(tx, &job)?;
            // In the job's own commit: a resubmit after any crash finds it.
            if let Some(key) = &job.key {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO submit_keys (key, fingerprint, job_id, expires_at) \
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![
                    key.key,
                    key.fingerprint as i64,
                    job.id,
                    key.until as i64
                ])?;
            }
            tally.unfinished += 1;
            Ok(Submitted::Accepted(job))
        })
    }

    fn keyed<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<(u64, String)>, StoreDown>> {
        let (key, now) = (key.to_owned(), crate::wall::unix_millis() as i64);
        self.read("keyed", move |tx, _| {
            tx.prepare_cached(
                "SELECT fingerprint, job_id FROM submit_keys WHERE key = ?1 AND expires_at > ?2",
            )?
            .query_row(params![key, now], |row| {
                Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?))
            })
            .optional()
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
    ) -> BoxFuture<'a, Result<Option<Job>, StoreDown>> {
        let (id, client, ttl) = (id.to_owned(), client.to_owned(), self.ttl);
        let (now, webhooks) = (crate::wall::unix_millis(), self.webhooks);
        self.read("get", move |tx, tally| {
            let found = find(tx, &id, webhooks, tally)?;
            Ok(found.filter(|job| job.client == client && !expired(ttl, job, now)))
        })
    }

    fn cancel<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Canceled, StoreDown>> {
        let (id, client) = (id.to_owned(), client.to_owned());
        let (ttl, webhooks) = (self.ttl, self.webhooks);
        self.call("cancel", move |tx, tally| {
            let Some(job) = find(tx, &id, webhooks, tally)?.filter(|j| j.client == client) else {
                return Ok(Canceled::Unknown);
            };
            if expired(ttl, &job, now) {
                return Ok(Canceled::Unknown);
            }
            if job.status.finished() {
                return Ok(Canceled::Finished(job));
            }
            let moved = moved(webhooks, job, JobStatus::Canceled, now, tally);
            rows::write(tx, &moved.job)?;
            Ok(Canceled::Now(moved))
        })
    }

    fn keep_finished(&self, job: Job) -> BoxFuture<'_, Result<bool, StoreDown>> {
        let (max_bytes, adding) = (self.max_bytes, job_bytes(&job));
        self.call("keep_finished", move |tx, _| {
            if !state_file::has_room(tx, max_bytes, adding)? {
                return Ok(false);
            }
            rows::write(tx, &job)?;
            Ok(true)
        })
    }

    fn forget<'a>(
        &'a self,
        id: &'a str,
        client: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreDown>> {
        let (id, client, webhooks) = (id.to_owned(), client.to_owned(), self.webhooks);
        self.call("forget", move |tx, tally| {
            let Some(job) = find(tx, &id, webhooks, tally)?.filter(|j| j.client == client) else {
                return Ok(false);
            };
            tx.prepare_cached("DELETE FROM jobs WHERE id = ?1")?
                .execute(params![id])?;
            if !job.status.finished() {
                tally.unfinished = tally.unfinished.saturating_sub(1);
            }
            Ok(true)
        })
    }

    fn claim<'a>(
        &'a self,
        now: u64,
        _lease: Duration,
        busy: &'a [String],
    ) -> BoxFuture<'a, Result<Option<Moved>, StoreDown>> {
        let (webhooks, busy) = (self.webhooks, busy.to_vec());
        self.call("claim", move |tx, tally| {
            // The busy clients' jobs wait their turn; the others' are taken.
            let marks = vec!["?"; busy.len()].join(", ");
            let query = format!(
                "SELECT {COLUMNS} FROM jobs WHERE status = 'queued' AND client NOT IN ({marks}) \
                 ORDER BY seq LIMIT 1"
            );
            let mut job = loop {
                let oldest = tx
                    .prepare_cached(&query)?
                    .query_row(rusqlite::params_from_iter(&busy), rows::read)
                    .optional()?;
                match oldest {
                    None => return Ok(None),
                    Some(Ok(job)) => break job,
                    // Ended as failed: the next queued job is looked at.
                    Some(Err(bad)) => drop(quarantine(tx, bad, webhooks, tally)?),
                }
            };
            job.runs += 1;
            job.run_id = Some(uuid::Uuid::new_v4().hyphenated().to_string());
            let moved = moved(webhooks, job, JobStatus::Running, now, tally);
            rows::write(tx, &moved.job)?;
            Ok(Some(moved))
        })
    }

    fn finish<'a>(
        &'a self,
        id: &'a str,
        run: u32,
        end: RunEnd,
        now: u64,
    ) -> BoxFuture<'a, Result<Option<Moved>, StoreDown>> {
        let (id, webhooks) = (id.to_owned(), self.webhooks);
        self.call("finish", move |tx, tally| {
            let Some(mut job) = find(tx, &id, webhooks, tally)?
                .filter(|j| j.status == JobStatus::Running && j.runs == run)
            else {
                return Ok(None);
            };
            let to = match end {
                RunEnd::Succeeded(result) => {
                    job.result = Some(result);
                    JobStatus::Succeeded
                }
                RunEnd::Waiting { error, until } => {
                    job.error = Some(error);
                    job.next_run_at = Some(until);
                    JobStatus::RetryWait
                }
                RunEnd::Failed(error) => {
                    job.error = Some(error);
                    JobStatus::Failed
                }
                RunEnd::Canceled => JobStatus::Canceled,
            };
            let moved = moved(webhooks, job, to, now, tally);
            rows::write(tx, &moved.job)?;
            Ok(Some(moved))
        })
    }

    fn renew<'a>(
        &'a self,
        runs: &'a [(String, u32)],
        _now: u64,
        _lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<String>, StoreDown>> {
        // One process holds the file: a run needs no lease, only the news that
        // its job was canceled meanwhile.
        let (runs, webhooks) = (runs.to_vec(), self.webhooks);
        self.call("renew", move |tx, tally| {
            let mut gone = Vec::new();
            for (id, run) in runs {
                let held = find(tx, &id, webhooks, tally)?
                    .is_some_and(|job| job.status == JobStatus::Running && job.runs == run);
                if !held {
                    gone.push(id);
                }
            }
            Ok(gone)
        })
    }

    fn sweep(&self, now: u64, _max_runs: u32) -> BoxFuture<'_, Result<Vec<Moved>, StoreDown>> {
        let webhooks = self.webhooks;
        self.call("sweep", move |tx, tally| {
            let due = select(
                tx,
                "status = 'retry_wait' AND due_at <= ?1 ORDER BY seq",
                now as i64,
                webhooks,
                tally,
            )?;
            // Runs cut by the last process's end were ended at open, and rows
            // that could not be read were ended where they were found: told once.
            let mut changed = std::mem::take(&mut tally.recovered);
            changed.append(&mut tally.quarantined);
            for job in due {
                let mut moved = moved(webhooks, job, JobStatus::Queued, now, tally);
                moved.job.next_run_at = None;
                rows::write(tx, &moved.job)?;
                changed.push(moved);
            }
            Ok(changed)
        })
    }

    fn expire(&self, now: u64, ttl: Duration) -> BoxFuture<'_, Result<u64, StoreDown>> {
        let before = now.saturating_sub(ttl.as_millis() as u64) as i64;
        self.call("expire", move |tx, _| {
            let gone = tx.execute(
                "DELETE FROM jobs WHERE status IN ('succeeded', 'failed', 'canceled') \
                 AND updated_at <= ?1 AND delivery_due IS NULL",
                params![before],
            )?;
            tx.execute(
                "DELETE FROM submit_keys WHERE expires_at <= ?1",
                params![now as i64],
            )?;
            state_file::reclaim(tx)?;
            Ok(gone as u64)
        })
    }

    fn unhealthy(&self) -> Option<String> {
        self.file.failing()
    }

    fn counts(&self) -> BoxFuture<'_, Result<Counts, StoreDown>> {
        let file = self.file.clone();
        let counted = self.read("counts", |tx, _| {
            let mut counts = Counts::default();
            let mut statement = tx.prepare_cached(&format!(
                "SELECT status, COUNT(*) FROM jobs WHERE {UNFINISHED} GROUP BY status"
            ))?;
            let rows = statement.query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)? as u64))
            })?;
            for row in rows {
                match row? {
                    (status, n) if status == "queued" => counts.queued = n,
                    (status, n) if status == "running" => counts.running = n,
                    (_, n) => counts.retry_wait = n,
                }
            }
            // By the status index: the first queued job by order of creation.
            let mut oldest = tx.prepare_cached(
                "SELECT created_at FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1",
            )?;
            counts.oldest_queued = oldest
                .query_map([], |row| row.get::<_, i64>(0))?
                .next()
                .transpose()?
                .map(|at| at.max(0) as u64);
            Ok(counts)
        });
        Box::pin(async move {
            let mut counts = counted.await?;
            counts.state_bytes = file.disk_bytes();
            counts.state_free_bytes = file.free_bytes();
            Ok(counts)
        })
    }

    fn due_deliveries(
        &self,
        now: u64,
        lease: Duration,
        most: usize,
    ) -> BoxFuture<'_, Result<Vec<Job>, StoreDown>> {
        let held_until = (now + lease.as_millis() as u64) as i64;
        let webhooks = self.webhooks;
        self.call("due_deliveries", move |tx, tally| {
            let clause = format!("delivery_due <= ?1 ORDER BY delivery_due LIMIT {most}");
            let due = select(tx, &clause, now as i64, webhooks, tally)?;
            for job in &due {
                tx.execute(
                    "UPDATE jobs SET delivery_due = ?1 WHERE id = ?2",
                    params![held_until, job.id],
                )?;
            }
            Ok(due)
        })
    }

    fn failed_deliveries(&self, most: usize) -> BoxFuture<'_, Result<Vec<Job>, StoreDown>> {
        let webhooks = self.webhooks;
        self.read("failed_deliveries", move |tx, tally| {
            let clause = format!(
                "delivery IS NOT NULL AND json_extract(delivery, '$.status') = 'failed' \
                 AND ?1 = ?1 ORDER BY updated_at DESC LIMIT {most}"
            );
            select(tx, &clause, 0, webhooks, tally)
        })
    }

    fn redeliver<'a>(
        &'a self,
        id: &'a str,
        now: u64,
    ) -> BoxFuture<'a, Result<Redelivered, StoreDown>> {
        let (id, webhooks) = (id.to_owned(), self.webhooks);
        self.call("redeliver", move |tx, tally| {
            redrive(tx, &id, now, webhooks, tally)
        })
    }

    fn keep_final_event<'a>(
        &'a self,
        id: &'a str,
        event: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreDown>> {
        let (id, event) = (id.to_owned(), event.to_owned());
        self.call("keep_final_event", move |tx, _| {
            tx.prepare_cached("UPDATE jobs SET final_event = ?2 WHERE id = ?1")?
                .execute(params![id, event])?;
            Ok(())
        })
    }

    fn delivered<'a>(
        &'a self,
        id: &'a str,
        delivery: Delivery,
    ) -> BoxFuture<'a, Result<(), StoreDown>> {
        let (id, webhooks) = (id.to_owned(), self.webhooks);
        self.call("delivered", move |tx, tally| {
            if let Some(mut job) = find(tx, &id, webhooks, tally)? {
                job.delivery = Some(delivery);
                rows::write(tx, &job)?;
            }
            Ok(())
        })
    }
}

/// About what a job's row adds to the state file: its request's and result's
/// text are most of it.
fn job_bytes(job: &Job) -> usize {
    let text = |value: Option<&serde_json::Value>| value.map_or(0, |v| v.to_string().len());
    serde_json::to_vec(&job.request).map_or(0, |text| text.len()) + text(job.result.as_ref())
}
