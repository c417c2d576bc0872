//! `GET` and `DELETE /v1/jobs/{id}` (contract 7.1): a job as it is now (waiting
//! up to `?wait_ms` for it to finish), and its cancel.

use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::time::Instant;

use super::ClientName;
use crate::error::ApiError;
use crate::jobs::waiters::Seen;
use crate::jobs::{Canceled, Job, record};
use crate::state::AppState;
use crate::wall::unix_millis;

/// The longest `wait_ms`.
const MOST_WAIT_MS: u64 = 60_000;

/// `?wait_ms`, as given (checked by `wait`).
#[derive(Debug, Deserialize)]
pub struct Wait {
    pub(super) wait_ms: Option<String>,
}

impl Wait {
    /// The wait asked for: an integer in 1–60000, else `400 invalid_request`.
    pub(super) fn wait(&self) -> Result<Option<Duration>, ApiError> {
        let Some(text) = &self.wait_ms else {
            return Ok(None);
        };
        let ms = text
            .parse::<u64>()
            .ok()
            .filter(|ms| {
                (1..=MOST_WAIT_MS).contains(ms) && text.bytes().all(|b| b.is_ascii_digit())
            })
            .ok_or_else(|| {
                ApiError::InvalidRequest(format!(
                    "`wait_ms` must be a whole number from 1 to {MOST_WAIT_MS}"
                ))
            })?;
        Ok(Some(Duration::from_millis(ms)))
    }
}

/// `GET /v1/jobs/{id}`: a waiting read shares its job's one watch with every
/// other (`jobs::waiters`), and is answered at once when shutdown begins.
pub async fn read(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    id: Result<Path<String>, PathRejection>,
    wait: Result<Query<Wait>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Ok(Path(id)) = id else {
        return Err(ApiError::JobNotFound);
    };
    let Query(wait) = wait.map_err(|e| {
        ApiError::InvalidRequest(format!("the query string is malformed: {}", e.body_text()))
    })?;
    let until = wait.wait()?.map(|wait| Instant::now() + wait);
    // A finished job another read just rendered: the same bytes, no store.
    if let Some(view) = app.jobs.reads().recent(&id, &client) {
        return Ok(json(view));
    }
    let job = find(&app, &id, &client).await?;
    let Some(until) = until.filter(|_| !job.status.finished()) else {
        return Ok(json(app.jobs.reads().render(&job, &client)));
    };
    let Some(_place) = app.jobs.enter_wait() else {
        return Err(ApiError::Overloaded {
            retry_after: Duration::from_secs(1),
        });
    };
    match app.jobs.wait(&id, &client, until).await {
        Seen::Now(view, _) => Ok(json(view)),
        Seen::NotYet => Ok(axum::Json(job.view()).into_response()),
        Seen::Gone => Err(ApiError::JobNotFound),
    }
}

/// A job's rendered view as the answer.
fn json(view: bytes::Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], view).into_response()
}

/// `DELETE /v1/jobs/{id}`.
pub async fn cancel(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Ok(Path(id)) = id else {
        return Err(ApiError::JobNotFound);
    };
    if !record::plausible_id(&id) {
        return Err(ApiError::JobNotFound);
    }
    let canceled = app.jobs.store().cancel(&id, &client, unix_millis()).await?;
    match canceled {
        Canceled::Unknown => Err(not_found(&app, &id).await),
        Canceled::Finished(_) => Err(ApiError::JobFinished),
        Canceled::Now(moved) => {
            app.jobs.canceled(&moved).await;
            Ok(axum::Json(moved.job.view()).into_response())
        }
    }
}

/// The job `id`, or `404 job_not_found` (`410 job_lost` for one its store lost).
pub(super) async fn find(app: &AppState, id: &str, client: &str) -> Result<Job, ApiError> {
    if !record::plausible_id(id) {
        return Err(ApiError::JobNotFound);
    }
    let store = app.jobs.store();
    match store.get(id, client).await {
        Ok(Some(job)) => Ok(job),
        Ok(None) => Err(not_found(app, id).await),
        Err(down) => Err(down.into()),
    }
}

/// Why job `id` is not there: lost with its store's data, or not found.
async fn not_found(app: &AppState, id: &str) -> ApiError {
    match app.jobs.store().lost(id).await {
        Ok(true) => ApiError::JobLost,
        _ => ApiError::JobNotFound,
    }
}
