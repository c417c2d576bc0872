//! How the job store finds its rows: the schema, the counts of unfinished jobs,
//! and the reads that quarantine a row that cannot be read back
//! (`quarantine`), so no caller of them ever meets one.

use rusqlite::{Connection, OptionalExtension, params};

use super::Tally;
use super::quarantine::quarantine;
use super::rows::{self, COLUMNS, Unreadable};
use crate::jobs::Job;

/// The schema; `seq` keeps creation order (jobs start oldest first).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    client TEXT NOT NULL,
    status TEXT NOT NULL,
    runs INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    due_at INTEGER,
    request TEXT NOT NULL,
    result TEXT,
    error TEXT,
    delivery TEXT,
    delivery_due INTEGER,
    run_id TEXT,
    final_event TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, seq);
CREATE INDEX IF NOT EXISTS jobs_by_delivery ON jobs (delivery_due) WHERE delivery_due IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_by_client ON jobs (client, status);
CREATE TABLE IF NOT EXISTS submit_keys (
    key TEXT PRIMARY KEY,
    fingerprint INTEGER NOT NULL,
    job_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
";

pub const UNFINISHED: &str = "status IN ('queued', 'running', 'retry_wait')";

/// The unfinished jobs in the file.
pub fn unfinished(connection: &Connection) -> rusqlite::Result<u64> {
    connection.query_row(
        &format!("SELECT COUNT(*) FROM jobs WHERE {UNFINISHED}"),
        [],
        |row| row.get::<_, i64>(0).map(|n| n as u64),
    )
}

/// The unfinished jobs of `client`, counted up to `most`.
pub fn client_unfinished(tx: &Connection, client: &str, most: u32) -> rusqlite::Result<u64> {
    tx.prepare_cached(&format!(
        "SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE client = ?1 AND {UNFINISHED} LIMIT ?2)"
    ))?
    .query_row(params![client, most], |row| row.get::<_, i64>(0))
    .map(|n| n as u64)
}

/// The job `id`, of whatever client (quarantined first if its row cannot be
/// read).
pub fn find(
    tx: &Connection,
    id: &str,
    webhooks: bool,
    tally: &mut Tally,
) -> rusqlite::Result<Option<Job>> {
    let found = tx
        .prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"))?
        .query_row([id], rows::read)
        .optional()?;
    match found {
        None => Ok(None),
        Some(Ok(job)) => Ok(Some(job)),
        Some(Err(bad)) => quarantine(tx, bad, webhooks, tally),
    }
}

/// The jobs a `WHERE` clause (with its order) picks; a row that cannot be read is
/// quarantined and left out.
pub fn select(
    tx: &Connection,
    clause: &str,
    at: i64,
    webhooks: bool,
    tally: &mut Tally,
) -> rusqlite::Result<Vec<Job>> {
    let mut statement = tx.prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE {clause}"))?;
    let read: Vec<Result<Job, Unreadable>> = statement
        .query_map([at], rows::read)?
        .collect::<rusqlite::Result<_>>()?;
    let mut jobs = Vec::with_capacity(read.len());
    for row in read {
        match row {
            Ok(job) => jobs.push(job),
            Err(bad) => drop(quarantine(tx, bad, webhooks, tally)?),
        }
    }
    Ok(jobs)
}

/// Adds the columns a later build added to a file an earlier one made (the
/// final event's id, contract 11.2).
pub fn add_later_columns(connection: &Connection) -> rusqlite::Result<()> {
    let has = connection
        .prepare("SELECT final_event FROM jobs LIMIT 0")
        .is_ok();
    if !has {
        connection.execute_batch("ALTER TABLE jobs ADD COLUMN final_event TEXT")?;
    }
    Ok(())
}
