//! `POST /v1/tasks/{name}`: prompt-template tasks.

use axum::extract::{Extension, FromRequestParts, Path, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::Response;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{CompletionHeaders, JsonBody, noted};
use crate::completion::CompletionRoute;
use crate::error::ApiError;
use crate::ops::observe::{Arrival, CompletionNote};
use crate::ops::request_id::RequestId;
use crate::prompts::render;
use crate::relay::{Reply, ResponseShape};
use crate::request::body::ChatBody;
use crate::request::{self, Call};
use crate::state::AppState;

/// Whether the caller asked for named SSE events: `Accept: text/event-stream`, or
/// `?stream=true` (or `1`).
pub struct WantsEvents(bool);

impl<S: Send + Sync> FromRequestParts<S> for WantsEvents {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let accepts = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/event-stream"));
        let asked = parts.uri.query().is_some_and(|query| {
            query
                .split('&')
                .any(|pair| matches!(pair, "stream=true" | "stream=1"))
        });
        Ok(WantsEvents(accepts || asked))
    }
}

/// Renders the task's prompt with the body's variables and completes it.
pub async fn run(
    State(app): State<AppState>,
    Extension(Arrival(arrived)): Extension<Arrival>,
    request_id: RequestId,
    Path(name): Path<String>,
    WantsEvents(wants_events): WantsEvents,
    headers: CompletionHeaders,
    JsonBody(variables): JsonBody<Map<String, Value>>,
) -> Response {
    let mut note = CompletionNote::default();
    let shape = match wants_events {
        true => ResponseShape::TaskEvents,
        false => ResponseShape::TaskJson,
    };
    let reply = Reply {
        shape,
        request_id: request_id.to_string(),
        route: CompletionRoute::Task(name),
        model: String::new(),
        keep_alive: None,
    };
    let answer = match task_call(&app, reply, arrived, headers, variables).await {
        Ok(call) => request::complete(&app, call, &mut note).await,
        Err(error) => Err(error),
    };
    noted(answer, note)
}

/// The task request as a `Call`: its prompt found, its variables checked and
/// rendered (off the event loop), before any upstream call.
async fn task_call(
    app: &AppState,
    mut reply: Reply,
    arrived: Instant,
    headers: CompletionHeaders,
    variables: Map<String, Value>,
) -> Result<Call, ApiError> {
    let name = reply.route.task().unwrap_or_default().to_owned();
    let prompt = app
        .prompts
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("unknown task `{name}`")))?;
    let rendered = render::render_off_loop(prompt.clone(), variables.clone()).await?;
    reply.model = prompt
        .model
        .clone()
        .or_else(|| app.config.model.clone())
        .ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "task `{name}` names no model and LADLE_MODEL is unset"
            ))
        })?;
    let mut fields = rendered.params;
    fields.insert("messages".into(), Value::Array(rendered.messages));
    // The rendered fields go through the chat body's writer: one place sets the
    // model, `stream` and the usage request.
    let text = serde_json::to_string(&fields).unwrap_or_default();
    let body: ChatBody<'_> = super::json(text.as_bytes())?;
    Ok(Call {
        body: body.upstream(&reply.model, reply.shape.assembled()),
        reply,
        arrived,
        timeout: headers.timeout,
        key: headers.key.map(|key| (key, Value::Object(variables))),
        prompt: Some(prompt),
    })
}
