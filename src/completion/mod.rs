//! The attempt loop: one request's attempts, waits and reads under one deadline.
//!
//! A [`Completion`] is a stream of [`Progress`] that the relays turn into the
//! client's format. It is driven by the response body itself: nothing is spawned, so
//! when the client goes away the body is dropped, the completion with it, and the
//! upstream request with that. This is the only module that sleeps; the retry
//! decision itself is the pure `retry::RetryPolicy::decide`.

pub mod attempt;
pub mod failure;
mod progress;

pub use progress::{Finished, Progress};

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, sleep_until, timeout_at};

use self::attempt::{Attempt, Received};
use self::failure::{AttemptFailure, FailureKind};
use crate::error::ApiError;
use crate::normalize::{self, OutputKind};
use crate::ops::metrics::{InflightGuard, Metrics};
use crate::retry::{BusyKeywords, Deadline, Decision, Failed, FailureClass, RetryPolicy};
use crate::upstream::Upstream;
use crate::upstream::chunk::{Chunk, Meta};

/// What every completion shares: upstreams, the in-flight limit, metrics.
pub struct Engine {
    /// Upstreams in order of preference.
    pub upstreams: Vec<Arc<Upstream>>,
    /// Longest wait for the upstream's next event.
    pub idle_timeout: Duration,
    /// Substrings that mark an upstream error as busy.
    pub busy_keywords: BusyKeywords,
    /// Bounds concurrent upstream calls.
    pub inflight: Arc<Semaphore>,
    /// Longest wait for an in-flight slot.
    pub queue_timeout: Duration,
    /// Where counters go.
    pub metrics: Metrics,
}

impl Engine {
    /// Which upstream the given attempt goes to. One upstream today; fallback
    /// between several only changes this answer.
    fn upstream_for(&self, _attempt: u32) -> Option<&Arc<Upstream>> {
        self.upstreams.first()
    }
}

/// One request to complete.
pub struct Job {
    /// The upstream request body, with `stream: true`.
    pub body: Bytes,
    /// The retry policy for this request.
    pub policy: RetryPolicy,
    /// The request's one deadline.
    pub deadline: Deadline,
    /// The task's output kind; `None` returns the text as it is.
    pub output: Option<OutputKind>,
    /// For logs: the request id.
    pub request_id: String,
    /// For logs: the task's name; `None` for the chat route.
    pub task: Option<String>,
    /// Whether to keep the upstream's completion id and model: a whole answer
    /// reports them, while a relayed stream carries them in its own chunks.
    pub wants_meta: bool,
    /// The model sent upstream, for the token counts.
    pub model: String,
}

impl Job {
    /// The route the job came from, for logs.
    fn route(&self) -> &'static str {
        if self.task.is_some() {
            "/v1/tasks/{name}"
        } else {
            "/v1/chat/completions"
        }
    }
}

enum Phase {
    Queued,
    Starting,
    Connecting,
    Refused(AttemptFailure),
    Streaming(Box<Attempt>),
    /// Backing off: since when, and until when.
    Waiting {
        since: Instant,
        until: Instant,
    },
    Over,
}

/// The state of one request's attempt loop.
pub struct Completion {
    engine: Arc<Engine>,
    job: Job,
    phase: Phase,
    attempt: u32,
    permit: Option<OwnedSemaphorePermit>,
    answer: Answer,
    first_output_seen: bool,
    /// Time spent waiting for an in-flight slot.
    queued: Duration,
    /// Time spent in back-offs between attempts.
    waited: Duration,
    /// Counts the request in `ladle_inflight_requests` for as long as it lives,
    /// which for a stream is as long as the response body.
    _inflight: InflightGuard,
}

/// What the current attempt has written; reset with each attempt.
#[derive(Default)]
struct Answer {
    content: String,
    reasoning: String,
    finish_reason: Option<String>,
    usage: Option<Value>,
    meta: Meta,
}

