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
use crate::relay::Reply;
use crate::state::AppState;

/// The task `reply.route` names, with `variables`, as a `Call` arriving at
/// `arrived`; `key` is its idempotency key, if any.
pub async fn task_call(
    app: &AppState,
    mut reply: Reply,
    arrived: Instant,
    timeout: Option<Duration>,
    key: Option<String>,
    variables: Map<String, Value>,
    client: &str,
) -> Result<Call, ApiError> {
    let name = reply.route.task().unwrap_or_default().to_owned();
    let prompt = app
        .prompts
        .get(&name)
        .ok_or_else(|| ApiError::NotFound(format!("unknown task `{name}`")))?;
    // The variables name the request under its idempotency key, if it has one.
    let key = key.map(|key| (key, Value::Object(variables.clone())));
    let rendered = render::render_off_loop(prompt.clone(), variables).await?;
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
    let body: ChatBody<'_> = super::body::json(text.as_bytes())?;
    let cache_key = prompt.cache.on().then(|| {
        let output = prompt.output.name();
        let shaping = match prompt.cache.per_client {
            true => format!("{output} {client}"),
            false => output.to_owned(),
        };
        AnswerKey::new(&name, &reply.model, &shaping, &text)
    });
    Ok(Call {
        body: body.upstream(&reply.model, reply.shape.assembled()),
        one_choice: body.one_choice(),
        reply,
        arrived,
        timeout,
        key,
        prompt: Some(prompt),
        cache_key,
        cache_control: CacheControl::default(),
        client: client.to_owned(),
        trace: TraceContext::start(),
        keep: None,
    })
}
