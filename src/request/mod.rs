//! One completion request, whichever route it came in on: built once from what
//! the route extracted (a [`Call`]), looked up under its idempotency key if it has
//! one, completed, and answered in the shape it asked for. The chat and task
//! routes only turn HTTP into a `Call`.

pub mod body;
pub mod job_run;
mod keyed;
pub mod responses;
pub mod submit;
mod task;

pub use task::{TaskRequest, task_call};

use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::Either;
use futures_util::stream::BoxStream;
use serde_json::Value;
use tokio::time::Instant;

use crate::cache::serve::{CacheUse, serve};
use crate::cache::{AnswerKey, CacheControl};
use crate::engine::bulkhead::{Bulkhead, Slots};
use crate::engine::completion::{Cached, Completion, Finished, Gather, Progress, Spec};
use crate::engine::retry::{Deadline, RetryPolicy};
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::idempotency::{self, Kept};
use crate::ops::facts::{CompletionNote, LateWord};
use crate::ops::telemetry::InSpan;
use crate::prompts::Prompt;
use crate::relay::Reply;
use crate::state::AppState;

/// What a completion route extracted: everything the request needs from here on.
pub struct Call {
    /// Who the answer is for, and in what shape.
    pub reply: Reply,
    /// When the request arrived: its deadline runs from here.
    pub arrived: Instant,
    /// `X-Request-Timeout-Ms`, which only shortens the deadline.
    pub timeout: Option<Duration>,
    /// `Idempotency-Key`, with the JSON that names the request under it.
    pub key: Option<(String, Value)>,
    /// The upstream request body (`stream: true`).
    pub body: Bytes,
    /// It asks for one choice: a cut answer can be continued.
    pub one_choice: bool,
    /// The task's prompt: its deadline, reserve and output kind.
    pub prompt: Option<Arc<Prompt>>,
    /// For a task with `[cache]`: what its answer is kept under.
    pub cache_key: Option<AnswerKey>,
    /// The request's `Cache-Control`, as far as the cache cares.
    pub cache_control: CacheControl,
    /// The client key's name (`""` without client keys): its idempotency keys
    /// are its own.
    pub client: String,
    /// The request's trace (a job's run starts one of its own).
    pub trace: TraceContext,
    /// A stored Responses API response made without `background`: kept when
    /// it ends.
    pub keep: Option<responses::kept::ToKeep>,
}

impl Call {
    /// The spec for the attempt loop: the chat route's settings, or the task's own
    /// deadline, reserve, output kind and bulkhead. The deadline runs from the
    /// arrival; `slot` holds the slots a job's run took already.
    pub fn spec(&self, app: &AppState, slot: Option<Slots>) -> Spec {
        let config = &app.config;
        let prompt = self.prompt.as_deref();
        let assembled = self.reply.shape.assembled();
        let policy = RetryPolicy {
            min_remaining: prompt
                .and_then(|p| p.min_remaining)
                .unwrap_or(config.retry.min_remaining),
            // A committed stream cannot take words back.
            retry_after_output: assembled,
            ..config.retry
        };
        let configured = prompt.and_then(|p| p.deadline).unwrap_or(config.deadline);
        let allowed = self
            .timeout
            .map_or(configured, |asked| asked.min(configured));
        Spec {
            body: self.body.clone(),
            policy,
            deadline: Deadline::after(self.arrived, allowed),
            output: prompt.map(|p| p.output),
            gather: match (assembled, &self.key) {
                (true, _) => Gather::Whole(config.max_answer_bytes),
                // A relayed stream kept under its key: its repeats get it whole.
                (false, Some(_)) => Gather::ToKeep(config.max_answer_bytes),
                (false, None) => Gather::Nothing,
            },
            prefix_limit: self.one_choice.then_some(config.max_answer_bytes),
            slot,
            task_bulkhead: task_bulkhead(app, self),
            task: self.reply.route.task().unwrap_or_default().to_owned(),
            model: self.reply.model.clone(),
            client: self.client.clone(),
            trace: self.trace.clone(),
        }
    }
}

