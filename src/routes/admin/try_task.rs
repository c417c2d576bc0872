//! `POST /admin/prompts/{name}/try`: the editor's Try. It runs the task as a
//! caller's streamed request would (the same named events, retries, deadline and
//! upstreams), but on the admin token, not a client key, and it never reads or
//! writes kept answers: an editor trying a prompt wants the model's answer now,
//! and a try must not fill the production cache.

use axum::extract::{Extension, State};
use axum::response::Response;
use serde_json::{Map, Value};

use super::auth::{Admin, PromptName};
use crate::cache::CacheControl;
use crate::engine::trace::TraceContext;
use crate::ops::facts::{Arrival, CompletionNote};
use crate::ops::request_id::RequestId;
use crate::relay::ResponseShape;
use crate::request::{self, TaskRequest, task_call};
use crate::routes::{JsonBody, noted};
use crate::state::AppState;

/// Runs the saved prompt `name` with the body's variables, as named events.
pub async fn try_task(
    _: Admin,
    PromptName(name): PromptName,
    State(app): State<AppState>,
    Extension(Arrival(arrived)): Extension<Arrival>,
    request_id: RequestId,
    trace: TraceContext,
    JsonBody(variables): JsonBody<Map<String, Value>>,
) -> Response {
    let mut note = CompletionNote::default();
    let asked = TaskRequest {
        shape: ResponseShape::TaskEvents,
        request_id: request_id.to_string(),
        task: name,
        variables,
        arrived,
        timeout: None,
        key: None,
        client: String::new(),
        // A try neither uses nor fills the cache.
        cache_control: CacheControl {
            no_cache: true,
            no_store: true,
        },
        trace,
    };
    let answer = match task_call(&app, asked).await {
        Ok(call) => request::complete(&app, call, &mut note).await,
        Err(error) => Err(error),
    };
    noted(answer, note)
}
