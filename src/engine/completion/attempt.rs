//! One upstream attempt: its timers and its progress.
//!
//! Invariant: whether output has arrived is state of the attempt, created with it and
//! dropped with it, never shared. Every wait here ends at the earliest of the idle
//! timer, the first-output timer (until output begins, when one is set) and the
//! request's one deadline; no attempt gets a fresh deadline of its own. The
//! idle timer runs from sending the request to the first event and between events;
//! comments produce no event, so they never reset it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::time::{Instant, Sleep, sleep_until};

use super::phases::Phases;
use crate::engine::failure::{AttemptFailure, FailureKind, Refusal};
use crate::engine::retry::Deadline;
use crate::engine::upstream::chunk::{self, Chunk, Parsed};
use crate::engine::upstream::sse::SseDecoder;
use crate::engine::upstream::{BodyKind, Outgoing, Upstream};

/// Longest SSE line, and most data in one SSE event, accepted from an upstream.
pub const MAX_SSE_SIZE: usize = 1 << 20;
/// Largest error or non-streaming body read from an upstream.
const MAX_WHOLE_BODY: usize = 8 << 20;
/// How much of an error body is kept for classification.
const MAX_ERROR_TEXT: usize = 64 << 10;

/// An attempt's own timeouts (`LADLE_IDLE_TIMEOUT_MS`,
/// `LADLE_FIRST_OUTPUT_TIMEOUT_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptTimeouts {
    /// Longest silence: from sending to the first event, and between events.
    pub idle: Duration,
    /// Longest time from the attempt's start to its first output, if set.
    pub first_output: Option<Duration>,
}

/// A data chunk as received, and what it says.
#[derive(Debug)]
pub struct Received {
    /// The `data` payload exactly as the upstream sent it; `None` for an upstream
    /// that ignored `stream` (the relay writes a chunk from the answer if it needs
    /// one).
    pub raw: Option<Bytes>,
    /// The parsed chunk.
    pub chunk: Chunk,
}

/// The clocks an attempt's waits run against.
#[derive(Debug, Clone, Copy)]
pub struct Timers {
    /// Longest silence: from sending to the first event, and between events.
    pub idle: Duration,
    /// Longest time from the attempt's start to its first output, if set.
    pub first_output: Option<Duration>,
    /// The request's one deadline.
    pub deadline: Deadline,
}

impl Timers {
    /// The attempt's timeouts under the request's deadline.
    pub fn new(timeouts: AttemptTimeouts, deadline: Deadline) -> Self {
        Timers {
            idle: timeouts.idle,
            first_output: timeouts.first_output,
            deadline,
        }
    }
}

/// An attempt whose response headers arrived with a 2xx status.
pub struct Attempt {
    body: BoxStream<'static, Result<Bytes, FailureKind>>,
    decoder: SseDecoder,
    /// A whole (non-event-stream) body, as read so far.
    whole: BytesMut,
    mode: Mode,
    timers: Timers,
    idle_until: Instant,
    /// When the first output must have arrived (from the attempt's start).
    first_output_by: Option<Instant>,
    /// One timer for every read of the attempt, moved forward rather than created
    /// anew per read: extending a registered tokio timer is an atomic store, while a
    /// fresh one takes the timer wheel's lock to register and again to cancel.
    timer: Pin<Box<Sleep>>,
    /// The upstream, whose secrets are scrubbed from the words it sends back.
    upstream: Arc<Upstream>,
    /// Whether chunks' id and model are read (until output begins).
    wants_meta: bool,
    output_began: bool,
    finished: bool,
    phases: Phases,
}

/// An attempt that failed before its answer could be read: what happened, and
/// how far it got.
pub struct OpenFailed {
    pub failure: AttemptFailure,
    pub phases: Phases,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Stream,
    Whole,
    Over,
}

