//! `POST /v1/tasks/{name}`: prompt-template tasks.

use axum::extract::{Extension, FromRequestParts, Path, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::Response;
use serde_json::{Map, Value};

use futures_util::future::Either;

use super::{Answering, CompletionHeaders, JsonBody, Keyed, keyed, noted};
use crate::completion::Finished;
use crate::error::ApiError;
use crate::idempotency;
use crate::ops::observe::Arrival;
use crate::ops::observe::CompletionNote;
use crate::ops::request_id::RequestId;
use crate::prompts::render;
use crate::relay::replay::Form;
use crate::relay::task_events::result_body;
use crate::relay::task_events::{self, TaskCall};
use crate::state::AppState;
use tokio::time::Instant;

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
    let call = Call {
        arrived,
        request_id,
        name,
        wants_events,
        headers,
    };
    let answer = complete(app, call, variables, &mut note).await;
    noted(answer, note)
}

/// What the task route extracted besides the state and the variables.
struct Call {
    arrived: Instant,
    request_id: RequestId,
    name: String,
    wants_events: bool,
    headers: CompletionHeaders,
}

/// The task itself; `note` gathers what the request's log line adds.
async fn complete(
    app: AppState,
    call: Call,
    variables: Map<String, Value>,
    note: &mut CompletionNote,
) -> Result<Response, ApiError> {
    let Call {
        arrived,
        request_id,
        name,
        wants_events,
        headers,
    } = call;
    let prompt = app
        .prompts
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("unknown task `{name}`")))?;
    let rendered = render::render(&prompt, &variables)?;
    let model = prompt
        .model
        .clone()
        .or_else(|| app.config.model.clone())
        .ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "task `{name}` names no model and LADLE_MODEL is unset"
            ))
        })?;
    let mut body = rendered.params;
    body.insert("model".into(), Value::String(model.clone()));
    body.insert("messages".into(), Value::Array(rendered.messages));
    body.insert("stream".into(), Value::Bool(true));
    // ladle assembles the answer itself, so it asks for the usage a whole
    // `chat.completion` would carry, unless the prompt says otherwise.
    body.entry("stream_options")
        .or_insert_with(|| serde_json::json!({"include_usage": true}));
    let body = serde_json::to_vec(&body).unwrap_or_default().into();
    let job = app.job(
        arrived,
        &request_id,
        body,
        &model,
        Some(&prompt),
        headers.timeout,
    );
    note.deadline_ms = Some((job.deadline.at - job.deadline.started).as_millis() as u64);
    let form = if wants_events {
        Form::TaskEvents
    } else {
        Form::TaskJson
    };
    let call = TaskCall {
        task: name,
        request_id: request_id.to_string(),
    };
    let progress = match headers.key {
        None => Either::Left(app.complete(job)),
        Some(key) => {
            let path = format!("/v1/tasks/{}", call.task);
            let request = Value::Object(variables);
            let answer = Answering {
                deadline: job.deadline.at,
                keep_alive: None,
                request_id: &call.request_id,
            };
            match keyed(&app, &key, &path, &request, form, answer, note).await? {
                Keyed::Answered(response) => return Ok(response),
                Keyed::Runs(slot) => {
                    let kept_call = call.clone();
                    let keep = move |finished: &Finished| result_body(finished, &kept_call);
                    Either::Right(idempotency::detached(app.complete(job), slot, keep))
                }
            }
        }
    };
    Ok(if wants_events {
        task_events::streaming(progress, call)
    } else {
        task_events::whole(progress, &call).await
    })
}
