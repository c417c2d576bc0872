//! `GET` and `DELETE /v1/jobs/{id}` (contract 7.1): a job as it is now (waiting
//! up to `?wait_ms` for it to finish), and its cancel.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::time::Instant;

use super::ClientName;
use crate::error::ApiError;
use crate::jobs::{Canceled, Job, record};
use crate::state::AppState;
use crate::wall::unix_millis;

/// The longest `wait_ms`.
const MOST_WAIT_MS: u64 = 60_000;

/// `?wait_ms`, as given (checked by `wait`).
#[derive(Debug, Deserialize)]
pub struct Wait {
    wait_ms: Option<String>,
}

impl Wait {
    /// The wait asked for: an integer in 1–60000, else `400 invalid_request`.
    fn wait(&self) -> Result<Option<Duration>, ApiError> {
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

/// `GET /v1/jobs/{id}`.
pub async fn read(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    Path(id): Path<String>,
    Query(wait): Query<Wait>,
) -> Result<Response, ApiError> {
    let until = wait.wait()?.map(|wait| Instant::now() + wait);
    let job = loop {
        let job = find(&app, &id, &client).await?;
        match until {
            Some(until) if !job.status.finished() && Instant::now() < until => {
                // Changes seen here wake it; one made on another replica is seen
                // at the next look.
                let left = until.saturating_duration_since(Instant::now());
                app.jobs
                    .next_change(left.min(Duration::from_millis(100)))
                    .await;
            }
            _ => break job,
        }
    };
    Ok(axum::Json(job.view()).into_response())
}

/// `DELETE /v1/jobs/{id}`.
pub async fn cancel(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if !record::plausible_id(&id) {
        return Err(ApiError::JobNotFound);
    }
    let canceled = app
        .jobs
        .store()
        .cancel(&id, &client, unix_millis())
        .await
        .map_err(|_| ApiError::StoreUnavailable)?;
    match canceled {
        Canceled::Unknown => Err(ApiError::JobNotFound),
        Canceled::Finished(_) => Err(ApiError::JobFinished),
        Canceled::Now(moved) => {
            app.jobs.canceled(&moved);
            Ok(axum::Json(moved.job.view()).into_response())
        }
    }
}

/// The job `id`, or `404 job_not_found`.
async fn find(app: &AppState, id: &str, client: &str) -> Result<Job, ApiError> {
    if !record::plausible_id(id) {
        return Err(ApiError::JobNotFound);
    }
    app.jobs
        .store()
        .get(id, client)
        .await
        .map_err(|_| ApiError::StoreUnavailable)?
        .ok_or(ApiError::JobNotFound)
}
