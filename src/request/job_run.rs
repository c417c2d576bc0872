//! A job's run: the synchronous task request, made by ladle itself (contract
//! 7.1). It waits for an in-flight slot without a time limit, and its deadline
//! starts once it has one; everything else (back-off, fallback, breakers,
//! budgets) is the ordinary request's.

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::time::Instant;

use super::task_call;
use crate::cache::CacheControl;
use crate::engine::bulkhead::Entry;
use crate::engine::completion::CompletionRoute;
use crate::error::ApiError;
use crate::jobs::Job;
use crate::jobs::outcome::RunError;
use crate::jobs::runner::RunTask;
use crate::ops::facts::LateWord;
use crate::relay::{self, Reply, ResponseShape};
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
            let reply = Reply {
                shape: ResponseShape::TaskJson,
                request_id: request_id.clone(),
                route: CompletionRoute::Task(job.request.task.clone()),
                model: String::new(),
                keep_alive: None,
            };
            let failed = |error: ApiError| RunError {
                object: error.body(&request_id)["error"].clone(),
                status: error.status().as_u16(),
                retryable: error.retryable(),
                retry_after: error.retry_after(),
            };
            let stopping = || failed(ApiError::UpstreamFailed("the gateway is stopping".into()));
            let app = app.ok_or_else(stopping)?;
            let timeout = job.request.timeout_ms.map(std::time::Duration::from_millis);
            let variables = job.request.variables.clone();
            let mut call = task_call(
                &app,
                reply,
                Instant::now(),
                timeout,
                None,
                variables,
                &job.client,
            )
            .await
            .map_err(failed)?;
            call.cache_control = CacheControl::parse(job.request.cache_control.as_deref());
            // The task's slot, then a global one, however long they take.
            let entry = Entry {
                task: super::task_bulkhead(&app, &call),
                global: app.upstreams.inflight.clone(),
            };
            let slots = entry.wait(None, None).await.map_err(|_| stopping())?;
            // Its deadline starts once it has them.
            call.arrived = Instant::now();
            let mut run = call.spec(&app.config);
            run.slot = Some(slots);
            run.job_id = Some(job.id.clone());
            let progress = super::progress(&app, &call, run, LateWord::default());
            match relay::outcome(progress).await {
                Ok(finished) => Ok(call.reply.body(&finished)),
                Err((error, _)) => Err(failed(error)),
            }
        })
    }
}