impl Answer {
    /// Adds what one chunk wrote.
    fn absorb(&mut self, chunk: &Chunk) {
        if let Some(content) = &chunk.content {
            self.content.push_str(content);
        }
        if let Some(reasoning) = &chunk.reasoning {
            self.reasoning.push_str(reasoning);
        }
        if let Some(reason) = &chunk.finish_reason {
            self.finish_reason = Some(reason.clone());
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(Value::clone(usage));
        }
        if let Some(meta) = &chunk.meta
            && self.meta.id.is_none()
        {
            self.meta = Meta::clone(meta);
        }
    }
}

impl Completion {
    /// Prepares a completion; nothing happens until it is polled.
    pub fn new(engine: Arc<Engine>, job: Job) -> Self {
        Completion {
            job,
            phase: Phase::Queued,
            attempt: 0,
            permit: None,
            answer: Answer::default(),
            first_output_seen: false,
            queued: Duration::ZERO,
            waited: Duration::ZERO,
            _inflight: engine.metrics.inflight(),
            engine,
        }
    }

    /// The completion as a stream of progress, ending after `Finished` or `Failed`.
    pub fn into_stream(self) -> impl Stream<Item = Progress> + Send {
        ProgressStream {
            idle: Some(Box::new(self)),
            busy: None,
        }
    }

    /// Drives the loop to the next piece of progress; logs the request's summary
    /// line when it finishes or fails.
    pub async fn next(&mut self) -> Option<Progress> {
        let progress = self.advance().await?;
        Some(self.logged(progress))
    }

    /// The steps that need no waiting, taken in place: a free in-flight slot, the
    /// start of an attempt, and the next chunk of an event stream (the per-chunk
    /// path). `None` for every other step, which `next` runs as a future.
    fn poll_in_place(&mut self, cx: &mut Context<'_>) -> Option<Poll<Progress>> {
        loop {
            match &mut self.phase {
                Phase::Queued => {
                    let permit = self.engine.inflight.clone().try_acquire_owned().ok()?;
                    self.permit = Some(permit);
                    self.phase = Phase::Starting;
                }
                Phase::Starting => return Some(Poll::Ready(self.start_attempt())),
                Phase::Streaming(attempt) if !attempt.reads_whole() => {
                    let Poll::Ready(read) = attempt.poll_next_event_chunk(cx) else {
                        return Some(Poll::Pending);
                    };
                    let progress = self.on_read(read);
                    return Some(Poll::Ready(self.logged(progress)));
                }
                _ => return None,
            }
        }
    }

    /// Logs the request's summary line once it finishes or fails.
    fn logged(&self, progress: Progress) -> Progress {
        match &progress {
            Progress::Finished(_) => self.log_request("ok"),
            Progress::Failed(error) => self.log_request(error.code()),
            _ => {}
        }
        progress
    }

    async fn advance(&mut self) -> Option<Progress> {
        loop {
            match &mut self.phase {
                Phase::Over => return None,
                // The rare steps are boxed: this future is moved on every chunk,
                // so its size is that of the common step, reading the stream.
                Phase::Queued => {
                    if let Err(error) = Box::pin(self.enter_queue()).await {
                        self.phase = Phase::Over;
                        return Some(Progress::Failed(error));
                    }
                    self.phase = Phase::Starting;
                }
                Phase::Waiting { since, until } => {
                    let (since, until) = (*since, *until);
                    Box::pin(sleep_until(until)).await;
                    self.waited += until - since;
                    self.phase = Phase::Starting;
                }
                Phase::Starting => return Some(self.start_attempt()),
                Phase::Connecting => Box::pin(self.connect()).await,
                Phase::Refused(failure) => {
                    let failure = failure.clone();
                    return Some(self.on_failure(failure));
                }
                Phase::Streaming(attempt) => {
                    let read = attempt.next().await;
                    return Some(self.on_read(read));
                }
            }
        }
    }