impl Attempt {
    /// Sends the request and waits for a usable response.
    pub async fn open(
        upstream: Arc<Upstream>,
        request: Outgoing,
        timers: Timers,
        wants_meta: bool,
    ) -> Result<Self, OpenFailed> {
        let mut phases = Phases::start(request.dialed.clone());
        let started = phases.started();
        let idle_until = started + timers.idle;
        let first_output_by = timers.first_output.map(|limit| started + limit);
        let (until, fired) = next_timer(timers.deadline, idle_until, first_output_by);
        // The attempt's one timer already guards the wait for the head.
        let mut timer = Box::pin(sleep_until(until));
        let sent = tokio::select! {
            biased;
            sent = upstream.send(request) => sent,
            () = timer.as_mut() => Err(fired),
        };
        let response = match sent {
            Ok(response) => response,
            Err(kind) => {
                let failure = AttemptFailure::new(kind);
                return Err(OpenFailed { failure, phases });
            }
        };
        phases.head();
        let mut attempt = Attempt {
            body: response.body,
            decoder: SseDecoder::new(MAX_SSE_SIZE),
            whole: BytesMut::new(),
            mode: Mode::Stream,
            timers,
            idle_until,
            first_output_by,
            timer,
            upstream: upstream.clone(),
            wants_meta,
            output_began: false,
            finished: false,
            phases,
        };
        if !(200..300).contains(&response.status) {
            let read = std::future::poll_fn(|cx| attempt.poll_whole(cx, MAX_ERROR_TEXT)).await;
            let failure = match read {
                Ok(text) => AttemptFailure {
                    kind: FailureKind::Status(Box::new(refusal(&upstream, response.status, &text))),
                    retry_after: response.retry_after,
                },
                Err(failure) => failure,
            };
            let phases = attempt.phases;
            return Err(OpenFailed { failure, phases });
        }
        if response.kind != BodyKind::EventStream {
            attempt.mode = Mode::Whole;
        }
        Ok(attempt)
    }

    /// Whether this attempt has produced output.
    pub fn output_began(&self) -> bool {
        self.output_began
    }

    /// How far the attempt has got, and when.
    pub fn phases(&self) -> &Phases {
        &self.phases
    }

    /// The next data chunk; `None` once the stream has properly ended. The one
    /// way an attempt is read, whatever the body's kind.
    pub fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Received>, AttemptFailure>> {
        match self.mode {
            Mode::Over => Poll::Ready(Ok(None)),
            Mode::Stream => self.poll_next_event_chunk(cx),
            Mode::Whole => {
                let body = ready!(self.poll_whole(cx, MAX_WHOLE_BODY))?;
                Poll::Ready(self.whole_answer(body, cx))
            }
        }
    }

    /// The next chunk of an event stream: the per-chunk path.
    fn poll_next_event_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Received>, AttemptFailure>> {
        loop {
            let Some(raw) = ready!(self.poll_next_event(cx))? else {
                return Poll::Ready(if self.finished {
                    Ok(None)
                } else {
                    Err(AttemptFailure::new(FailureKind::EndedEarly))
                });
            };
            let now = Instant::now();
            self.idle_until = now + self.timers.idle;
            self.phases.event(now);
            if raw.trim_ascii().is_empty() {
                continue;
            }
            return Poll::Ready(
                match chunk::parse(&raw, self.wants_meta && !self.output_began) {
                    Ok(Parsed::Done) => {
                        self.mode = Mode::Over;
                        Ok(None)
                    }
                    Ok(Parsed::Error(message)) => Err(AttemptFailure::new(
                        FailureKind::ErrorChunk(self.upstream.scrub(&message)),
                    )),
                    Ok(Parsed::Chunk(chunk)) => Ok(Some(self.received(Some(raw), chunk))),
                    Err(malformed) => Err(AttemptFailure::new(FailureKind::Protocol(
                        malformed.to_string(),
                    ))),
                },
            );
        }
    }

    fn received(&mut self, raw: Option<Bytes>, chunk: Chunk) -> Received {
        if !self.output_began && chunk.is_output() {
            self.output_began = true;
            self.phases.output();
        }
        self.finished |= chunk.first.finish_reason.is_some();
        Received { raw, chunk }
    }

