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

/// `200 {"prompts": N}` when every prompt loaded, else `503` naming the broken ones.
pub async fn readyz(State(app): State<AppState>) -> Response {
    let broken = app.prompts.broken();
    let prompts = app.prompts.list().len();
    if broken.is_empty() {
        return Json(json!({ "prompts": prompts })).into_response();
    }
    let broken: serde_json::Map<_, _> = broken
        .into_iter()
        .map(|(name, why)| (name, why.into()))
        .collect();
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "prompts": prompts, "broken": broken })),
    )
        .into_response()
}

/// Prometheus text exposition.
pub async fn metrics(State(app): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(),
    )
        .into_response()
}
