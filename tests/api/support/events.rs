//! A reader of an event stream as a client sees it: events (with their raw
//! text, to compare byte for byte) and comments, read one at a time so a test
//! can drop the connection after any of them.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;

/// One event as it came.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    /// `id:`, if it had one.
    pub id: Option<String>,
    /// `event:`.
    pub event: String,
    /// `data:`.
    pub data: String,
    /// The event's lines as sent.
    pub raw: String,
}

impl SseEvent {
    /// The data as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("an event's data is JSON")
    }
}

/// Reads a response's events.
pub struct EventReader {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    /// Comments seen (`: ping`).
    pub comments: Vec<String>,
}

impl EventReader {
    /// Reads `response`'s body.
    pub fn new(response: reqwest::Response) -> EventReader {
        EventReader {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
            comments: Vec::new(),
        }
    }

    /// The next event, or `None` when the stream ended; a test fails if none
    /// comes within 10 s.
    pub async fn next(&mut self) -> Option<SseEvent> {
        self.next_within(Duration::from_secs(10))
            .await
            .expect("an event within 10 s")
    }

    /// The next event within `limit`: `Err` if none came.
    pub async fn next_within(&mut self, limit: Duration) -> Result<Option<SseEvent>, ()> {
        let until = tokio::time::Instant::now() + limit;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = self.parse(&block) {
                    return Ok(Some(event));
                }
            }
            match tokio::time::timeout_at(until, self.body.next()).await {
                Err(_) => return Err(()),
                Ok(Some(Ok(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(_) => return Ok(None),
            }
        }
    }

    /// Every event up to the stream's end.
    pub async fn rest(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }

    /// The first `n` events (the stream must have them).
    pub async fn take(&mut self, n: usize) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for _ in 0..n {
            events.push(self.next().await.expect("the stream goes on"));
        }
        events
    }

    fn parse(&mut self, block: &str) -> Option<SseEvent> {
        let (mut id, mut event, mut data) = (None, String::from("message"), Vec::new());
        let mut is_event = false;
        for line in block.lines() {
            if let Some(comment) = line.strip_prefix(':') {
                self.comments.push(comment.trim().to_owned());
            } else if let Some(value) = line.strip_prefix("id: ") {
                id = Some(value.to_owned());
                is_event = true;
            } else if let Some(value) = line.strip_prefix("event: ") {
                event = value.to_owned();
                is_event = true;
            } else if let Some(value) = line.strip_prefix("data: ") {
                data.push(value.to_owned());
                is_event = true;
            }
        }
        is_event.then(|| SseEvent {
            id,
            event,
            data: data.join("\n"),
            raw: block.to_owned(),
        })
    }
}

/// The ids of `events` that have one.
pub fn ids(events: &[SseEvent]) -> Vec<String> {
    events.iter().filter_map(|e| e.id.clone()).collect()
}

/// Whether `ids` run `{run}.1`, `{run}.2`, … without a gap within each run, and
/// the runs never go back.
pub fn gapless(ids: &[String]) -> bool {
    let parsed: Vec<(u64, u64)> = ids
        .iter()
        .filter_map(|id| {
            let (run, seq) = id.split_once('.')?;
            Some((run.parse().ok()?, seq.parse().ok()?))
        })
        .collect();
    parsed.len() == ids.len()
        && parsed.first().is_some_and(|first| first.1 == 1)
        && parsed.windows(2).all(|pair| {
            let ((run, seq), (next_run, next_seq)) = (pair[0], pair[1]);
            (next_run == run && next_seq == seq + 1) || (next_run > run && next_seq == 1)
        })
}