    async fn enter_queue(&mut self) -> Result<(), ApiError> {
        let entered = Instant::now();
        let limit = (entered + self.engine.queue_timeout).min(self.job.deadline.at);
        let acquire = self.engine.inflight.clone().acquire_owned();
        let acquired = timeout_at(limit, acquire).await;
        self.queued = entered.elapsed();
        match acquired {
            Ok(Ok(permit)) => {
                self.permit = Some(permit);
                Ok(())
            }
            _ if limit == self.job.deadline.at => Err(ApiError::DeadlineExceeded),
            _ => Err(ApiError::Overloaded {
                retry_after: self.engine.queue_timeout,
            }),
        }
    }

    fn start_attempt(&mut self) -> Progress {
        self.attempt += 1;
        self.answer = Answer::default();
        self.phase = Phase::Connecting;
        Progress::Attempt(self.attempt)
    }

    async fn connect(&mut self) {
        let Some(upstream) = self.engine.upstream_for(self.attempt).cloned() else {
            let failure = FailureKind::Protocol("no upstream is configured".into());
            self.phase = Phase::Refused(AttemptFailure::new(failure));
            return;
        };
        let opened = Attempt::open(
            &upstream,
            self.job.body.clone(),
            self.engine.idle_timeout,
            self.job.deadline,
            self.job.wants_meta,
        )
        .await;
        self.phase = match opened {
            Ok(attempt) => Phase::Streaming(Box::new(attempt)),
            Err(failure) => Phase::Refused(failure),
        };
    }

    fn on_read(&mut self, read: Result<Option<Received>, AttemptFailure>) -> Progress {
        match read {
            Ok(Some(received)) => self.on_chunk(received),
            Ok(None) => self.on_end(),
            Err(failure) => self.on_failure(failure),
        }
    }

    fn on_chunk(&mut self, received: Received) -> Progress {
        self.answer.absorb(&received.chunk);
        if let (Some(usage), Some(upstream)) = (
            &received.chunk.usage,
            self.engine.upstream_for(self.attempt),
        ) {
            self.engine
                .metrics
                .tokens(&upstream.name, &self.job.model, usage);
        }
        if received.chunk.is_output() && !self.first_output_seen {
            self.first_output_seen = true;
            let elapsed = Instant::now() - self.job.deadline.started;
            self.engine.metrics.first_output(elapsed);
        }
        Progress::Chunk(received)
    }

    fn on_end(&mut self) -> Progress {
        let output = match self.job.output {
            None => None,
            Some(kind) => match normalize::normalize(kind, &self.answer.content) {
                Ok(value) => Some(value),
                Err(invalid) => {
                    return self.on_failure(AttemptFailure::new(FailureKind::InvalidOutput(
                        invalid.to_string(),
                    )));
                }
            },
        };
        let elapsed = Instant::now() - self.job.deadline.started;
        self.log_attempt("ok", "", None);
        self.engine.metrics.attempt("ok");
        self.phase = Phase::Over;
        let answer = std::mem::take(&mut self.answer);
        Progress::Finished(Box::new(Finished {
            content: answer.content,
            reasoning: answer.reasoning,
            finish_reason: answer.finish_reason,
            usage: answer.usage,
            meta: answer.meta,
            output,
            attempts: self.attempt,
            elapsed,
        }))
    }

    fn on_failure(&mut self, failure: AttemptFailure) -> Progress {
        let output_began = matches!(&self.phase, Phase::Streaming(a) if a.output_began());
        let class = failure.class(output_began, &self.engine.busy_keywords);
        let failed = Failed {
            attempt: self.attempt,
            class,
            output_began,
            retry_after: failure.retry_after,
        };
        let now = Instant::now();
        let decision = self.job.policy.decide(failed, now, self.job.deadline);
        let outcome = failure.outcome(class);
        self.engine.metrics.attempt(outcome);
        let reason = match class {
            FailureClass::Busy => "busy",
            FailureClass::NotStarted => "not_started",
            FailureClass::Other | FailureClass::Final => "failed",
        };
        let wait = match decision {
            Decision::Wait(wait) => wait,
            Decision::RetryNow => Duration::ZERO,
            Decision::GiveUp => {
                self.log_attempt(outcome, failure.kind.detail(), None);
                self.phase = Phase::Over;
                let hint = self.job.policy.backoff(self.attempt);
                return Progress::Failed(failure.into_api_error(class, self.attempt, hint));
            }
        };
        self.log_attempt(outcome, failure.kind.detail(), Some(wait));
        self.engine.metrics.retry(reason);
        self.phase = Phase::Waiting {
            since: now,
            until: now + wait,
        };
        Progress::Retry {
            attempt: self.attempt,
            reason,
            wait,
            output_began,
        }
    }