    /// The next SSE event's data, or `None` at the end of the body.
    fn poll_next_event(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, AttemptFailure>> {
        loop {
            match self.decoder.next_event() {
                Ok(Some(event)) => return Poll::Ready(Ok(Some(event.data))),
                Ok(None) => {}
                Err(too_long) => {
                    return Poll::Ready(Err(AttemptFailure::new(FailureKind::Protocol(
                        too_long.to_string(),
                    ))));
                }
            }
            match ready!(self.poll_read(cx))? {
                Some(bytes) => self.decoder.push(&bytes),
                None => return Poll::Ready(Ok(None)),
            }
        }
    }

    /// An upstream that answered with one JSON document (it ignored `stream`, or
    /// declared no event stream), read whole: handed back as one chunk. If the
    /// bytes turn out to be SSE after all, they are read as SSE.
    fn whole_answer(
        &mut self,
        body: Bytes,
        cx: &mut Context<'_>,
    ) -> Result<Option<Received>, AttemptFailure> {
        let parsed = chunk::parse(&body, true);
        self.phases.event(Instant::now());
        if parsed.is_err() && looks_like_sse(&body) {
            self.decoder.push(&body);
            self.mode = Mode::Stream;
            // The body is over: the events are all in the decoder already.
            return match self.poll_next_event_chunk(cx) {
                Poll::Ready(read) => read,
                Poll::Pending => Err(AttemptFailure::new(FailureKind::EndedEarly)),
            };
        }
        self.mode = Mode::Over;
        match parsed {
            Ok(Parsed::Chunk(mut chunk)) => {
                chunk
                    .first
                    .finish_reason
                    .get_or_insert_with(|| "stop".to_owned());
                Ok(Some(self.received(None, chunk)))
            }
            Ok(Parsed::Error(message)) => Err(AttemptFailure::new(FailureKind::ErrorChunk(
                self.upstream.scrub(&message),
            ))),
            Ok(Parsed::Done) => Err(AttemptFailure::new(FailureKind::EndedEarly)),
            Err(malformed) => Err(AttemptFailure::new(FailureKind::Protocol(
                malformed.to_string(),
            ))),
        }
    }

    /// Reads the rest of the body into `whole`, keeping at most `limit` bytes; an
    /// error body (`MAX_ERROR_TEXT`) is cut there, any other is refused past it.
    fn poll_whole(
        &mut self,
        cx: &mut Context<'_>,
        limit: usize,
    ) -> Poll<Result<Bytes, AttemptFailure>> {
        while let Some(bytes) = ready!(self.poll_read(cx))? {
            if self.whole.len() + bytes.len() > limit {
                if limit == MAX_ERROR_TEXT {
                    break;
                }
                return Poll::Ready(Err(AttemptFailure::new(FailureKind::Protocol(format!(
                    "body over {limit} bytes"
                )))));
            }
            self.whole.extend_from_slice(&bytes);
            // Bytes of a whole body count as activity; there are no events to wait for.
            self.idle_until = Instant::now() + self.timers.idle;
        }
        Poll::Ready(Ok(self.whole.split().freeze()))
    }

    /// The next piece of the body, bounded by the attempt's timers.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, AttemptFailure>> {
        let first_output_by = self.first_output_by.filter(|_| !self.output_began);
        let (until, fired) = next_timer(self.timers.deadline, self.idle_until, first_output_by);
        if self.timer.deadline() != until {
            self.timer.as_mut().reset(until);
        }
        // An upstream that floods never lets the timer below be polled: the clock
        // is read on every read, so the deadline (and the first-output timeout)
        // ends even an attempt whose bytes are always ready.
        if Instant::now() >= until {
            return Poll::Ready(Err(AttemptFailure::new(fired)));
        }
        // The body is polled first, as `timeout_at` would: bytes that are ready win.
        if let Poll::Ready(next) = self.body.poll_next_unpin(cx) {
            return Poll::Ready(match next {
                None => Ok(None),
                Some(Ok(bytes)) => Ok(Some(bytes)),
                Some(Err(broken)) => Err(AttemptFailure::new(broken)),
            });
        }
        ready!(self.timer.as_mut().poll(cx));
        Poll::Ready(Err(AttemptFailure::new(fired)))
    }
}

/// The earliest of an attempt's clocks, and what it means when it fires. On a tie
/// the deadline wins: a request out of time is not retried.
fn next_timer(
    deadline: Deadline,
    idle_until: Instant,
    first_output_by: Option<Instant>,
) -> (Instant, FailureKind) {
    let mut next = (idle_until, FailureKind::IdleTimeout);
    if let Some(by) = first_output_by
        && by < next.0
    {
        next = (by, FailureKind::FirstOutputTimeout);
    }
    if deadline.at <= next.0 {
        next = (deadline.at, FailureKind::Deadline);
    }
    next
}

fn looks_like_sse(body: &[u8]) -> bool {
    let start = body.trim_ascii_start();
    start.starts_with(b"data:") || start.starts_with(b":") || start.starts_with(b"event:")
}

/// What a non-2xx answer said: an error JSON's fields, else its text; every
/// word scrubbed of the upstream's secrets.
fn refusal(upstream: &Upstream, status: u16, body: &[u8]) -> Refusal {
    let fields = chunk::error_fields(body).unwrap_or_default();
    let from_json = fields.message.is_some();
    let message = fields
        .message
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    Refusal {
        status,
        message: upstream.scrub(&message),
        code: fields.code.map(|code| upstream.scrub(&code)),
        kind: fields.kind.map(|kind| upstream.scrub(&kind)),
        from_json,
    }
}