impl Call {
    /// The span a completion's log lines are written in: what the edge knows of
    /// the request (and, for a job's run, its job), named once.
    fn span(&self, job_id: Option<&str>) -> tracing::Span {
        tracing::info_span!(
            "completion",
            request_id = %self.reply.request_id,
            trace_id = %self.trace.id(),
            route = self.reply.route.path(),
            task = self.reply.route.task(),
            job_id,
        )
    }
}

/// The progress of `call`'s completion (`spec`; for a job's run, `job_id`'s),
/// polled in the call's span (`Call::span`): through the answer cache when its
/// task keeps answers, where a hit makes no completion at all. `seen` learns
/// what the cache did.
pub fn progress(
    app: &AppState,
    call: &Call,
    spec: Spec,
    seen: LateWord,
    job_id: Option<&str>,
) -> Either<InSpan<Completion>, BoxStream<'static, Progress>> {
    let upstreams = app.upstreams.clone();
    let span = call.span(job_id);
    let run = move || InSpan::new(Completion::new(upstreams, spec), span);
    match (&call.cache_key, call.prompt.as_deref()) {
        (Some(key), Some(prompt)) => Either::Right(serve(
            CacheUse {
                cache: app.cache.clone(),
                key: key.clone(),
                policy: prompt.cache,
                control: call.cache_control,
                metrics: app.metrics.clone(),
                arrived: call.arrived,
                request_id: call.reply.request_id.clone(),
                seen,
            },
            run,
        )),
        _ => Either::Left(run()),
    }
}

/// Remembers how long a task's answer made now was (a kept answer is not
/// counted): `progress` events' `expected_chars`.
pub fn remember_length(app: &AppState, task: &str, finished: &Finished) {
    if matches!(
        finished.cache,
        Some(Cached::Hit { .. } | Cached::Stale { .. })
    ) {
        return;
    }
    if let Some(choice) = finished.choices.first() {
        let chars = choice.content.chars().count() as u64;
        app.jobs.events().expected().answered(task, chars);
    }
}

/// The bulkhead of `call`'s task, if its prompt sets `max_inflight`.
pub fn task_bulkhead(app: &AppState, call: &Call) -> Option<Bulkhead> {
    let prompt = call.prompt.as_deref()?;
    Some(app.tasks.of(&prompt.name, prompt.max_inflight?))
}

/// Completes `call` and answers; `note` gathers what the request's log line adds.
pub async fn complete(
    app: &AppState,
    mut call: Call,
    note: &mut CompletionNote,
) -> Result<Response, ApiError> {
    let spec = call.spec(app, None);
    let deadline = spec.deadline;
    note.deadline = Some(deadline);
    let seen = LateWord::default();
    if call.cache_key.is_some() {
        note.cache = Some(seen.clone());
    }
    // Made only when it runs: a replay makes none.
    let run = || progress(app, &call, spec, seen, None);
    let progress = match &call.key {
        None => Either::Left(run()),
        Some((key, identity)) => {
            let path = call.reply.route.request_path();
            let looked_up = keyed::look_up(
                app,
                (&call.client, key),
                &path,
                identity,
                &call.reply,
                deadline.at,
                note,
            );
            match looked_up.await? {
                keyed::KeyLookup::Answered(response) => return Ok(response),
                keyed::KeyLookup::Runs(slot) => {
                    let (reply, most) = (call.reply.clone(), app.config.max_answer_bytes);
                    // Only a whole answer is kept; its repeats get what a client gets.
                    let keep = move |finished: &Finished| match finished.gathered {
                        true => Ok(Kept::Answer(Box::new(reply.kept(finished)))),
                        false => Err(ApiError::AnswerTooLarge(most)),
                    };
                    Either::Right(idempotency::detached(run(), slot, keep, &app.background))
                }
            }
        }
    };
    let store = app.jobs.store().clone();
    let usage = note.usage.clone();
    let (app, task) = (app.clone(), call.reply.route.task().map(str::to_owned));
    let progress = progress.inspect(move |step| {
        if let Progress::Finished(finished) = step {
            if let Some(reported) = &finished.usage {
                usage.set(reported);
            }
            if let Some(task) = &task {
                remember_length(&app, task, finished);
            }
        }
    });
    let progress = responses::kept::keeping(store, call.keep.take(), progress);
    Ok(call.reply.answer(progress).await)
}
