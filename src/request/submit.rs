//! A task request handed over as a background job (contract 7.1): checked as the
//! synchronous request would be, written (durably) to the job store, and
//! answered `202` at once. With an `Idempotency-Key`, the same submit again while
//! the key is kept gets the same job back.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{TaskRequest, task_call};
use crate::cache::CacheControl;
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::idempotency::{self, Kept, Lookup};
use crate::jobs::{Job, JobRequest, Moved, SubmitKey, Submitted, record};
use crate::relay::ResponseShape;
use crate::relay::replay::REPLAYED;
use crate::state::AppState;
use crate::wall::unix_millis;

/// What a submit carries.
pub struct Submit {
    /// The task.
    pub task: String,
    /// Its variables.
    pub variables: Map<String, Value>,
    /// `X-Request-Timeout-Ms`, which shortens each run's deadline.
    pub timeout: Option<Duration>,
    /// `Idempotency-Key`.
    pub key: Option<String>,
    /// The client key's name: the job is its own.
    pub client: String,
    /// `Cache-Control`, kept for each run.
    pub cache_control: Option<String>,
    /// The submit's request id.
    pub request_id: String,
    /// When it arrived.
    pub arrived: Instant,
}

/// How long a submit waits for an identical one in progress to be written.
const JOINING: Duration = Duration::from_secs(5);

/// Checks and writes a submit: its job, and whether an earlier submit under the
/// same idempotency key made it (`Idempotent-Replayed`); answered with
/// `accepted`, or with the job's event stream.
pub async fn submit(app: &AppState, submit: Submit) -> Result<(Job, bool), ApiError> {
    // Exactly the synchronous request's checks, before anything is created.
    let asked = TaskRequest {
        shape: ResponseShape::TaskJson,
        request_id: submit.request_id.clone(),
        task: submit.task.clone(),
        variables: submit.variables.clone(),
        arrived: submit.arrived,
        timeout: submit.timeout,
        key: None,
        client: submit.client.clone(),
        cache_control: CacheControl::parse(submit.cache_control.as_deref()),
        trace: TraceContext::start(),
    };
    task_call(app, asked).await?;
    let request = JobRequest {
        v: record::VERSION,
        task: submit.task.clone(),
        variables: submit.variables.clone(),
        timeout_ms: submit.timeout.map(|t| t.as_millis() as u64),
        cache_control: submit.cache_control.clone(),
        response: None,
    };
    // A submit and a synchronous request never share a key's record.
    let named = Named {
        key: submit.key.as_deref(),
        path: &format!("submit:/v1/tasks/{}", submit.task),
        identity: &Value::Object(submit.variables),
    };
    create_once(app, request, &submit.client, named).await
}

/// What names a submit under its idempotency key: the key, the path and the
/// JSON that the same submit again repeats.
pub struct Named<'a> {
    /// `Idempotency-Key`, if the submit has one.
    pub key: Option<&'a str>,
    /// The path the key's record names (never a synchronous route's).
    pub path: &'a str,
    /// What was asked.
    pub identity: &'a Value,
}

