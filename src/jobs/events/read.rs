//! What a reader of a job's events is sent: the kept events from where its cursor
//! starts it, then the live ones and `progress`, a `: ping` while nothing is
//! due, and the end right after the final `job` event (contract 11.1, 11.2). A
//! stream's frames are the kept events' own bytes; the reader holds the feed and
//! an index, so a thousand readers of one job cost a thousand indexes.
//!
//! Every stream and long-poll ends with one log line (`job stream ended`):
//! its cursor, where that started it, the events sent, and why it ended.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::feed::{Feed, ResumedFrom, Start};
use super::kept::Kept;
use crate::engine::metrics::Metrics;
use crate::ops::telemetry::NULL;

/// A `: ping` comment is sent when nothing else was for this long (or a third of
/// the stall limit, if that is shorter: a reader that reads is never cut).
pub const PING_EVERY: Duration = Duration::from_secs(15);

/// Events read from the feed at a time.
const READ_AT_ONCE: usize = 64;

/// The most events a long-poll answers with.
pub const LONG_POLL_MOST: usize = 256;

/// What the stream-end line reports.
pub struct EndLine {
    job_id: String,
    cursor: Option<String>,
    from: Option<ResumedFrom>,
    events: u64,
    reason: Option<&'static str>,
    /// Counts an open stream (`ladle_job_streams`) until it ends; long-polls
    /// are not counted.
    gauge: Option<Metrics>,
}

impl EndLine {
    /// The line of job `job_id`'s stream (`gauge`: counted as open) or
    /// long-poll, read from `cursor`, which started it as `start` says.
    pub fn new(job_id: &str, cursor: Option<String>, start: Start, gauge: Option<Metrics>) -> Self {
        let from = match start {
            Start::At { from, .. } | Start::FinalAlone { from } => from,
            Start::Over => Some(ResumedFrom::Kept),
        };
        if let Some(metrics) = &gauge {
            metrics.job_stream_opened(from.map(ResumedFrom::name));
        }
        EndLine {
            job_id: job_id.to_owned(),
            cursor,
            from,
            events: 0,
            reason: None,
            gauge,
        }
    }
}

impl EndLine {
    /// The line, ended for `reason` without a stream.
    pub fn ended(mut self, reason: &'static str) -> EndLine {
        self.reason = Some(reason);
        self
    }
}

impl Drop for EndLine {
    fn drop(&mut self) {
        if let Some(metrics) = &self.gauge {
            metrics.job_stream_closed();
        }
        let (job_id, events) = (&self.job_id, self.events);
        let reason = self.reason.unwrap_or("client_gone");
        match (&self.cursor, self.from) {
            (Some(cursor), Some(from)) => {
                let resumed_from = from.name();
                tracing::info!(job_id = %job_id, cursor = %cursor, resumed_from, events, reason, "job stream ended")
            }
            _ => {
                tracing::info!(job_id = %job_id, cursor = NULL, resumed_from = NULL, events, reason, "job stream ended")
            }
        }
    }
}

/// One reader's stream.
pub struct Reading {
    feed: Arc<Feed>,
    /// The next event's index in the feed.
    next: usize,
    /// Read from the feed, not sent yet.
    buffer: VecDeque<Arc<Kept>>,
    changes: watch::Receiver<u64>,
    progress: watch::Receiver<Option<Bytes>>,
    /// The shutdown signal, and whether this job's run goes on here (its
    /// readers then go on to its final event).
    shutdown: CancellationToken,
    runs_here: Box<dyn Fn() -> bool + Send + Sync>,
    shutting: bool,
    ping_every: Duration,
    done: bool,
    line: EndLine,
}

/// Where a reader is and what it answers to.
pub struct Reader {
    /// The job's feed.
    pub feed: Arc<Feed>,
    /// Where it starts (`Start::Over` is not a stream).
    pub start: Start,
    /// The final event, when it is sent alone.
    pub alone: Option<Kept>,
    /// The shutdown signal.
    pub shutdown: CancellationToken,
    /// Whether the job's run goes on in this process.
    pub runs_here: Box<dyn Fn() -> bool + Send + Sync>,
    /// `LADLE_STREAM_STALL_MS`.
    pub stall: Duration,
    /// The stream-end line.
    pub line: EndLine,
}

impl Reader {
    /// The SSE body's frames.
    pub fn stream(self) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
        let (changes, progress) = self.feed.subscribe();
        let next = match self.start {
            Start::At { index, .. } => index,
            Start::Over | Start::FinalAlone { .. } => usize::MAX,
        };
        let buffer = self.alone.map(Arc::new).into_iter().collect();
        let reading = Reading {
            feed: self.feed,
            next,
            buffer,
            changes,
            progress,
            shutdown: self.shutdown,
            runs_here: self.runs_here,
            shutting: false,
            ping_every: PING_EVERY.min(self.stall / 3),
            done: matches!(self.start, Start::Over),
            line: self.line,
        };
        futures_util::stream::unfold(reading, |mut reading| async move {
            let frame = reading.due().await?;
            Some((Ok(frame), reading))
        })
    }
}

impl Reading {
    /// The next frame, or `None` once the stream is over.
    async fn due(&mut self) -> Option<Bytes> {
        loop {
            if self.done {
                return None;
            }
            if self.buffer.is_empty() && self.next != usize::MAX {
                let read = self.feed.read(self.next, READ_AT_ONCE);
                self.next += read.len();
                self.buffer.extend(read);
            }
            if let Some(kept) = self.buffer.pop_front() {
                self.line.events += 1;
                if kept.is_final() {
                    self.done = true;
                    self.line.reason = Some("final");
                }
                return Some(kept.frame.clone());
            }
            tokio::select! {
                _ = self.changes.changed() => {}
                Ok(()) = self.progress.changed() => {
                    if let Some(frame) = self.progress.borrow_and_update().clone() {
                        return Some(frame);
                    }
                }
                () = tokio::time::sleep(self.ping_every) => return Some(Bytes::from_static(b": ping\n\n")),
                () = self.shutdown.cancelled(), if !self.shutting => {
                    match (self.runs_here)() {
                        true => self.shutting = true,
                        false => {
                            self.line.reason = Some("shutdown");
                            self.done = true;
                        }
                    }
                }
            }
        }
    }
}

/// A long-poll's events: those `start` names (at most `LONG_POLL_MOST`), at
/// once when there are any, else as soon as one comes or `until` passes (or
/// shutdown begins); and whether the final event is among them (or was the
/// cursor).
pub async fn long_poll(
    feed: &Feed,
    start: Start,
    alone: Option<Kept>,
    until: Option<Instant>,
    shutdown: &CancellationToken,
    line: &mut EndLine,
) -> (Vec<Arc<Kept>>, bool) {
    let index = match start {
        Start::Over => {
            line.reason = Some("final");
            return (Vec::new(), true);
        }
        Start::FinalAlone { .. } => {
            line.events = 1;
            line.reason = Some("final");
            return (alone.map(Arc::new).into_iter().collect(), true);
        }
        Start::At { index, .. } => index,
    };
    let (mut changes, _) = feed.subscribe();
    loop {
        let events = feed.read(index, LONG_POLL_MOST);
        let waiting = until.filter(|until| *until > Instant::now() && !shutdown.is_cancelled());
        if let (true, Some(until)) = (events.is_empty(), waiting) {
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep_until(until) => {}
                () = shutdown.cancelled() => {}
            }
            continue;
        }
        let done = events.iter().any(|e| e.is_final());
        line.events = events.len() as u64;
        line.reason = Some(if done { "final" } else { "answered" });
        return (events, done);
    }
}
