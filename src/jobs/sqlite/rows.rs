//! A job's row: its columns, and the `Job` they make.

use rusqlite::{Connection, Row, params};

use crate::jobs::{Delivery, DeliveryStatus, Job, JobRequest, JobStatus};

/// The columns read, in `read`'s order.
pub const COLUMNS: &str = "id, client, status, runs, created_at, updated_at, due_at, \
                           request, result, error, delivery, run_id, final_event";

/// A row that was read but does not decode: written nested past what serde_json
/// reads back (by a build that did not bound it), or damaged. It is quarantined,
/// never guessed at.
#[derive(Debug)]
pub struct Unreadable {
    /// The job's id.
    pub id: String,
    /// Why it does not decode.
    pub why: String,
}

/// The job a row of `COLUMNS` holds, or why it does not decode.
pub fn read(row: &Row<'_>) -> rusqlite::Result<Result<Job, Unreadable>> {
    let id: String = row.get(0)?;
    Ok(decoded(row).map_err(|why| Unreadable { id, why }))
}

/// The row's columns as a job; an error names the column that did not decode.
fn decoded(row: &Row<'_>) -> Result<Job, String> {
    let failed = |column: &str, e: &dyn std::fmt::Display| format!("`{column}`: {e}");
    let text = |index: usize| {
        row.get::<_, Option<String>>(index)
            .map_err(|e| failed("row", &e))
    };
    let json = |index: usize, column: &str| -> Result<Option<serde_json::Value>, String> {
        text(index)?
            .map(|t| serde_json::from_str(&t).map_err(|e| failed(column, &e)))
            .transpose()
    };
    let number = |index: usize| {
        row.get::<_, Option<i64>>(index)
            .map_err(|e| failed("row", &e))
    };
    let status = text(2)?.unwrap_or_default();
    let request = text(7)?.unwrap_or_default();
    let delivery = text(10)?
        .map(|t| serde_json::from_str::<Delivery>(&t).map_err(|e| failed("delivery", &e)))
        .transpose()?;
    Ok(Job {
        id: text(0)?.unwrap_or_default(),
        client: text(1)?.unwrap_or_default(),
        status: JobStatus::from_name(&status)
            .ok_or_else(|| format!("`status`: unknown job status `{status}`"))?,
        runs: row.get(3).map_err(|e| failed("runs", &e))?,
        created_at: number(4)?.unwrap_or_default() as u64,
        updated_at: number(5)?.unwrap_or_default() as u64,
        next_run_at: number(6)?.map(|at| at as u64),
        request: serde_json::from_str::<JobRequest>(&request).map_err(|e| failed("request", &e))?,
        result: json(8, "result")?,
        error: json(9, "error")?,
        delivery,
        run_id: text(11)?,
        key: None,
        final_event: text(12)?,
    })
}

/// Writes `job` as its row (new or replaced), with the delivery's due time.
pub fn write(tx: &Connection, job: &Job) -> rusqlite::Result<()> {
    let encode = |value: &Option<serde_json::Value>| value.as_ref().map(|v| v.to_string());
    // A finished job needs no request any more: its variables (up to the body
    // limit) are not kept past its end, so the file holds results and facts.
    let request = match job.status.finished() {
        true => serde_json::to_string(&job.request.facts()),
        false => serde_json::to_string(&job.request),
    }
    .map_err(|e| decode(7, e))?;
    let delivery = job
        .delivery
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| decode(10, e))?;
    let delivery_due = job
        .delivery
        .as_ref()
        .filter(|d| d.status == DeliveryStatus::Pending)
        .map(|d| d.next_at as i64);
    let mut statement = tx.prepare_cached(
        "INSERT INTO jobs (id, client, status, runs, created_at, updated_at, due_at, request, \
         result, error, delivery, delivery_due, run_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
         ?9, ?10, ?11, ?12, ?13) ON CONFLICT(id) DO UPDATE SET status = ?3, runs = ?4, \
         updated_at = ?6, due_at = ?7, request = ?8, result = ?9, error = ?10, delivery = ?11, \
         delivery_due = ?12, run_id = ?13",
    )?;
    statement.execute(params![
        job.id,
        job.client,
        job.status.name(),
        job.runs,
        job.created_at as i64,
        job.updated_at as i64,
        job.next_run_at.map(|at| at as i64),
        request,
        encode(&job.result),
        encode(&job.error),
        delivery,
        delivery_due,
        job.run_id,
    ])?;
    Ok(())
}

fn decode(column: usize, error: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(error))
}
