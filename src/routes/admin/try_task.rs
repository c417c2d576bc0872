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
use crate::relay::CompletionRoute;
use crate::relay::{Reply, ResponseShape};
use crate::request::{self, task_call};
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
    let reply = Reply {
        shape: ResponseShape::TaskEvents,
        request_id: request_id.to_string(),
        route: CompletionRoute::Task(name),
        model: String::new(),
        keep_alive: None,
        made: None,
    };
    let answer = match task_call(&app, reply, arrived, None, None, variables, "").await {
        Ok(mut call) => {
            call.cache_control = CacheControl {
                no_cache: true,
                no_store: true,
            };
            call.trace = trace;
            request::complete(&app, call, &mut note).await
        }
        Err(error) => Err(error),
    };
    noted(answer, note)
}
