//! The event log of a replica without Redis: every job's feed in memory. A
//! running job's events are never dropped; finished jobs' are, oldest finished
//! first, past `LADLE_STREAM_MAX_BYTES` (their data bytes together) and after
//! `LADLE_STREAM_TTL_MS`. A restart drops them all (the jobs stay in the state
//! file, with each final event's id).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;

use super::feed::Feed;
use super::kept::Kept;

/// The feeds of this replica's jobs.
pub struct MemoryLog {
    state: Mutex<State>,
    ttl: Duration,
    max_bytes: u64,
}

#[derive(Default)]
struct State {
    feeds: HashMap<String, Arc<Feed>>,
    /// Finished jobs in the order they finished: (id, when, data bytes).
    finished: VecDeque<(String, u64, usize)>,
    finished_bytes: u64,
}

impl MemoryLog {
    /// A log keeping finished jobs' events for `ttl`, within `max_bytes`.
    pub fn new(ttl: Duration, max_bytes: u64) -> MemoryLog {
        MemoryLog {
            state: Mutex::default(),
            ttl,
            max_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps job `id`'s next event of `run` at `now` (Unix ms); `None` when the
    /// job's events ended already or the run is an older one.
    pub fn append(
        &self,
        id: &str,
        run: u32,
        name: &str,
        data: Bytes,
        now: u64,
    ) -> Option<Arc<Kept>> {
        let mut state = self.lock();
        let feed = state
            .feeds
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Feed::loaded()))
            .clone();
        let kept = feed.make(run, name, data)?;
        if kept.is_final() {
            let (_, bytes) = feed.facts();
            state.finished.push_back((id.to_owned(), now, bytes));
            state.finished_bytes += bytes as u64;
            self.drop_past_bounds(&mut state, now);
        }
        Some(kept)
    }

    /// Job `id`'s first event, unless its feed has one already.
    pub fn append_first(&self, id: &str, run: u32, name: &str, data: Bytes) {
        let feed = self
            .lock()
            .feeds
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Feed::loaded()))
            .clone();
        drop(feed.make_first(run, name, data));
    }

    /// Job `id`'s feed; a running job without one (its events dropped by a
    /// restart) gets one that its next events go to.
    pub fn feed(&self, id: &str, finished: bool) -> Arc<Feed> {
        let mut state = self.lock();
        if let Some(feed) = state.feeds.get(id) {
            return feed.clone();
        }
        let feed = Arc::new(Feed::loaded());
        if !finished {
            state.feeds.insert(id.to_owned(), feed.clone());
        }
        feed
    }

    /// Sends job `id`'s progress to its readers, if it has any.
    pub fn progress(&self, id: &str, frame: Bytes) {
        if let Some(feed) = self.lock().feeds.get(id) {
            feed.progress(frame);
        }
    }

    /// Drops what is past its time at `now`.
    pub fn upkeep(&self, now: u64) {
        let mut state = self.lock();
        self.drop_past_bounds(&mut state, now);
    }

    /// Finished jobs' events (oldest finished first) past the byte bound or the
    /// TTL. A reader still holding a feed reads it to its end.
    fn drop_past_bounds(&self, state: &mut State, now: u64) {
        let ttl = self.ttl.as_millis() as u64;
        while let Some((id, at, bytes)) = state.finished.front() {
            let over = state.finished_bytes > self.max_bytes || at.saturating_add(ttl) <= now;
            if !over {
                break;
            }
            state.finished_bytes -= *bytes as u64;
            let id = id.clone();
            state.finished.pop_front();
            state.feeds.remove(&id);
        }
    }

    /// The finished jobs' kept bytes, and the number of feeds (for tests).
    #[cfg(test)]
    fn held(&self) -> (u64, usize) {
        let state = self.lock();
        (state.finished_bytes, state.feeds.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: &str) -> Bytes {
        Bytes::from(format!(
            r#"{{"status":"{status}","pad":"{}"}}"#,
            "x".repeat(60)
        ))
    }

    #[test]
    fn finished_jobs_go_oldest_first_past_the_bound_and_running_ones_never() {
        let log = MemoryLog::new(Duration::from_secs(900), 300);
        log.append("running", 1, "job", job("running"), 0);
        for n in 0..5 {
            let id = format!("done{n}");
            log.append(&id, 1, "job", job("running"), n);
            log.append(&id, 1, "job", job("succeeded"), n);
        }
        let (bytes, feeds) = log.held();
        assert!(bytes <= 300 && bytes > 0, "{bytes}");
        assert!(feeds < 6, "{feeds}");
        assert!(
            log.feed("done0", true).read(0, 9).is_empty(),
            "dropped first"
        );
        assert_eq!(log.feed("done4", true).read(0, 9).len(), 2);
        assert_eq!(log.feed("running", false).read(0, 9).len(), 1);
    }

    #[test]
    fn finished_jobs_events_expire_after_the_ttl() {
        let log = MemoryLog::new(Duration::from_millis(1_000), 1 << 20);
        log.append("a", 0, "job", job("queued"), 0);
        log.append("a", 0, "job", job("canceled"), 10);
        log.upkeep(1_009);
        assert_eq!(log.feed("a", true).read(0, 9).len(), 2);
        log.upkeep(1_010);
        assert!(log.feed("a", true).read(0, 9).is_empty());
    }
}
