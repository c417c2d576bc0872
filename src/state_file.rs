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
//!
//! The file is bounded: `LADLE_STATE_MAX_BYTES` is checked before what would
//! grow it (`has_room`), pages freed by expiry are given back to the disk
//! (incremental vacuum, `reclaim`), and the write-ahead log is cut back to
//! `WAL_KEPT_BYTES` after each checkpoint.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use tokio::sync::oneshot;

use crate::config::ConfigError;
use crate::config::settings::invalid;
use crate::store_down::Cause;

/// The most calls one transaction commits.
const MOST_PER_COMMIT: usize = 256;
/// The setting that names the file.
const KEY: &str = "LADLE_STATE_DB";
/// What the write-ahead log keeps on disk after a checkpoint.
const WAL_KEPT_BYTES: i64 = 4 << 20;
/// Free pages worth giving back to the disk.
const RECLAIM_PAST_BYTES: i64 = 8 << 20;

/// The answer a call sends once its transaction committed (or failed to).
type Answer = Box<dyn FnOnce(Result<(), String>) + Send>;
/// A call: runs inside the batch's transaction, and says how it went.
type Work = Box<dyn FnOnce(&Connection) -> Done + Send>;

/// How a call went in its savepoint.
struct Done {
    /// Whether it succeeded (else what it did is undone).
    ok: bool,
    /// Its answer, given once the batch committed (or at once, for a read).
    answer: Answer,
    /// A read: answered without waiting for the commit, which it does not need
    /// (a full disk fails writes, not reads).
    read: bool,
}

/// Why the file cannot take writes, while that lasts.
type Failing = Arc<Mutex<Option<String>>>;

/// The open, locked state file.
#[derive(Clone)]
pub struct StateFile {
    calls: mpsc::Sender<Work>,
    failing: Failing,
    /// Where it is (`None` in memory), for its size on disk.
    path: Option<std::path::PathBuf>,
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
        .map_err(|e| invalid(KEY, format!("cannot open the state file: {}", code(&e))))?;
        prepare(&connection).map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                invalid(KEY, "the state file is in use by another ladle process")
            }
            _ => invalid(KEY, format!("cannot use the state file: {}", code(&e))),
        })?;
        let (calls, queue) = mpsc::channel::<Work>();
        let failing = Failing::default();
        let told = failing.clone();
        std::thread::Builder::new()
            .name("ladle-state".into())
            .spawn(move || write_batches(connection, queue, &told))
            .map_err(|e| invalid(KEY, format!("cannot start the state thread: {e}")))?;
        let path = (path != Path::new(":memory:")).then(|| path.to_path_buf());
        Ok(StateFile {
            calls,
            failing,
            path,
        })
    }

    /// The free space of the file's folder for an unprivileged writer (`None` in
    /// memory or when it cannot be read): what the file and its log may grow into.
    pub fn free_bytes(&self) -> Option<u64> {
        let path = self.path.as_ref()?;
        let folder = path
            .parent()
            .filter(|folder| !folder.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let stat = rustix::fs::statvfs(folder).ok()?;
        Some(stat.f_bavail.saturating_mul(stat.f_frsize))
    }

    /// Why the file cannot take writes (a full disk, an I/O error), from the
    /// last write that failed until one succeeds.
    pub fn failing(&self) -> Option<String> {
        self.failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The file's size on disk with its write-ahead log, as the operating system
    /// sees it (`None` in memory or when it cannot be read).
    pub fn disk_bytes(&self) -> Option<u64> {
        let path = self.path.as_ref()?;
        let main = std::fs::metadata(path).ok()?.len();
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        Some(main + std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0))
    }

    /// Runs `op` in the writer thread's next transaction; resolves once it is
    /// committed.
    pub fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, Cause>> {
        self.ask(op, false)
    }

    /// Runs `op`, which only reads, in the writer thread's next transaction;
    /// resolves as soon as it ran, without waiting for (or depending on) the
    /// batch's commit.
    pub fn read<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, Cause>> {
        self.ask(op, true)
    }

    fn ask<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        read: bool,
    ) -> BoxFuture<'static, Result<T, Cause>> {
        let (reply, answer) = oneshot::channel();
        let sent = self.send(op, read, move |result| {
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
        let sent = self.send(op, false, move |result| {
            let _ = reply.send(result);
        });
        let answered = sent.and_then(|()| answer.recv().map_err(|_| stopped()));
        answered
            .and_then(|result| result)
            .map_err(|cause| invalid(KEY, format!("cannot read it at start-up: {cause}")))
    }

    fn send<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        read: bool,
        reply: impl FnOnce(Result<T, Cause>) + Send + 'static,
    ) -> Result<(), Cause> {
        let failing = self.failing.clone();
        let work: Work = Box::new(move |connection| {
            let result = op(connection).map_err(|e| {
                if let Some(why) = storage_failure(&e) {
                    *failing.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
                }
                e.to_string()
            });
            let ok = result.is_ok();
            let answer: Answer = Box::new(move |committed: Result<(), String>| {
                reply(committed.and(result).map_err(Cause::File));
            });
            Done { ok, answer, read }
        });
        self.calls.send(work).map_err(|_| stopped())
    }
}

