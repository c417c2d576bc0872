//! Health, readiness and metrics for operators and orchestrators.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::state::AppState;

/// `200 ok` while the process serves.
pub async fn healthz() -> &'static str {
    "ok"
}

/// `200 {"prompts": N}` when every prompt loaded, else `503` naming the broken
/// ones (or the prompts folder, while it cannot be listed, or the state file,
/// while it cannot take writes); with a fleet's Redis, `"redis": "ok" | "unreachable"` too, which does not
/// change the status (prompts are served from the last copy meanwhile).
pub async fn readyz(State(app): State<AppState>) -> Response {
    let broken = app.prompts.broken();
    let mut body = json!({ "prompts": app.prompts.list().len() });
    if let Some(redis) = &app.redis {
        body["redis"] = if redis.is_up() { "ok" } else { "unreachable" }.into();
    }
    // A broken keys file is reported as a broken prompt is: the last good keys
    // serve, and the operator is told.
    let keys_broken = app.clients.as_ref().and_then(|c| c.broken());
    if let Some(why) = &keys_broken {
        body["client_keys"] = json!({ "broken": why });
    }
    let unlisted = app.prompts.folder_unreadable();
    if let Some(why) = &unlisted {
        body["prompts_folder"] = json!({ "unreadable": why });
    }
    // A state file that cannot take writes refuses submits: not ready.
    let failing = app.jobs.store().unhealthy();
    if let Some(why) = &failing {
        body["state_file"] = json!({ "failing": why });
    }
    let fine = broken.is_empty() && keys_broken.is_none() && unlisted.is_none();
    if fine && failing.is_none() {
        return Json(body).into_response();
    }
    let broken: serde_json::Map<_, _> = broken
        .into_iter()
        .map(|(name, why)| (name, why.into()))
        .collect();
    if !broken.is_empty() {
        body["broken"] = broken.into();
    }
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

/// Prometheus text exposition.
pub async fn metrics(State(app): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(),
    )
        .into_response()
}
