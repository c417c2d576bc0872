//! A task request as a `Call`, for the task route and for a job's run alike: its
//! prompt found, its variables checked and rendered (off the event loop), the
//! upstream body written, before any upstream call.

use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::Call;
use super::body::ChatBody;
use crate::cache::{AnswerKey, CacheControl};
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::prompts::render;
use crate::relay::{CompletionRoute, Reply, ResponseShape};
use crate::state::AppState;
use crate::wall::unix_seconds;

/// A task request, with everything its caller knows: the task route's, a job
/// run's, or the admin page's try.
pub struct TaskRequest {
    /// The shape of answer asked for.
    pub shape: ResponseShape,
    /// The request's id.
    pub request_id: String,
    /// The task's name.
    pub task: String,
    /// Its variables.
    pub variables: Map<String, Value>,
    /// When it arrived: its deadline runs from here.
    pub arrived: Instant,
    /// The caller's own timeout, if it set one.
    pub timeout: Option<Duration>,
    /// Its idempotency key, if any.
    pub key: Option<String>,
    /// The client key's name (`""` without client keys).
    pub client: String,
    /// Its `Cache-Control`.
    pub cache_control: CacheControl,
    /// Its trace.
    pub trace: TraceContext,
}

/// `asked` as a `Call`.
pub async fn task_call(app: &AppState, asked: TaskRequest) -> Result<Call, ApiError> {
    let TaskRequest {
        shape,
        request_id,
        task: name,
        variables,
        arrived,
        timeout,
        key,
        client,
        cache_control,
        trace,
    } = asked;
    let prompt = app
        .prompts
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("unknown task `{name}`")))?;
    // The variables name the request under its idempotency key, if it has one.
    let key = key.map(|key| (key, Value::Object(variables.clone())));
    let rendered = render::render_off_loop(prompt.clone(), variables).await?;
    let model = prompt
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
    let body: ChatBody<'_> = super::body::json(text.as_bytes())?;
    let cache_key = prompt.cache.on().then(|| {
        let output = prompt.output.name();
        let shaping = match prompt.cache.per_client {
            true => format!("{output} {client}"),
            false => output.to_owned(),
        };
        AnswerKey::new(&name, &model, &shaping, &text)
    });
    Ok(Call {
        body: body.upstream(&model, shape.assembled()),
        one_choice: body.one_choice(),
        reply: Reply {
            shape,
            request_id,
            route: CompletionRoute::Task(name),
            model,
            created: unix_seconds(),
            keep_alive: None,
            made: None,
        },
        arrived,
        timeout,
        key,
        prompt: Some(prompt),
        cache_key,
        cache_control,
        client,
        trace,
        keep: None,
    })
}
