//! The attempt loop: one request's attempts, waits and reads under one deadline.
//!
//! A [`Completion`] is a stream of [`Progress`] that the relays turn into the
//! client's format, and it is one state machine driven one way: `poll_next` moves
//! it from phase to phase (queue slot → attempt → retry? → …) and polls each phase
//! in place. Nothing is spawned, so when the client goes away the body is dropped,
//! the completion with it, and the upstream request with that. This is the only
//! module that sleeps; the retry decision itself is the pure
//! `retry::RetryPolicy::decide`.

pub mod answer;
pub mod attempt;
mod continued;
mod cut;
mod failed;
mod gave_up;
mod log;
mod output;
mod phases;
mod prefix;
mod progress;
pub mod recent;
mod shared;
mod spec;
mod start;

pub use answer::Gather;
pub use gave_up::GaveUp;
pub use output::Output;
pub use progress::{Cached, Finished, Progress};
pub use shared::{SharedUpstreams, UpstreamGuards};
pub use spec::Spec;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::Stream;
use futures_util::future::BoxFuture;
use tokio::time::{Instant, Sleep, sleep_until};

use self::answer::Answer;
use self::attempt::{Attempt, OpenFailed, Received};
use self::phases::Phases;
use self::prefix::Prefix;
use self::recent::InAttempt;
use crate::engine::breaker::Counted;
use crate::engine::bulkhead::Slot;
use crate::engine::failure::{AttemptFailure, Classified, FailureKind, Outcome};
use crate::engine::metrics::{InflightGuard, Spent};
use crate::engine::normalize;
use crate::engine::upstream::Upstream;
use crate::engine::upstream::order::UpstreamOrder;

