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
mod failed;
mod job;
mod log;
mod progress;
mod shared;

pub use job::{CompletionRoute, Job};
pub use progress::{Cached, Finished, Progress};
pub use shared::{SharedUpstreams, UpstreamGuards};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::Stream;
use futures_util::future::BoxFuture;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep, sleep_until, timeout_at};

use self::answer::Answer;
use self::attempt::{Attempt, Received, Timers};
use crate::breaker::{Admission, Counted};
use crate::error::ApiError;
use crate::failure::{AttemptFailure, Classified, FailureKind, Outcome};
use crate::normalize;
use crate::ops::metrics::InflightGuard;
use crate::upstream::Upstream;
use crate::upstream::order::UpstreamOrder;

/// Where the loop is. Each phase holds what it waits on, and `poll_next` polls it
/// in place: the per-chunk step (`Streaming`) builds and moves no future.
enum Phase {
    /// Waiting for an in-flight slot; the wait (and when it began) is made only if
    /// none is free.
    Queued(Option<(Instant, QueueWait)>),
    /// The next attempt is due.
    Starting,
    /// Sending the request, until the response head is in (or the attempt failed).
    Connecting(BoxFuture<'static, Result<Attempt, AttemptFailure>>),
    /// Reading the attempt's answer.
    Streaming(Box<Attempt>),
    /// Backing off: since when, and until when (the timer is `Completion::sleep`).
    Waiting { since: Instant, until: Instant },
    /// Finished or failed; nothing more comes.
    Over,
}

/// The wait for an in-flight slot.
type QueueWait = BoxFuture<'static, Result<OwnedSemaphorePermit, ApiError>>;

/// The state of one request's attempt loop.
pub struct Completion {
    shared: Arc<SharedUpstreams>,
    job: Job,
    phase: Phase,
    /// The request's way through the upstreams, from its first attempt on.
    order: Option<UpstreamOrder>,
    /// The current attempt is its upstream's half-open breaker probe.
    probe: bool,
    /// The failure the pending retry follows, classified.
    last_failure: Option<(AttemptFailure, Classified)>,
    attempt: u32,
    permit: Option<OwnedSemaphorePermit>,
    answer: Answer,
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
    pub fn new(shared: Arc<SharedUpstreams>, mut job: Job) -> Self {
        let permit = job.slot.take();
        Completion {
            answer: Answer::new(job.answer_limit),
            phase: match permit {
                Some(_) => Phase::Starting,
                None => Phase::Queued(None),
            },
            job,
            order: None,
            probe: false,
            last_failure: None,
            attempt: 0,
            permit,
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

    /// The wait for an in-flight slot, bounded by the queue timeout and the deadline.
    fn queue_wait(&self) -> QueueWait {
        let limit = (Instant::now() + self.shared.queue_timeout).min(self.job.deadline.at);
        let acquire = self.shared.inflight.clone().acquire_owned();
        let (deadline, retry_after) = (self.job.deadline.at, self.shared.queue_timeout);
        Box::pin(async move {
            match timeout_at(limit, acquire).await {
                Ok(Ok(permit)) => Ok(permit),
                _ if limit == deadline => Err(ApiError::DeadlineExceeded),
                _ => Err(ApiError::Overloaded { retry_after }),
            }
        })
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
            .unwrap_or(&self.job.model)
    }

    fn start_attempt(&mut self) -> Progress {
        let now = Instant::now();
        if self.order.is_none() {
            let candidates = self.shared.candidates(now);
            self.order = UpstreamOrder::start(&candidates, rand::random::<f64>());
        }
        let Some(probe) = self.admit(now) else {
            // No upstream for this attempt: a retry ends with the failure that
            // asked for it; a first attempt with every breaker open.
            let refused = match self.last_failure.take() {
                Some((failure, classified)) => {
                    let hint = self.job.policy.backoff(self.attempt);
                    failure.into_error(classified, self.attempt, hint)
                }
                None => self.all_open(now),
            };
            return self.on_refused(refused);
        };
        self.probe = probe;
        let Some(order) = self.order.as_mut() else {
            return self.on_refused(self.all_open(now));
        };
        if order.enter() {
            self.shared.first_attempt(order.current(), now);
        }
        self.attempt += 1;
        self.answer = Answer::new(self.job.answer_limit);
        let upstream = self.shared.upstreams[order.current()].clone();
        let body = upstream.body_for(&self.job.body, &self.job.model);
        let timers = Timers::new(self.shared.timeouts, self.job.deadline);
        let open = Attempt::open(upstream, body, timers, self.job.answer_limit.is_some());
        self.phase = Phase::Connecting(Box::pin(open));
        Progress::Attempt(self.attempt)
    }

    /// Asks the current upstream's breaker to admit the attempt: whether it is the
    /// half-open probe, or `None` when no upstream admits it. A half-open breaker
    /// admits one probe, and another request may have taken it since this one
    /// chose; another upstream is taken instead only if this request has not called
    /// it yet (an immediate fallback, a first attempt for its budget).
    fn admit(&mut self, now: Instant) -> Option<bool> {
        let order = self.order.as_mut()?;
        for _ in 0..self.shared.upstreams.len() {
            match self.shared.admit(order.current(), now) {
                Admission::Pass => return Some(false),
                Admission::Probe => return Some(true),
                Admission::Refused => {
                    let next = order.next(true, |index| self.shared.usable(index, now));
                    match next {
                        Some(next) if next.upstream.untried => order.move_to(next),
                        _ => return None,
                    }
                }
            }
        }
        None
    }

    /// No upstream can be called: every breaker is open (or probing).
    fn all_open(&self, now: Instant) -> ApiError {
        ApiError::UpstreamBusy {
            retry_after: self.shared.opens_again_in(now),
        }
    }

    fn on_read(&mut self, read: Result<Option<Received>, AttemptFailure>) -> Progress {
        match read {
            Ok(Some(received)) => self.on_chunk(received),
            Ok(None) => self.on_end(),
            Err(failure) => self.on_failure(failure),
        }
    }

    fn on_chunk(&mut self, received: Received) -> Progress {
        if let Err(overflow) = self.answer.absorb(&received.chunk) {
            return self.on_failure(AttemptFailure::new(FailureKind::from(overflow)));
        }
        // Usage comes once per answer at most: the upstream is looked up only then.
        if let Some(usage) = &received.chunk.usage
            && let Some(upstream) = self.upstream()
        {
            self.shared
                .metrics
                .tokens(&upstream.name, self.model_sent(), usage);
        }
        if received.chunk.is_output() && !self.first_output_seen {
            self.first_output_seen = true;
            let elapsed = Instant::now() - self.job.deadline.started;
            self.shared.metrics.first_output(elapsed);
        }
        Progress::Chunk(received)
    }

    fn on_end(&mut self) -> Progress {
        let output = match self.job.output {
            None => None,
            Some(kind) => match normalize::normalize(kind, self.answer.content()) {
                Ok(value) => Some(value),
                Err(invalid) => {
                    return self.on_failure(AttemptFailure::new(FailureKind::InvalidOutput(
                        invalid.to_string(),
                    )));
                }
            },
        };
        let elapsed = Instant::now() - self.job.deadline.started;
        self.log_attempt(Outcome::Ok, None, None, false);
        self.count_attempt(Outcome::Ok, Counted::Success);
        self.phase = Phase::Over;
        let answer = std::mem::replace(&mut self.answer, Answer::new(None));
        let upstream = self.upstream().map(|u| u.name.clone()).unwrap_or_default();
        let model = self.model_sent().to_owned();
        Progress::Finished(Box::new(Finished {
            choices: answer.choices,
            usage: answer.usage,
            meta: answer.meta,
            output,
            attempts: self.attempt,
            upstream,
            model,
            elapsed,
            cache: None,
        }))
    }

    /// The request failed before any attempt (no in-flight slot in time).
    fn on_refused(&mut self, error: ApiError) -> Progress {
        self.phase = Phase::Over;
        Progress::Failed(error)
    }
}

impl Stream for Completion {
    type Item = Progress;

    /// The one place the loop moves: each phase is polled where it lies, and every
    /// step that produces progress returns it (logging the request's summary when
    /// it is the last).
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Progress>> {
        let this = &mut *self;
        let progress = loop {
            match &mut this.phase {
                Phase::Over => return Poll::Ready(None),
                Phase::Queued(wait) => {
                    let permit = match wait {
                        None => match this.shared.inflight.clone().try_acquire_owned() {
                            Ok(permit) => Ok(permit),
                            Err(_) => {
                                let waiting = (Instant::now(), this.queue_wait());
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
                    match permit {
                        Ok(permit) => {
                            this.permit = Some(permit);
                            this.phase = Phase::Starting;
                        }
                        Err(error) => break this.on_refused(error),
                    }
                }
                Phase::Starting => break this.start_attempt(),
                Phase::Connecting(open) => match ready!(open.as_mut().poll(cx)) {
                    Ok(attempt) => this.phase = Phase::Streaming(Box::new(attempt)),
                    Err(failure) => break this.on_failure(failure),
                },
                Phase::Streaming(attempt) => {
                    let read = ready!(attempt.poll_next(cx));
                    break this.on_read(read);
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
            Progress::Failed(error) => this.log_request(error.code()),
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