/// Why the file cannot take writes, if `error` says so: the storage under it
/// (full, failing, read-only), not the call.
fn storage_failure(error: &rusqlite::Error) -> Option<String> {
    use rusqlite::ErrorCode::{CannotOpen, DiskFull, ReadOnly, SystemIoFailure};
    match error.sqlite_error_code()? {
        code @ (DiskFull | SystemIoFailure | ReadOnly | CannotOpen) => Some(format!("{code:?}")),
        _ => None,
    }
}

/// What went wrong, by SQLite's code: its messages may quote the file's path.
fn code(error: &rusqlite::Error) -> String {
    match error.sqlite_error_code() {
        Some(code) => format!("{code:?}"),
        None => "not a usable SQLite file".to_owned(),
    }
}

fn stopped() -> Cause {
    Cause::Stopped
}

/// Whether `adding` more bytes keep the file's live pages (those not free for
/// reuse) within `max`.
pub fn has_room(connection: &Connection, max: u64, adding: usize) -> rusqlite::Result<bool> {
    // Asked on every write that adds a row: one statement, parsed once.
    let (pages, free, size): (i64, i64, i64) = connection
        .prepare_cached(
            "SELECT page_count, freelist_count, page_size \
             FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let live = (pages - free).max(0) as u64 * size.max(0) as u64;
    Ok(live.saturating_add(adding as u64) <= max)
}

/// Gives the file's free pages back to the disk once they are worth it.
pub fn reclaim(connection: &Connection) -> rusqlite::Result<()> {
    let pragma = |name: &str| -> rusqlite::Result<i64> {
        connection.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
    };
    if pragma("freelist_count")? * pragma("page_size")? > RECLAIM_PAST_BYTES {
        // Stepped to its end: each step frees a page, and it may report rows.
        let mut vacuum = connection.prepare("PRAGMA incremental_vacuum")?;
        let mut steps = vacuum.query([])?;
        while steps.next()?.is_some() {}
    }
    Ok(())
}

/// The file's settings and its lock.
fn prepare(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(Duration::ZERO)?;
    connection.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.pragma_update(None, "journal_size_limit", WAL_KEPT_BYTES)?;
    // Takes the exclusive lock now, not at the first write.
    connection.execute_batch("BEGIN EXCLUSIVE; COMMIT;")?;
    // Free pages can be given back only in incremental mode; a file made by an
    // earlier build is rewritten in it once (a new one is made in it).
    let mode: i64 = connection.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
    if mode != 2 {
        connection.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")?;
    }
    Ok(())
}

/// How often the write-ahead log is folded into the file and cut to nothing
/// (and at once when the writer is idle for as long): SQLite's own checkpoint
/// waits for ~4 MiB of log, which a small volume may not have to spare.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// The writer thread: one transaction per batch of waiting calls, each in a
/// savepoint, answered after the commit; a checkpoint at most every
/// `CHECKPOINT_EVERY` while there are commits. Ends when every handle is gone.
fn write_batches(mut connection: Connection, queue: mpsc::Receiver<Work>, failing: &Failing) {
    let mut checkpointed = tokio::time::Instant::now();
    let mut dirty = false;
    loop {
        let first = match queue.recv_timeout(CHECKPOINT_EVERY) {
            Ok(first) => first,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                checkpoint(&connection, &mut dirty, &mut checkpointed);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
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
        let changes = tx.total_changes();
        for work in batch {
            let Ok(mut savepoint) = tx.savepoint() else {
                continue;
            };
            let done = work(&savepoint);
            if !done.ok {
                // What the call did before it failed is undone.
                let _ = savepoint.rollback();
            }
            let _ = savepoint.commit();
            match done.read {
                true => (done.answer)(Ok(())),
                false => answers.push(done.answer),
            }
        }
        let wrote = tx.total_changes() != changes;
        let committed = tx.commit();
        let mut told = failing.lock().unwrap_or_else(PoisonError::into_inner);
        match &committed {
            Err(e) => *told = Some(storage_failure(e).unwrap_or_else(|| code(e))),
            // A write went through: the storage takes writes again.
            Ok(()) if wrote => *told = None,
            Ok(()) => {}
        }
        drop(told);
        let committed = committed.map_err(|e| e.to_string());
        for answer in answers {
            answer(committed.clone());
        }
        dirty = true;
        if checkpointed.elapsed() >= CHECKPOINT_EVERY {
            checkpoint(&connection, &mut dirty, &mut checkpointed);
        }
    }
}

/// Folds the log into the file and cuts it to nothing, if anything was
/// committed since the last time.
fn checkpoint(connection: &Connection, dirty: &mut bool, at: &mut tokio::time::Instant) {
    if !*dirty {
        return;
    }
    *at = tokio::time::Instant::now();
    match connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        Ok(()) => *dirty = false,
        Err(e) => tracing::warn!(error = %e, "the state file's log could not be checkpointed"),
    }
}
