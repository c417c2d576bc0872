//! Kept answers in the state file (`LADLE_STATE_DB`): an `answers` table written
//! through the file's one writer thread, so they survive a restart.
//!
//! At most `LADLE_CACHE_MAX_ENTRIES` are kept, the least recently used going
//! first. Recency lives in memory (a map of every kept answer's last use, read
//! from the file at open): a hit changes the map, not the file, and the uses
//! since the last write reach the file with the next answer kept. A restart
//! forgets only the order of the latest hits.
//!
//! The answers used last are also held decoded in memory (`Hot`, at most
//! `HOT_BYTES` of them): a hit on one of those is answered on the request's own
//! thread, without a trip to the file's. One process owns the file, so what is in
//! memory is what is in the file.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, params};

use super::{AnswerCache, AnswerKey, Kept};
use crate::config::ConfigError;
use crate::state_file::StateFile;
use crate::store_down::StoreDown;
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

/// The most bytes (of their stored encoding) the decoded answers in memory hold.
const HOT_BYTES: usize = 4 << 20;

/// One kept answer's place in the order of use.
#[derive(Debug, Clone)]
struct Use {
    task: String,
    at: u64,
    /// Used since the file last heard of it.
    unwritten: bool,
}

/// A decoded answer held in memory.
#[derive(Debug, Clone)]
struct HotAnswer {
    kept: Arc<Kept>,
    task: String,
    expires: u64,
}

/// The decoded answers used last, oldest first out.
#[derive(Debug, Default)]
struct Hot {
    answers: HashMap<String, HotAnswer>,
    order: VecDeque<(String, usize)>,
    bytes: usize,
}

impl Hot {
    /// Holds `answer` under `hash` (stored as `size` bytes).
    fn hold(&mut self, hash: &str, answer: HotAnswer, size: usize) {
        if size > HOT_BYTES || self.answers.contains_key(hash) {
            return;
        }
        self.answers.insert(hash.to_owned(), answer);
        self.order.push_back((hash.to_owned(), size));
        self.bytes += size;
        while self.bytes > HOT_BYTES
            && let Some((oldest, size)) = self.order.pop_front()
        {
            self.answers.remove(&oldest);
            self.bytes -= size;
        }
    }

    /// Lets go of the answers `gone` picks.
    fn drop_where(&mut self, gone: impl Fn(&str, &HotAnswer) -> bool) {
        self.answers.retain(|hash, answer| !gone(hash, answer));
        let answers = &self.answers;
        self.order.retain(|(hash, _)| answers.contains_key(hash));
        self.bytes = self.order.iter().map(|(_, size)| size).sum();
    }
}

/// What the cache knows beside the file.
#[derive(Debug, Default)]
struct Memory {
    /// Every kept answer's last use, by hash.
    uses: HashMap<String, Use>,
    hot: Hot,
}

impl Memory {
    /// A use of the answer `hash` at `now`.
    fn used(&mut self, hash: &str, now: u64) {
        if let Some(used) = self.uses.get_mut(hash) {
            used.at = now;
            used.unwritten = true;
        }
    }
}

/// Kept answers in the state file.
pub struct SqliteCache {
    file: StateFile,
    max_entries: usize,
    memory: Arc<Mutex<Memory>>,
}

impl SqliteCache {
    /// The kept answers of the open state `file`, at most `max_entries`; those
    /// past their time are forgotten now.
    pub fn in_file(file: StateFile, max_entries: usize) -> Result<SqliteCache, ConfigError> {
        let now = unix_millis() as i64;
        let max = max_entries.max(1);
        let memory = file.call_now(move |connection| {
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
            let mut memory = Memory {
                uses: rows.collect::<rusqlite::Result<_>>()?,
                hot: Hot::default(),
            };
            evict(connection, &mut memory, max)?;
            Ok(memory)
        })?;
        Ok(SqliteCache {
            file,
            max_entries: max,
            memory: Arc::new(Mutex::new(memory)),
        })
    }

    fn call<T: Send + 'static>(
        &self,
        name: &'static str,
        op: impl FnOnce(&Connection, &mut Memory) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, StoreDown>> {
        let memory = self.memory.clone();
        let called = self
            .file
            .call(move |connection| op(connection, &mut lock(&memory)));
        Box::pin(async move { called.await.map_err(|cause| StoreDown::new(name, cause)) })
    }

    /// The answer `hash` if it is held in memory and still of use at `now`.
    fn held(&self, hash: &str, now: u64) -> Option<Arc<Kept>> {
        let mut memory = lock(&self.memory);
        let answer = memory.hot.answers.get(hash).filter(|a| a.expires > now)?;
        let kept = answer.kept.clone();
        memory.used(hash, now);
        Some(kept)
    }
}

