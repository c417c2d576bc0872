//! One job's events as this replica holds them: the log itself without Redis, a
//! copy that follows Redis's stream with it. Readers hold the feed and an index
//! into it; the run writes each event once, whatever the number of readers, and
//! a reader that falls behind reads on from the feed (nothing waits for it).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::watch;

use super::kept::{EventId, Kept, Kind};
use crate::jobs::JobStatus;

/// One job's events.
#[derive(Debug)]
pub struct Feed {
    state: Mutex<FeedState>,
    /// Bumped at every event kept, and when the feed is loaded.
    changed: watch::Sender<u64>,
    /// The latest `progress` frame (live only, never kept).
    progress: watch::Sender<Option<Bytes>>,
}

#[derive(Debug, Default)]
struct FeedState {
    events: Vec<Arc<Kept>>,
    /// The data bytes kept.
    bytes: usize,
    /// The id made last (the next of its run follows it).
    last: Option<EventId>,
    /// Whether it holds the final `job` event: nothing is added after it.
    ended: bool,
    /// With Redis: the stream entry read last, and whether the stream was read.
    entry: Option<(u64, u64)>,
    loaded: bool,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            state: Mutex::default(),
            changed: watch::channel(0).0,
            progress: watch::channel(None).0,
        }
    }
}

impl Feed {
    /// A feed that needs no loading (the memory log's).
    pub fn loaded() -> Feed {
        let feed = Feed::default();
        feed.lock().loaded = true;
        feed
    }

    fn lock(&self) -> MutexGuard<'_, FeedState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the next event of `run` (the memory log's ids): refused after the
    /// final event, or for a run older than the latest.
    pub fn make(&self, run: u32, name: &str, data: Bytes) -> Option<Arc<Kept>> {
        let mut state = self.lock();
        let id = match state.last {
            _ if state.ended => return None,
            Some(last) if last.run > run => return None,
            Some(last) if last.run == run => EventId {
                run,
                seq: last.seq + 1,
            },
            _ => EventId { run, seq: 1 },
        };
        let kept = Arc::new(Kept::new(id, name, data));
        push(&mut state, kept.clone());
        drop(state);
        self.changed.send_modify(|n| *n += 1);
        Some(kept)
    }

    /// Whether `cursor` is past every event this copy of the feed holds: made
    /// on another replica a moment ago, perhaps, and not read here yet.
    pub fn behind(&self, cursor: EventId) -> bool {
        self.lock().last.is_none_or(|last| cursor > last)
    }

    /// Makes the feed's first event, unless it has one already.
    pub fn make_first(&self, run: u32, name: &str, data: Bytes) -> Option<Arc<Kept>> {
        if self.lock().last.is_some() {
            return None;
        }
        self.make(run, name, data)
    }

    /// Adds events read from Redis's stream (entry ids ascending), those past
    /// the entry read last; marks the feed loaded.
    pub fn extend(&self, read: Vec<((u64, u64), Kept)>) {
        let mut state = self.lock();
        for (entry, kept) in read {
            if state.entry.is_some_and(|last| entry <= last) || state.ended {
                continue;
            }
            state.entry = Some(entry);
            push(&mut state, Arc::new(kept));
        }
        state.loaded = true;
        drop(state);
        self.changed.send_modify(|n| *n += 1);
    }

    /// The stream entry read last (Redis), and whether the stream was read yet.
    pub fn entry(&self) -> (Option<(u64, u64)>, bool) {
        let state = self.lock();
        (state.entry, state.loaded)
    }

    /// Sends a `progress` frame to the live readers.
    pub fn progress(&self, frame: Bytes) {
        self.progress.send_replace(Some(frame));
    }

    /// Follows the feed's changes.
    pub fn subscribe(&self) -> (watch::Receiver<u64>, watch::Receiver<Option<Bytes>>) {
        let mut progress = self.progress.subscribe();
        // Only progress made from now on is this reader's.
        progress.mark_unchanged();
        (self.changed.subscribe(), progress)
    }

    /// Up to `most` events from `index` on.
    pub fn read(&self, index: usize, most: usize) -> Vec<Arc<Kept>> {
        let state = self.lock();
        let from = index.min(state.events.len());
        let to = from.saturating_add(most).min(state.events.len());
        state.events[from..to].to_vec()
    }

    /// Whether it holds the final event, and its events' data bytes.
    pub fn facts(&self) -> (bool, usize) {
        let state = self.lock();
        (state.ended, state.bytes)
    }

    /// Where a reader with `cursor` starts (contract 11.2's table), given what
    /// the store says of the job's end.
    pub fn start(&self, cursor: Option<EventId>, job: JobEnd) -> Start {
        resolve(&self.lock().events, cursor, job)
    }
}

