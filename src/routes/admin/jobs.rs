//! `POST /admin/jobs/{id}/redeliver` (admin token): an operator redrives a job's
//! failed webhook delivery once the receiver is back, under the same
//! `webhook-id` (receivers deduplicate on it) with a whole new round of attempts.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use serde_json::Value;

use super::auth::Admin;
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::jobs::{Redelivered, record};
use crate::ops::request_id::RequestId;
use crate::state::AppState;
use crate::wall::unix_millis;

/// `200` with the job, its webhook `pending` again; `404 job_not_found`;
/// `409 delivery_not_failed` when its delivery has not failed.
pub async fn redeliver(
    _: Admin,
    request_id: RequestId,
    trace: TraceContext,
    State(app): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Some(id) = id
        .ok()
        .map(|Path(id)| id)
        .filter(|id| record::plausible_id(id))
    else {
        return Err(ApiError::JobNotFound);
    };
    let redelivered = app.jobs.store().redeliver(&id, unix_millis()).await?;
    match redelivered {
        Redelivered::Unknown => Err(ApiError::JobNotFound),
        Redelivered::NotFailed => Err(ApiError::DeliveryNotFailed),
        Redelivered::Now(job) => {
            tracing::info!(
                request_id = %request_id,
                trace_id = %trace.id(),
                who = "admin token holder",
                job_id = %job.id,
                "a failed webhook delivery redriven through the admin API"
            );
            Ok(Json(job.view()))
        }
    }
}
