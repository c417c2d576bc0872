//! `GET /v1/models` and `GET /v1/models/{id}` (contract 3.4): the models a client
//! may name, read from the configuration and the prompts as they are now, so a
//! prompt added or edited shows up with its model at once. Many OpenAI-based
//! tools ask for the list before anything else.

use std::collections::BTreeSet;

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::state::AppState;

/// Every model named: `LADLE_MODEL`, every upstream's, every prompt's.
pub async fn list(State(app): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = named(&app).iter().map(|id| entry(id)).collect();
    Json(json!({"object": "list", "data": data}))
}

/// One model by its id (the rest of the path, which may hold `/`).
pub async fn read(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match named(&app).contains(id.as_str()) {
        true => Ok(Json(entry(&id))),
        false => Err(ApiError::NotFound(format!("no model named `{id}`"))),
    }
}

/// Each model once, sorted byte-wise (a `BTreeSet` of `String` orders so).
fn named(app: &AppState) -> BTreeSet<String> {
    let configured = app.config.model.iter().cloned();
    let upstreams = app.upstreams.upstreams.iter();
    let of_upstreams = upstreams.filter_map(|upstream| upstream.model.clone());
    let prompts = app.prompts.list().into_iter();
    let of_prompts = prompts.filter_map(|(prompt, _)| prompt.model.clone());
    configured.chain(of_upstreams).chain(of_prompts).collect()
}

fn entry(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": 0, "owned_by": "ladle"})
}