impl AnswerCache for SqliteCache {
    fn get<'a>(
        &'a self,
        key: &'a AnswerKey,
    ) -> BoxFuture<'a, Result<Option<Arc<Kept>>, StoreDown>> {
        let now = unix_millis();
        if let Some(kept) = self.held(&key.hash, now) {
            let kept = Some(kept).filter(|kept| kept.request == key.request);
            return Box::pin(async move { Ok(kept) });
        }
        let (hash, task) = (key.hash.clone(), key.task.clone());
        let found = self.call("cache_get", move |connection, memory| {
            let row: Option<(String, i64)> = connection
                .prepare_cached(
                    "SELECT kept, expires_at FROM answers WHERE hash = ?1 AND expires_at > ?2",
                )?
                .query_row(params![hash, now as i64], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()?;
            let Some((text, expires)) = row else {
                return Ok(None);
            };
            let Some(kept) = Kept::decode(&text).map(Arc::new) else {
                return Ok(None);
            };
            memory.used(&hash, now);
            let answer = HotAnswer {
                kept: kept.clone(),
                task,
                expires: expires as u64,
            };
            memory.hot.hold(&hash, answer, text.len());
            Ok(Some(kept))
        });
        Box::pin(async move { Ok(found.await?.filter(|kept| kept.request == key.request)) })
    }

    fn put<'a>(
        &'a self,
        key: &'a AnswerKey,
        kept: &'a Kept,
        keep: Duration,
    ) -> BoxFuture<'a, Result<(), StoreDown>> {
        let (hash, task, text) = (key.hash.clone(), key.task.clone(), kept.encode());
        let (now, max) = (unix_millis(), self.max_entries);
        let expires = now.saturating_add(keep.as_millis() as u64);
        let decoded = Arc::new(kept.clone());
        self.call("cache_put", move |connection, memory| {
            connection
                .prepare_cached(
                    "INSERT OR REPLACE INTO answers (hash, task, kept, used_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![hash, task, text, now as i64, expires as i64])?;
            let used = Use {
                task: task.clone(),
                at: now,
                unwritten: false,
            };
            memory.uses.insert(hash.clone(), used);
            memory.hot.drop_where(|held, _| held == hash);
            let answer = HotAnswer {
                kept: decoded,
                task,
                expires,
            };
            memory.hot.hold(&hash, answer, text.len());
            write_uses(connection, &mut memory.uses)?;
            evict(connection, memory, max)
        })
    }

    fn count<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, StoreDown>> {
        let (task, now) = (task.to_owned(), unix_millis() as i64);
        self.call("cache_count", move |connection, _| {
            live(connection, &task, now)
        })
    }

    fn forget<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, StoreDown>> {
        let (task, now) = (task.to_owned(), unix_millis() as i64);
        self.call("cache_forget", move |connection, memory| {
            let live = live(connection, &task, now)?;
            connection.execute("DELETE FROM answers WHERE task = ?1", [&task])?;
            memory.uses.retain(|_, used| used.task != task);
            memory.hot.drop_where(|_, answer| answer.task == task);
            Ok(live)
        })
    }
}

/// How many answers `task` keeps that are still of use at `now`.
fn live(connection: &Connection, task: &str, now: i64) -> rusqlite::Result<u64> {
    connection.query_row(
        "SELECT COUNT(*) FROM answers WHERE task = ?1 AND expires_at > ?2",
        params![task, now],
        |row| row.get::<_, i64>(0).map(|n| n as u64),
    )
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
fn evict(connection: &Connection, memory: &mut Memory, max: usize) -> rusqlite::Result<()> {
    let Some(over) = memory.uses.len().checked_sub(max).filter(|n| *n > 0) else {
        return Ok(());
    };
    let mut by_age: Vec<(u64, String)> = memory
        .uses
        .iter()
        .map(|(hash, used)| (used.at, hash.clone()))
        .collect();
    by_age.select_nth_unstable(over - 1);
    let gone: Vec<String> = by_age
        .into_iter()
        .take(over)
        .map(|(_, hash)| hash)
        .collect();
    let mut statement = connection.prepare_cached("DELETE FROM answers WHERE hash = ?1")?;
    for hash in &gone {
        statement.execute([hash])?;
        memory.uses.remove(hash);
    }
    memory
        .hot
        .drop_where(|hash, _| gone.iter().any(|g| g == hash));
    Ok(())
}

fn lock(memory: &Mutex<Memory>) -> MutexGuard<'_, Memory> {
    memory.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
