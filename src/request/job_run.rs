//! A job's run: the synchronous task request, made by ladle itself (contract
//! 7.1). It waits for an in-flight slot without a time limit, and its deadline
//! starts once it has one; everything else (back-off, fallback, breakers,
//! budgets) is the ordinary request's.

use futures_util::future::BoxFuture;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio::time::Instant;

use super::{TaskRequest, task_call};
use crate::cache::CacheControl;
use crate::engine::bulkhead::Entry;
use crate::engine::completion::{Finished, Progress};
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::jobs::Job;
use crate::jobs::outcome::RunError;
use crate::jobs::runner::RunTask;
use crate::ops::facts::LateWord;
use crate::relay::task_events::named_events;
use crate::relay::{Reply, ResponseShape};
use crate::state::{AppState, WeakApp};

/// Runs jobs' tasks through this app. The app owns the runner that holds this,
/// so it holds the app weakly: neither keeps the other alive.
pub struct RunsTasks(WeakApp);

impl RunsTasks {
    /// Runs tasks through `app`.
    pub fn of(app: &AppState) -> Self {
        RunsTasks(app.downgrade())
    }
}

impl RunTask for RunsTasks {
    fn max_running(&self, client: &str) -> Option<u32> {
        let app = self.0.upgrade()?;
        let clients = app.clients.as_ref()?;
        clients.named(client)?.key.max_running
    }

    fn run(&self, job: &Job, request_id: String) -> BoxFuture<'static, Result<Value, RunError>> {
        let (app, job) = (self.0.upgrade(), job.clone());
        Box::pin(async move {
            let failed = |error: ApiError| RunError {
                object: error.body(&request_id)["error"].clone(),
                status: error.status().as_u16(),
                retryable: error.retryable(),
                retry_after: error.retry_after(),
            };
            let stopping = || failed(ApiError::UpstreamFailed("the gateway is stopping".into()));
            let app = app.ok_or_else(stopping)?;
            let timeout = job.request.timeout_ms.map(std::time::Duration::from_millis);
            let mut call = match &job.request.response {
                // A background response (contract 12): its stored chat body.
                Some(stored) => super::responses::stored_call(&job, stored, &request_id, timeout)
                    .map_err(failed)?,
                None => {
                    let asked = TaskRequest {
                        shape: ResponseShape::TaskJson,
                        request_id: request_id.clone(),
                        task: job.request.task.clone(),
                        variables: job.request.variables.clone(),
                        arrived: Instant::now(),
                        timeout,
                        key: None,
                        client: job.client.clone(),
                        cache_control: CacheControl::parse(job.request.cache_control.as_deref()),
                        trace: TraceContext::start(),
                    };
                    task_call(&app, asked).await.map_err(failed)?
                }
            };
            // The task's slot, then a global one, however long they take.
            let entry = Entry {
                task: super::task_bulkhead(&app, &call),
                global: app.upstreams.inflight.clone(),
            };
            let slots = entry.wait(None, None).await.map_err(|_| stopping())?;
            // Its deadline starts once it has them.
            call.arrived = Instant::now();
            let run = call.spec(&app, Some(slots));
            let progress = super::progress(&app, &call, run, LateWord::default(), Some(&job.id));
            match written(progress, &app, &job, &call.reply).await {
                Ok(finished) => Ok(call.reply.body(&finished)),
                Err(error) => Err(failed(error)),
            }
        })
    }
}

/// Drives a run's completion, keeping each of its events in the job's stream
/// (the events a synchronous task stream sends), and sending a `progress` event
/// every `LADLE_STREAM_PROGRESS_MS` once the run has written; its end.
async fn written(
    progress: impl Stream<Item = Progress>,
    app: &AppState,
    job: &Job,
    reply: &Reply,
) -> Result<Box<Finished>, ApiError> {
    let events = app.jobs.events();
    let mut progress = std::pin::pin!(progress);
    // Ticks from the run's first output on.
    let every = events.settings().progress;
    let mut ticks: Option<tokio::time::Interval> = None;
    let (task, mut chars) = (&job.request.task, 0u64);
    loop {
        let tick = async {
            match &mut ticks {
                Some(ticks) => drop(ticks.tick().await),
                None => std::future::pending().await,
            }
        };
        let step = tokio::select! {
            step = progress.next() => step,
            () = tick => {
                if chars > 0 {
                    events.progress(&job.id, task, job.runs, chars);
                }
                continue;
            }
        };
        let Some(step) = step else {
            return Err(ApiError::UpstreamFailed(
                "the completion ended without an answer".into(),
            ));
        };
        match &step {
            Progress::Chunk(received) => {
                let text = received.chunk.first.content.as_deref().unwrap_or_default();
                chars += text.chars().count() as u64;
                if let (None, Some(every), true) = (&ticks, every, chars > 0) {
                    ticks = Some(tokio::time::interval_at(Instant::now() + every, every));
                }
            }
            // The client's text starts again after a `reset`.
            Progress::Retry { output_began, .. } if *output_began => chars = 0,
            _ => {}
        }
        for named in named_events(&step, reply) {
            events.run_event(&job.id, job.runs, named.name, named.data.into());
        }
        match step {
            Progress::Finished(finished) => {
                super::remember_length(app, task, &finished);
                return Ok(finished);
            }
            Progress::Failed(gave_up) => return Err(ApiError::from(gave_up)),
            _ => {}
        }
    }
}
