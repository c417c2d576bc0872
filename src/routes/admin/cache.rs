//! The answer cache's admin routes (contract 7.3): how many answers a task has
//! kept (`GET`, a ladle addition the editor page shows), and forgetting them all
//! (`DELETE`, `200 {"deleted": N}`).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::auth::{Admin, PromptName};
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::ops::request_id::RequestId;
use crate::state::AppState;

/// `GET /admin/cache/{task}`: `{"task": …, "entries": N}`.
pub async fn count(
    _: Admin,
    PromptName(task): PromptName,
    State(app): State<AppState>,
) -> Result<Json<Value>, ApiError> {
    let entries = app.cache.count(&task).await?;
    Ok(Json(json!({"task": task, "entries": entries})))
}

/// `DELETE /admin/cache/{task}`: `{"deleted": N}`.
pub async fn forget(
    _: Admin,
    request_id: RequestId,
    trace: TraceContext,
    PromptName(task): PromptName,
    State(app): State<AppState>,
) -> Result<Json<Value>, ApiError> {
    let deleted = app.cache.forget(&task).await?;
    tracing::info!(
        request_id = %request_id,
        trace_id = %trace.id(),
        who = "admin token holder",
        task,
        deleted,
        "kept answers forgotten through the admin API"
    );
    Ok(Json(json!({"deleted": deleted})))
}
