//! Jobs in the state file (`LADLE_STATE_DB`), for a single process: a `jobs`
//! table written through the file's one writer thread (`state_file`), so a submit
//! is answered after its commit and concurrent submits share one.
//!
//! The file is locked for the process's lifetime, so what it says is `running`
//! when it is opened was cut by the last process's end, and a run needs no lease.

mod changes;
mod lookups;
mod ops;
mod quarantine;
mod rows;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::Connection;

use super::StoreDown;
use crate::config::ConfigError;
use crate::engine::metrics::Metrics;
use crate::state_file::StateFile;

/// What the store keeps beside the file, changed only by calls on the writer
/// thread: the unfinished jobs (for `LADLE_JOB_MAX_QUEUED`, without a count per
/// submit), the runs cut by the last process's end and the rows ended because
/// they could not be read, which the next sweep reports.
struct Tally {
    unfinished: u64,
    recovered: Vec<super::Moved>,
    quarantined: Vec<super::Moved>,
    /// Counts what the file could not do (`ladle_store_errors_total`).
    metrics: Metrics,
    /// A call failed, so what it counted may not have happened: count again.
    stale: bool,
}

/// Jobs in the state file (or in memory, for `:memory:`).
pub struct SqliteJobs {
    file: StateFile,
    tally: Arc<Mutex<Tally>>,
    /// Whether finished jobs get a webhook delivery.
    webhooks: bool,
    /// How long a finished job can still be read.
    ttl: Duration,
    /// `LADLE_STATE_MAX_BYTES`: no submit grows the file past it.
    max_bytes: u64,
}

impl SqliteJobs {
    /// The jobs of the open state `file`. The runs the last process on it held
    /// when it ended were cut: they are queued again, or failed when they used
    /// all `max_runs`.
    pub fn in_file(
        file: StateFile,
        webhooks: bool,
        ttl: Duration,
        max_runs: u32,
        max_bytes: u64,
        metrics: Metrics,
    ) -> Result<SqliteJobs, ConfigError> {
        let tally = file.call_now(move |connection| {
            connection.execute_batch(lookups::SCHEMA)?;
            lookups::add_later_columns(connection)?;
            let mut tally = Tally {
                unfinished: 0,
                recovered: Vec::new(),
                quarantined: Vec::new(),
                metrics,
                stale: false,
            };
            tally.recovered = changes::recover(connection, webhooks, max_runs, &mut tally)?;
            tally.unfinished = lookups::unfinished(connection)?;
            Ok(tally)
        })?;
        Ok(SqliteJobs {
            file,
            tally: Arc::new(Mutex::new(tally)),
            webhooks,
            ttl,
            max_bytes,
        })
    }

    /// Runs `op` (the store's call `name`) in the file's next transaction, with
    /// the tally; resolves once it is committed.
    fn call<T: Send + 'static>(
        &self,
        name: &'static str,
        op: impl FnOnce(&Connection, &mut Tally) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, StoreDown>> {
        self.ask(name, op, false)
    }

    /// `call` for a read: answered as soon as it ran, whatever the batch's
    /// commit does (a full disk refuses writes only).
    fn read<T: Send + 'static>(
        &self,
        name: &'static str,
        op: impl FnOnce(&Connection, &mut Tally) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, StoreDown>> {
        self.ask(name, op, true)
    }

    fn ask<T: Send + 'static>(
        &self,
        name: &'static str,
        op: impl FnOnce(&Connection, &mut Tally) -> rusqlite::Result<T> + Send + 'static,
        read: bool,
    ) -> BoxFuture<'static, Result<T, StoreDown>> {
        let tally = self.tally.clone();
        let op = move |connection: &Connection| {
            let mut tally = lock(&tally);
            if tally.stale {
                tally.unfinished = lookups::unfinished(connection)?;
                tally.stale = false;
            }
            let result = op(connection, &mut tally);
            tally.stale |= result.is_err();
            result
        };
        let called = match read {
            true => self.file.read(op),
            false => self.file.call(op),
        };
        let tally = self.tally.clone();
        Box::pin(async move {
            called.await.map_err(|cause| {
                // The batch did not commit: what it counted did not happen.
                let mut tally = lock(&tally);
                tally.stale = true;
                tally.metrics.store_error("commit");
                let down = StoreDown::new(name, cause);
                tracing::error!(error = %down, "the state file could not do a job store's call");
                down
            })
        })
    }
}

fn lock(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
