//! The state file (`LADLE_STATE_DB`): one SQLite connection on a writer thread of
//! its own, shared by what keeps its data there without Redis (the jobs, the
//! answer cache). This is the file's handle only, as `fleet.rs` is Redis's: each
//! store's tables and queries live with its concept.
//!
//! Every call is a closure sent to the thread; the thread runs whatever calls are
//! waiting in one transaction (each in a savepoint of its own, so a call that
//! fails leaves nothing behind) and commits it (WAL, `synchronous = FULL`: the
//! commit is on disk), and only then answers each of them. So a `202` goes out
//! after its job is durable, and fifty submits arriving together cost one fsync,
//! not fifty (group commit). The file is locked for the process's lifetime
//! (`locking_mode = EXCLUSIVE`): a second process on it stops at start-up.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use tokio::sync::oneshot;

use crate::config::ConfigError;
use crate::config::settings::invalid;

/// The most calls one transaction commits.
const MOST_PER_COMMIT: usize = 256;
/// The setting that names the file.
const KEY: &str = "LADLE_STATE_DB";

/// The file could not do what was asked: why, without its path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the state file: {0}")]
pub struct FileDown(pub String);

/// The answer a call sends once its transaction committed (or failed to).
type Answer = Box<dyn FnOnce(Result<(), String>) + Send>;
/// A call: runs inside the batch's transaction; whether it succeeded, and its
/// answer.
type Work = Box<dyn FnOnce(&Connection) -> (bool, Answer) + Send>;

/// The open, locked state file.
#[derive(Clone)]
pub struct StateFile {
    calls: mpsc::Sender<Work>,
}

impl StateFile {
    /// Opens (creating it if missing) and locks the file at `path`; `:memory:`
    /// keeps everything in memory only. Errors name `LADLE_STATE_DB`, never the
    /// path.
    pub fn open(path: &Path) -> Result<StateFile, ConfigError> {
        let connection = if path == Path::new(":memory:") {
            Connection::open_in_memory()
        } else {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            Connection::open_with_flags(path, flags)
        }
        .map_err(|e| invalid(KEY, format!("cannot open the state file: {e}")))?;
        prepare(&connection).map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                invalid(KEY, "the state file is in use by another ladle process")
            }
            _ => invalid(KEY, format!("cannot use the state file: {e}")),
        })?;
        let (calls, queue) = mpsc::channel::<Work>();
        std::thread::Builder::new()
            .name("ladle-state".into())
            .spawn(move || write_batches(connection, queue))
            .map_err(|e| invalid(KEY, format!("cannot start the state thread: {e}")))?;
        Ok(StateFile { calls })
    }

    /// Runs `op` in the writer thread's next transaction; resolves once it is
    /// committed.
    pub fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, FileDown>> {
        let (reply, answer) = oneshot::channel();
        let sent = self.send(op, move |result| {
            let _ = reply.send(result);
        });
        Box::pin(async move {
            sent?;
            answer.await.map_err(|_| stopped())?
        })
    }

    /// `call`, waited for on this thread: for start-up, before anything serves.
    pub fn call_now<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, ConfigError> {
        let (reply, answer) = mpsc::channel();
        let sent = self.send(op, move |result| {
            let _ = reply.send(result);
        });
        let answered = sent.and_then(|()| answer.recv().map_err(|_| stopped()));
        answered
            .and_then(|result| result)
            .map_err(|e| invalid(KEY, format!("cannot read the state file: {}", e.0)))
    }

    fn send<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        reply: impl FnOnce(Result<T, FileDown>) + Send + 'static,
    ) -> Result<(), FileDown> {
        let work: Work = Box::new(move |connection| {
            let result = op(connection).map_err(|e| e.to_string());
            let ok = result.is_ok();
            let answer: Answer = Box::new(move |committed: Result<(), String>| {
                reply(committed.and(result).map_err(FileDown));
            });
            (ok, answer)
        });
        self.calls.send(work).map_err(|_| stopped())
    }
}

fn stopped() -> FileDown {
    FileDown("the state thread has stopped".into())
}

/// The file's settings and its lock.
fn prepare(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(Duration::ZERO)?;
    connection.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    // Takes the exclusive lock now, not at the first write.
    connection.execute_batch("BEGIN EXCLUSIVE; COMMIT;")
}

/// The writer thread: one transaction per batch of waiting calls, each in a
/// savepoint, answered after the commit. Ends when every handle is gone.
fn write_batches(mut connection: Connection, queue: mpsc::Receiver<Work>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MOST_PER_COMMIT
            && let Ok(more) = queue.try_recv()
        {
            batch.push(more);
        }
        let mut tx = match connection.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => {
                // The calls are not run; their answers are dropped, so their
                // callers hear the thread gave up on them.
                tracing::warn!(error = %e, "the state file could not start a transaction");
                continue;
            }
        };
        let mut answers = Vec::with_capacity(batch.len());
        for work in batch {
            let Ok(mut savepoint) = tx.savepoint() else {
                continue;
            };
            let (ok, answer) = work(&savepoint);
            if !ok {
                // What the call did before it failed is undone.
                let _ = savepoint.rollback();
            }
            let _ = savepoint.commit();
            answers.push(answer);
        }
        let committed = tx.commit().map_err(|e| e.to_string());
        for answer in answers {
            answer(committed.clone());
        }
    }
}