/// Writes `request` as a job of `client`, once per idempotency key: the same
/// submit again while the key is kept gets the same job back (`true`).
pub async fn create_once(
    app: &AppState,
    request: JobRequest,
    client: &str,
    named: Named<'_>,
) -> Result<(Job, bool), ApiError> {
    let Some(key) = named.key else {
        return create(app, request, client, None)
            .await
            .map(|job| (job, false));
    };
    let fingerprint = idempotency::fingerprint(named.path, named.identity, false);
    let scoped = idempotency::scoped(client, key);
    // Written with its job: found after any crash, on any replica.
    let store = app.jobs.store();
    if let Some((kept, id)) = store.keyed(&scoped).await? {
        if kept != fingerprint {
            return Err(ApiError::IdempotencyKeyReused);
        }
        let found = store.get(&id, client).await?;
        if let Some(job) = found {
            return Ok((job, true));
        }
    }
    let durable = SubmitKey {
        key: scoped.clone(),
        fingerprint,
        until: unix_millis() + app.config.idempotency.ttl.as_millis() as u64,
    };
    let now = Instant::now();
    match app
        .idempotency
        .begin(&scoped, fingerprint, now, now + JOINING)
        .await
    {
        Lookup::Reused => Err(ApiError::IdempotencyKeyReused),
        Lookup::Kept(kept) => replay_or_create(app, &kept, request, client, durable).await,
        Lookup::Wait(outcome) => match tokio::time::timeout(JOINING, outcome).await {
            Ok(Some(Ok(kept))) => replay_or_create(app, &kept, request, client, durable).await,
            Ok(Some(Err((error, _)))) => Err(error),
            _ => Err(ApiError::StoreUnavailable),
        },
        Lookup::Run(slot) => match create(app, request, client, Some(durable)).await {
            Ok(job) => {
                slot.succeed(Arc::new(Kept::Submitted(job.id.clone())))
                    .await;
                Ok((job, false))
            }
            Err(error) => {
                slot.fail(error.clone(), 0).await;
                Err(error)
            }
        },
    }
}

/// The job a kept submit made, as it is now; a new one if it has expired.
async fn replay_or_create(
    app: &AppState,
    kept: &Kept,
    request: JobRequest,
    client: &str,
    key: SubmitKey,
) -> Result<(Job, bool), ApiError> {
    // An answer under the key is another request's.
    let Kept::Submitted(id) = kept else {
        return Err(ApiError::IdempotencyKeyReused);
    };
    let found = app.jobs.store().get(id, client).await?;
    match found {
        Some(job) => Ok((job, true)),
        None => create(app, request, client, Some(key))
            .await
            .map(|job| (job, false)),
    }
}

/// Writes a new job of `client` (with its submit's `key`, in one commit); it is
/// durable when this returns.
pub async fn create(
    app: &AppState,
    request: JobRequest,
    client: &str,
    key: Option<SubmitKey>,
) -> Result<Job, ApiError> {
    let mut job = Job::queued(request, client, unix_millis());
    job.key = key;
    let max = app.config.jobs.max_queued;
    let key = app
        .clients
        .as_ref()
        .and_then(|clients| clients.named(client));
    let client_max = key.and_then(|key| key.key.max_queued);
    match app.jobs.store().submit(job, max, client_max).await {
        Ok(Submitted::Accepted(job)) => {
            let made = Moved {
                job: job.clone(),
                from: None,
            };
            app.jobs.submitted(&made).await;
            Ok(job)
        }
        Ok(Submitted::Full) => Err(ApiError::Overloaded {
            retry_after: Duration::from_secs(5),
        }),
        Ok(Submitted::ClientFull) => Err(ApiError::RateLimited {
            limit: "max_queued",
            retry_after: Duration::from_secs(5),
        }),
        Ok(Submitted::FileFull) => {
            tracing::warn!("a submit was refused: the state file is at LADLE_STATE_MAX_BYTES");
            Err(ApiError::Overloaded {
                retry_after: Duration::from_secs(5),
            })
        }
        Err(down) => Err(down.into()),
    }
}

/// `202 Accepted` with the job, where to find it, and what was done.
pub fn accepted(job: &Job, replayed: bool) -> Response {
    let mut response = (StatusCode::ACCEPTED, axum::Json(job.view())).into_response();
    submitted_headers(&mut response, job, replayed);
    response
}

/// Where the job is and what was done: a submit's headers, whichever form its
/// answer takes (contract 7.1, 11.1).
pub fn submitted_headers(response: &mut Response, job: &Job, replayed: bool) {
    let location = format!("/v1/jobs/{}", job.id);
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(&location) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(
        HeaderName::from_static("preference-applied"),
        HeaderValue::from_static("respond-async"),
    );
    if replayed {
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
    }
}