/// Where the loop is. Each phase holds what it waits on, and `poll_next` polls it
/// in place: the per-chunk step (`Streaming`) builds and moves no future.
enum Phase {
    /// Waiting for an in-flight slot (and the task's); the wait (and when it
    /// began) is made only if none is free.
    Queued(Option<(Instant, QueueWait)>),
    /// The next attempt is due.
    Starting,
    /// Every usable upstream is at its `max_inflight`: waiting for the first slot
    /// any of them frees, within the deadline.
    UpstreamFull(BoxFuture<'static, Result<(usize, Slot), GaveUp>>),
    /// Sending the request, until the response head is in (or the attempt failed).
    Connecting(BoxFuture<'static, Result<Attempt, OpenFailed>>),
    /// Reading the attempt's answer.
    Streaming(Box<Attempt>),
    /// Backing off: since when, and until when (the timer is `Completion::sleep`).
    Waiting { since: Instant, until: Instant },
    /// Finished or failed; nothing more comes.
    Over,
}

/// The wait for the slots a request needs.
type QueueWait = BoxFuture<'static, Result<crate::engine::bulkhead::Slots, GaveUp>>;

/// The state of one request's attempt loop.
pub struct Completion {
    shared: Arc<SharedUpstreams>,
    spec: Spec,
    phase: Phase,
    /// The request's way through the upstreams, from its first attempt on.
    order: Option<UpstreamOrder>,
    /// The current attempt is its upstream's half-open breaker probe.
    probe: bool,
    /// The failure the pending retry follows, classified.
    last_failure: Option<(AttemptFailure, Classified)>,
    attempt: u32,
    permit: Option<crate::engine::bulkhead::Slots>,
    /// The current attempt's slot on its upstream (by index), if the upstream
    /// has a `max_inflight`; given back when the attempt ends.
    upstream_slot: Option<(usize, Slot)>,
    /// Counts the current attempt in its upstream's in-flight attempts.
    in_attempt: Option<InAttempt>,
    answer: Answer,
    /// `P` and what goes with it, for continuing a cut answer (contract 11.4).
    prefix: Prefix,
    /// Progress to report before polling on (a continuation's `Continue`,
    /// which follows its `Attempt`).
    announce: Option<Progress>,
    /// How far the current attempt got, when it failed before its answer.
    failed_open: Option<Phases>,
    first_output_seen: bool,
    /// The back-off timer, made at the first back-off and reset for later ones.
    sleep: Option<Pin<Box<Sleep>>>,
    /// Time spent waiting for an in-flight slot.
    queued: Duration,
    /// Time spent in whole back-offs between attempts.
    waited: Duration,
    /// Counts the request in `ladle_inflight_requests` for as long as it lives,
    /// which for a stream is as long as the response body.
    _inflight: InflightGuard,
}

impl Completion {
    /// Prepares a completion; nothing happens until it is polled.
    pub fn new(shared: Arc<SharedUpstreams>, mut spec: Spec) -> Self {
        let permit = spec.slot.take();
        Completion {
            answer: Answer::new(spec.gather),
            prefix: Prefix::new(spec.prefix_limit),
            announce: None,
            phase: match permit {
                Some(_) => Phase::Starting,
                None => Phase::Queued(None),
            },
            spec,
            order: None,
            probe: false,
            last_failure: None,
            attempt: 0,
            permit,
            upstream_slot: None,
            in_attempt: None,
            failed_open: None,
            first_output_seen: false,
            sleep: None,
            queued: Duration::ZERO,
            waited: Duration::ZERO,
            _inflight: shared.metrics.inflight(),
            shared,
        }
    }

    /// The completion as a stream of progress, ending after `Finished` or `Failed`.
    pub fn into_stream(self) -> impl Stream<Item = Progress> + Send + Unpin {
        self
    }

    /// The current attempt's upstream (none before the first attempt).
    fn upstream(&self) -> Option<&Arc<Upstream>> {
        let order = self.order.as_ref()?;
        self.shared.upstreams.get(order.current())
    }

    /// The model sent to the current upstream: its own, or the request's.
    fn model_sent(&self) -> &str {
        self.upstream()
            .and_then(|u| u.model.as_deref())
            .unwrap_or(&self.spec.model)
    }

    fn on_read(&mut self, read: Result<Option<Received>, AttemptFailure>) -> Option<Progress> {
        match read {
            Ok(Some(received)) => self.on_chunk(received),
            Ok(None) => self.on_end(),
            Err(failure) => self.on_failure(failure),
        }
    }

    /// A chunk of the current attempt; `None` when nothing of it is for the
    /// caller (a continuation's usage chunk with no sum to report).
    fn on_chunk(&mut self, mut received: Received) -> Option<Progress> {
        if let Err(overflow) = self.answer.absorb(&received.chunk) {
            return self.on_failure(AttemptFailure::new(FailureKind::from(overflow)));
        }
        self.prefix.absorb(&received.chunk, received.raw.as_ref());
        // Usage comes once per answer at most: the upstream is looked up only then.
        if let Some(usage) = &received.chunk.usage
            && let Some(upstream) = self.upstream()
        {
            let spent = Spent {
                upstream: &upstream.name,
                model: self.model_sent(),
                task: &self.spec.task,
                client: &self.spec.client,
            };
            self.shared.metrics.tokens(&spent, usage);
        }
        if received.chunk.is_output() && !self.first_output_seen {
            self.first_output_seen = true;
            let elapsed = Instant::now() - self.spec.deadline.started;
            self.shared.metrics.first_output(elapsed);
        }
        if self.prefix.continuing.is_some()
            && let Some(raw) = &received.raw
        {
            let usage = received.chunk.usage.as_deref();
            received.raw = Some(self.prefix.continue_chunk(raw, usage)?);
        }
        Some(Progress::Chunk(received))
    }

    fn on_end(&mut self) -> Option<Progress> {
        let output = match self.spec.output {
            None => None,
            Some(kind) => match normalize::normalize(kind, self.answer.content()) {
                Ok(value) => Some(Output::of(&value)),
                Err(invalid) => {
                    return self.on_failure(AttemptFailure::new(FailureKind::InvalidOutput(
                        invalid.to_string(),
                    )));
                }
            },
        };
        let elapsed = Instant::now() - self.spec.deadline.started;
        self.upstream_slot = None;
        self.log_attempt(Outcome::Ok, None, None, false);
        self.count_attempt(Outcome::Ok, Counted::Success);
        self.phase = Phase::Over;
        let answer = std::mem::replace(&mut self.answer, Answer::new(Gather::Nothing));
        let gathered = answer.gathered();
        let upstream = self.upstream().map(|u| u.name.clone()).unwrap_or_default();
        let model = self.model_sent().to_owned();
        Some(Progress::Finished(Box::new(Finished {
            choices: answer.choices,
            usage: self.prefix.billed.total(answer.usage),
            meta: answer.meta,
            output,
            attempts: self.attempt,
            upstream,
            model,
            elapsed,
            cache: None,
            gathered,
        })))
    }

    /// The request failed before any attempt (no in-flight slot in time).
    fn on_refused(&mut self, gave_up: GaveUp) -> Progress {
        self.phase = Phase::Over;
        Progress::Failed(gave_up)
    }
}

impl Stream for Completion {
    type Item = Progress;

    /// The one place the loop moves: each phase is polled where it lies, and every
    /// step that produces progress returns it (logging the request's summary when
    /// it is the last).
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Progress>> {
        let this = &mut *self;
        if let Some(announced) = this.announce.take() {
            return Poll::Ready(Some(announced));
        }
        let progress = loop {
            match &mut this.phase {
                Phase::Over => return Poll::Ready(None),
                Phase::Queued(wait) => {
                    let permit = match wait {
                        None => match this.try_slots() {
                            Ok(slots) => Ok(slots),
                            Err(task) => {
                                let waiting = (Instant::now(), this.queue_wait(task));
                                this.phase = Phase::Queued(Some(waiting));
                                continue;
                            }
                        },
                        Some((entered, wait)) => {
                            let acquired = ready!(wait.as_mut().poll(cx));
                            this.queued = entered.elapsed();
                            acquired
                        }
                    };
                    this.shared.metrics.queue_wait(this.queued);
                    match permit {
                        Ok(permit) => {
                            this.permit = Some(permit);
                            this.phase = Phase::Starting;
                        }
                        Err(error) => break this.on_refused(error),
                    }
                }
                Phase::Starting => match this.start_attempt() {
                    Some(progress) => break progress,
                    None => continue,
                },
                Phase::UpstreamFull(wait) => match ready!(wait.as_mut().poll(cx)) {
                    Ok((index, slot)) => {
                        if let Some(order) = this.order.as_mut() {
                            order.go_to(index);
                        }
                        this.upstream_slot = Some((index, slot));
                        this.phase = Phase::Starting;
                    }
                    Err(error) => break this.on_refused(error),
                },
                Phase::Connecting(open) => match ready!(open.as_mut().poll(cx)) {
                    Ok(attempt) => this.phase = Phase::Streaming(Box::new(attempt)),
                    Err(failed) => {
                        this.failed_open = Some(failed.phases);
                        if let Some(progress) = this.on_failure(failed.failure) {
                            break progress;
                        }
                    }
                },
                Phase::Streaming(attempt) => {
                    let read = ready!(attempt.poll_next(cx));
                    if let Some(progress) = this.on_read(read) {
                        break progress;
                    }
                }
                Phase::Waiting { since, until } => {
                    let (since, until) = (*since, *until);
                    let sleep = this
                        .sleep
                        .get_or_insert_with(|| Box::pin(sleep_until(until)));
                    if sleep.deadline() != until {
                        sleep.as_mut().reset(until);
                    }
                    ready!(sleep.as_mut().poll(cx));
                    this.waited += until - since;
                    this.phase = Phase::Starting;
                }
            }
        };
        match &progress {
            Progress::Finished(_) => this.log_request("ok"),
            Progress::Failed(gave_up) => this.log_request(gave_up.code()),
            _ => {}
        }
        if matches!(progress, Progress::Finished(_) | Progress::Failed(_)) {
            // The slot is free once the answer is whole, however long its client
            // takes to read the rest of the body.
            this.permit = None;
        }
        Poll::Ready(Some(progress))
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if matches!(self.phase, Phase::Connecting(_) | Phase::Streaming(_)) {
            self.count_attempt(Outcome::Cancelled, Counted::Neither);
            self.log_attempt(Outcome::Cancelled, None, None, false);
        }
        if !matches!(self.phase, Phase::Over) {
            self.log_request("cancelled");
        }
    }
}

#[cfg(test)]
mod tests;
