//! Kept answers in the state file (`LADLE_STATE_DB`): an `answers` table written
//! through the file's one writer thread, so they survive a restart.
//!
//! At most `LADLE_CACHE_MAX_ENTRIES` are kept, the least recently used going
//! first. Recency lives in memory (a map of every kept answer's last use, read
//! from the file at open): a hit changes the map, not the file, and the uses
//! since the last write reach the file with the next answer kept. A restart
//! forgets only the order of the latest hits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, params};

use super::{AnswerCache, AnswerKey, CacheDown, Kept};
use crate::config::ConfigError;
use crate::state_file::StateFile;
use crate::wall::unix_millis;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS answers (
    hash TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    kept TEXT NOT NULL,
    used_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_by_task ON answers (task);
";

/// One kept answer's place in the order of use.
#[derive(Debug, Clone)]
struct Use {
    task: String,
    at: u64,
    /// Used since the file last heard of it.
    unwritten: bool,
}

/// Kept answers in the state file.
pub struct SqliteCache {
    file: StateFile,
    max_entries: usize,
    /// Every kept answer's last use, by hash; changed only on the writer thread.
    uses: Arc<Mutex<HashMap<String, Use>>>,
}

impl SqliteCache {
    /// The kept answers of the open state `file`, at most `max_entries`; those
    /// past their time are forgotten now.
    pub fn in_file(file: StateFile, max_entries: usize) -> Result<SqliteCache, ConfigError> {
        let now = unix_millis() as i64;
        let uses = file.call_now(move |connection| {
            connection.execute_batch(SCHEMA)?;
            connection.execute("DELETE FROM answers WHERE expires_at <= ?1", [now])?;
            let mut statement = connection.prepare("SELECT hash, task, used_at FROM answers")?;
            let rows = statement.query_map([], |row| {
                let (hash, task, at): (String, String, i64) =
                    (row.get(0)?, row.get(1)?, row.get(2)?);
                let at = at as u64;
                Ok((
                    hash,
                    Use {
                        task,
                        at,
                        unwritten: false,
                    },
                ))
            })?;
            rows.collect::<rusqlite::Result<HashMap<_, _>>>()
        })?;
        let cache = SqliteCache {
            file,
            max_entries: max_entries.max(1),
            uses: Arc::new(Mutex::new(uses)),
        };
        let (uses, max) = (cache.uses.clone(), cache.max_entries);
        cache
            .file
            .call_now(move |connection| evict(connection, &mut lock(&uses), max))?;
        Ok(cache)
    }

    fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection, &mut HashMap<String, Use>) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, CacheDown>> {
        let uses = self.uses.clone();
        let called = self
            .file
            .call(move |connection| op(connection, &mut lock(&uses)));
        Box::pin(async move { called.await.map_err(|down| CacheDown(down.0)) })
    }
}

impl AnswerCache for SqliteCache {
    fn get<'a>(&'a self, key: &'a AnswerKey) -> BoxFuture<'a, Result<Option<Kept>, CacheDown>> {
        let (hash, request) = (key.hash.clone(), key.request.clone());
        let now = unix_millis();
        self.call(move |connection, uses| {
            let text: Option<String> = connection
                .prepare_cached("SELECT kept FROM answers WHERE hash = ?1 AND expires_at > ?2")?
                .query_row(params![hash, now as i64], |row| row.get(0))
                .optional()?;
            let kept = text
                .as_deref()
                .and_then(Kept::decode)
                .filter(|kept| kept.request == request);
            if kept.is_some()
                && let Some(used) = uses.get_mut(&hash)
            {
                used.at = now;
                used.unwritten = true;
            }
            Ok(kept)
        })
    }

    fn put<'a>(
        &'a self,
        key: &'a AnswerKey,
        kept: &'a Kept,
        keep: Duration,
    ) -> BoxFuture<'a, Result<(), CacheDown>> {
        let (hash, task, text) = (key.hash.clone(), key.task.clone(), kept.encode());
        let (now, max) = (unix_millis(), self.max_entries);
        let expires = now.saturating_add(keep.as_millis() as u64);
        self.call(move |connection, uses| {
            connection
                .prepare_cached(
                    "INSERT OR REPLACE INTO answers (hash, task, kept, used_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![hash, task, text, now as i64, expires as i64])?;
            uses.insert(
                hash,
                Use {
                    task,
                    at: now,
                    unwritten: false,
                },
            );
            write_uses(connection, uses)?;
            evict(connection, uses, max)
        })
    }

    fn count<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, CacheDown>> {
        let (task, now) = (task.to_owned(), unix_millis() as i64);
        self.call(move |connection, _| {
            connection.query_row(
                "SELECT COUNT(*) FROM answers WHERE task = ?1 AND expires_at > ?2",
                params![task, now],
                |row| row.get::<_, i64>(0).map(|n| n as u64),
            )
        })
    }

    fn forget<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, CacheDown>> {
        let (task, now) = (task.to_owned(), unix_millis() as i64);
        self.call(move |connection, uses| {
            let live: i64 = connection.query_row(
                "SELECT COUNT(*) FROM answers WHERE task = ?1 AND expires_at > ?2",
                params![task, now],
                |row| row.get(0),
            )?;
            connection.execute("DELETE FROM answers WHERE task = ?1", [&task])?;
            uses.retain(|_, used| used.task != task);
            Ok(live as u64)
        })
    }
}

/// Writes the uses the file has not heard of.
fn write_uses(connection: &Connection, uses: &mut HashMap<String, Use>) -> rusqlite::Result<()> {
    let mut statement =
        connection.prepare_cached("UPDATE answers SET used_at = ?1 WHERE hash = ?2")?;
    for (hash, used) in uses.iter_mut().filter(|(_, used)| used.unwritten) {
        statement.execute(params![used.at as i64, hash])?;
        used.unwritten = false;
    }
    Ok(())
}

/// Forgets the least recently used answers past `max`.
fn evict(
    connection: &Connection,
    uses: &mut HashMap<String, Use>,
    max: usize,
) -> rusqlite::Result<()> {
    let Some(over) = uses.len().checked_sub(max).filter(|n| *n > 0) else {
        return Ok(());
    };
    let mut by_age: Vec<(u64, String)> = uses
        .iter()
        .map(|(hash, used)| (used.at, hash.clone()))
        .collect();
    by_age.select_nth_unstable(over - 1);
    let mut statement = connection.prepare_cached("DELETE FROM answers WHERE hash = ?1")?;
    for (_, hash) in by_age.into_iter().take(over) {
        statement.execute([&hash])?;
        uses.remove(&hash);
    }
    Ok(())
}

fn lock(uses: &Mutex<HashMap<String, Use>>) -> MutexGuard<'_, HashMap<String, Use>> {
    uses.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
