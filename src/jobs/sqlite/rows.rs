//! A job's row: its columns, and the `Job` they make.

use rusqlite::{Connection, Row, params};

use crate::jobs::{Delivery, DeliveryStatus, Job, JobRequest, JobStatus};

/// The columns read, in `read`'s order.
pub const COLUMNS: &str = "id, client, status, runs, created_at, updated_at, due_at, \
                           request, result, error, delivery, run_id";

/// The job a row of `COLUMNS` holds; a row that does not decode (written by a
/// later build, or damaged) is an error, never a guess.
pub fn read(row: &Row<'_>) -> rusqlite::Result<Job> {
    let text = |index: usize| row.get::<_, Option<String>>(index);
    let json = |index: usize| -> rusqlite::Result<Option<serde_json::Value>> {
        text(index)?
            .map(|t| serde_json::from_str(&t).map_err(|e| decode(index, e)))
            .transpose()
    };
    let status: String = row.get(2)?;
    let request: String = row.get(7)?;
    let delivery = text(10)?
        .map(|t| serde_json::from_str::<Delivery>(&t).map_err(|e| decode(10, e)))
        .transpose()?;
    Ok(Job {
        id: row.get(0)?,
        client: row.get(1)?,
        status: JobStatus::from_name(&status).ok_or_else(|| decode(2, unknown(&status)))?,
        runs: row.get(3)?,
        created_at: row.get::<_, i64>(4)? as u64,
        updated_at: row.get::<_, i64>(5)? as u64,
        next_run_at: row.get::<_, Option<i64>>(6)?.map(|at| at as u64),
        request: serde_json::from_str::<JobRequest>(&request).map_err(|e| decode(7, e))?,
        result: json(8)?,
        error: json(9)?,
        delivery,
        run_id: text(11)?,
    })
}

/// Writes `job` as its row (new or replaced), with the delivery's due time.
pub fn write(tx: &Connection, job: &Job) -> rusqlite::Result<()> {
    let encode = |value: &Option<serde_json::Value>| value.as_ref().map(|v| v.to_string());
    let request = serde_json::to_string(&job.request).map_err(|e| decode(7, e))?;
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
         updated_at = ?6, due_at = ?7, result = ?9, error = ?10, delivery = ?11, \
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

fn unknown(status: &str) -> std::io::Error {
    std::io::Error::other(format!("unknown job status `{status}`"))
}
