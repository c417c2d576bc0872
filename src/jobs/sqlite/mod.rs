//! Jobs in one SQLite file (`LADLE_STATE_DB`), for a single process.
//!
//! One thread owns the connection. Every call is a closure sent to it; the thread
//! runs whatever calls are waiting in one transaction and commits it (WAL,
//! `synchronous = FULL`: the commit is on disk), and only then answers each of
//! them. So a `202` goes out after its job is durable, and fifty submits arriving
//! together cost one fsync, not fifty (group commit). The file is locked for the
//! process's lifetime (`locking_mode = EXCLUSIVE`): a second process on it stops
//! at start-up.

mod ops;
mod rows;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use super::StoreDown;
use crate::config::ConfigError;
use crate::config::settings::invalid;

/// The most calls one transaction commits.
const MOST_PER_COMMIT: usize = 256;

/// What the writer thread knows besides the file: the unfinished jobs (for
/// `LADLE_JOB_MAX_QUEUED`, without a count per submit), and whether the runs cut
/// by the last process's end were recovered yet.
#[derive(Debug, Default)]
struct Tally {
    unfinished: u64,
    /// The runs the last process held when it ended, recovered at open: the first
    /// sweep reports them.
    recovered: Vec<super::Moved>,
}

/// The answer a call sends once its transaction committed (or failed to).
type Answer = Box<dyn FnOnce(Result<(), String>) + Send>;
/// A call: runs inside the batch's transaction, and gives back its answer.
type Work = Box<dyn FnOnce(&Transaction<'_>, &mut Tally) -> Answer + Send>;

/// Jobs in a SQLite file (or in memory, for `:memory:`).
pub struct SqliteJobs {
    calls: mpsc::Sender<Work>,
    /// Whether finished jobs get a webhook delivery.
    webhooks: bool,
    /// How long a finished job can still be read.
    ttl: Duration,
}

impl SqliteJobs {
    /// Opens (creating it if missing) and locks the file at `path`; `:memory:`
    /// keeps the jobs in memory only. The runs the last process on the file held
    /// when it ended were cut: they are queued again, or failed when they used
    /// all `max_runs`.
    pub fn open(
        path: &Path,
        webhooks: bool,
        ttl: Duration,
        max_runs: u32,
    ) -> Result<SqliteJobs, ConfigError> {
        let key = "LADLE_STATE_DB";
        let mut connection = if path == Path::new(":memory:") {
            Connection::open_in_memory()
        } else {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            Connection::open_with_flags(path, flags)
        }
        .map_err(|e| invalid(key, format!("cannot open the state file: {e}")))?;
        prepare(&connection).map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                invalid(key, "the state file is in use by another ladle process")
            }
            _ => invalid(key, format!("cannot use the state file: {e}")),
        })?;
        let mut tally = Tally::default();
        let recovered = ops::recover(&mut connection, webhooks, max_runs, &mut tally);
        tally.recovered =
            recovered.map_err(|e| invalid(key, format!("cannot read the state file: {e}")))?;
        tally.unfinished = ops::unfinished(&connection)
            .map_err(|e| invalid(key, format!("cannot read the state file: {e}")))?;
        let (calls, queue) = mpsc::channel::<Work>();
        std::thread::Builder::new()
            .name("ladle-state".into())
            .spawn(move || write_batches(connection, queue, tally))
            .map_err(|e| invalid(key, format!("cannot start the state thread: {e}")))?;
        Ok(SqliteJobs {
            calls,
            webhooks,
            ttl,
        })
    }

    /// Runs `op` in the writer thread's next transaction; resolves once it is
    /// committed.
    fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Transaction<'_>, &mut Tally) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, StoreDown>> {
        let (reply, answer) = oneshot::channel();
        let work: Work = Box::new(move |tx, tally| {
            let result = op(tx, tally).map_err(|e| e.to_string());
            Box::new(move |committed: Result<(), String>| {
                let _ = reply.send(committed.and(result));
            })
        });
        let sent = self.calls.send(work);
        Box::pin(async move {
            sent.map_err(|_| StoreDown("the state thread has stopped".into()))?;
            answer
                .await
                .map_err(|_| StoreDown("the state thread has stopped".into()))?
                .map_err(StoreDown)
        })
    }
}

/// The file's settings, its lock and its schema.
fn prepare(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(Duration::ZERO)?;
    connection.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    // Takes the exclusive lock now, not at the first write.
    connection.execute_batch("BEGIN EXCLUSIVE; COMMIT;")?;
    connection.execute_batch(ops::SCHEMA)
}

/// The writer thread: one transaction per batch of waiting calls, answered after
/// its commit. Ends when the store is gone.
fn write_batches(mut connection: Connection, queue: mpsc::Receiver<Work>, mut tally: Tally) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MOST_PER_COMMIT
            && let Ok(more) = queue.try_recv()
        {
            batch.push(more);
        }
        let tx = match connection.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => {
                let why = e.to_string();
                for work in batch {
                    fail_alone(work, &why);
                }
                continue;
            }
        };
        let answers: Vec<Answer> = batch
            .into_iter()
            .map(|work| work(&tx, &mut tally))
            .collect();
        let committed = tx.commit().map_err(|e| e.to_string());
        if committed.is_err() {
            // What the batch counted did not happen.
            tally.unfinished = ops::unfinished(&connection).unwrap_or(tally.unfinished);
        }
        for answer in answers {
            answer(committed.clone());
        }
    }
}

/// Answers a call that could not be run, with `why`.
fn fail_alone(work: Work, why: &str) {
    // The call is not run; its answer is dropped, so its caller hears the thread
    // gave up on it.
    drop(work);
    tracing::warn!(error = %why, "the state file could not start a transaction");
}

#[cfg(test)]
mod tests;