fn push(state: &mut FeedState, kept: Arc<Kept>) {
    state.bytes += kept.data.len();
    state.last = Some(kept.id);
    state.ended |= kept.is_final();
    state.events.push(kept);
}

/// What the store says of the job's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobEnd {
    /// Whether it has finished.
    pub finished: bool,
    /// The id its final `job` event was made with, as kept with the job.
    pub final_id: Option<EventId>,
}

/// Which row of 11.2's table a cursor met (`ladle_job_stream_resumes_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumedFrom {
    /// A kept event, or the last one made.
    Kept,
    /// One that is not kept: the current run from its start.
    RunStart,
    /// A finished job whose events are gone: its final event alone.
    Final,
}

impl ResumedFrom {
    /// The metric's and log's word.
    pub fn name(self) -> &'static str {
        match self {
            ResumedFrom::Kept => "kept",
            ResumedFrom::RunStart => "run_start",
            ResumedFrom::Final => "final",
        }
    }
}

/// Where a reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The events from `index` on, then the live ones.
    At {
        /// The first event sent.
        index: usize,
        /// The row the cursor met (`None` without a cursor).
        from: Option<ResumedFrom>,
    },
    /// The cursor is the finished job's final event: nothing follows.
    Over,
    /// The finished job's events are gone: its final event alone.
    FinalAlone {
        /// The row the cursor met (`None` without a cursor).
        from: Option<ResumedFrom>,
    },
}

/// 11.2's table over the kept `events`.
fn resolve(events: &[Arc<Kept>], cursor: Option<EventId>, job: JobEnd) -> Start {
    let gone = job.finished && !events.iter().any(|e| e.is_final());
    let Some(cursor) = cursor else {
        return match gone && events.is_empty() {
            true => Start::FinalAlone { from: None },
            false => Start::At {
                index: 0,
                from: None,
            },
        };
    };
    if job.final_id == Some(cursor) {
        return Start::Over;
    }
    if let Some(at) = events.iter().position(|e| e.id == cursor) {
        return match events[at].is_final() {
            true => Start::Over,
            false => Start::At {
                index: at + 1,
                from: Some(ResumedFrom::Kept),
            },
        };
    }
    if gone && events.is_empty() {
        return Start::FinalAlone {
            from: Some(ResumedFrom::Final),
        };
    }
    Start::At {
        index: run_start(events),
        from: Some(ResumedFrom::RunStart),
    }
}

/// Where the current run's events begin: its `running` event, or (when the job
/// waits for a run, or ended waiting) the latest `job` event.
fn run_start(events: &[Arc<Kept>]) -> usize {
    let latest = |wanted: fn(JobStatus) -> bool| {
        events
            .iter()
            .rposition(|e| matches!(e.kind, Kind::Job(status) if wanted(status)))
    };
    let running = latest(|s| s == JobStatus::Running);
    let waiting = latest(|s| matches!(s, JobStatus::Queued | JobStatus::RetryWait));
    match (running, waiting) {
        (Some(running), Some(waiting)) if waiting > running => latest(|_| true).unwrap_or(0),
        (Some(running), _) => running,
        (None, _) => latest(|_| true).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests;