    /// Back-off time actually spent: whole waits, and the part of the current one
    /// that has passed (a request cancelled mid-wait did not wait the rest).
    fn time_waited(&self) -> Duration {
        match self.phase {
            Phase::Waiting { since, .. } => self.waited + since.elapsed(),
            _ => self.waited,
        }
    }

    /// One line per attempt: what happened and what the loop does next
    /// (`decision` = `retry` after `wait_ms`, or `stop`).
    fn log_attempt(&self, outcome: &str, detail: &str, retry_in: Option<Duration>) {
        let decision = if retry_in.is_some() { "retry" } else { "stop" };
        let upstream = self
            .engine
            .upstream_for(self.attempt)
            .map(|u| u.name.as_str());
        tracing::info!(
            request_id = %self.job.request_id,
            route = self.job.route(),
            task = self.job.task.as_deref(),
            upstream,
            attempt = self.attempt,
            elapsed_ms = self.elapsed_ms(),
            outcome,
            decision,
            wait_ms = retry_in.unwrap_or_default().as_millis() as u64,
            detail,
            "attempt ended"
        );
    }

    /// One line per request: `outcome` is `ok`, the error code, or `cancelled`;
    /// `attempt` is the number of attempts made; `wait_ms` adds up the back-offs.
    fn log_request(&self, outcome: &str) {
        tracing::info!(
            request_id = %self.job.request_id,
            route = self.job.route(),
            task = self.job.task.as_deref(),
            attempt = self.attempt,
            elapsed_ms = self.elapsed_ms(),
            outcome,
            wait_ms = self.time_waited().as_millis() as u64,
            queue_ms = self.queued.as_millis() as u64,
            "completion ended"
        );
    }

    fn elapsed_ms(&self) -> u64 {
        (Instant::now() - self.job.deadline.started).as_millis() as u64
    }
}

/// A completion as a stream. The steps that need no waiting (above all reading an
/// event stream) are polled in place; every other step runs `Completion::next` as
/// a future that owns the boxed completion until it resolves, so no future is
/// built or moved per chunk.
struct ProgressStream {
    /// The completion, while no step is in flight.
    idle: Option<Box<Completion>>,
    /// A step in flight, holding the completion.
    busy: Option<BoxFuture<'static, (Box<Completion>, Option<Progress>)>>,
}

impl Stream for ProgressStream {
    type Item = Progress;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Progress>> {
        let this = &mut *self;
        if let Some(completion) = this.idle.as_mut()
            && let Some(polled) = completion.poll_in_place(cx)
        {
            return polled.map(Some);
        }
        if let Some(mut completion) = this.idle.take() {
            this.busy = Some(Box::pin(async move {
                let progress = completion.next().await;
                (completion, progress)
            }));
        }
        let Some(busy) = this.busy.as_mut() else {
            return Poll::Ready(None);
        };
        let (completion, progress) = ready!(busy.as_mut().poll(cx));
        this.busy = None;
        this.idle = Some(completion);
        Poll::Ready(progress)
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if matches!(self.phase, Phase::Connecting | Phase::Streaming(_)) {
            self.engine.metrics.attempt("cancelled");
            self.log_attempt("cancelled", "the client went away", None);
        }
        if !matches!(self.phase, Phase::Over) {
            self.log_request("cancelled");
        }
    }
}

#[cfg(test)]
mod tests;
