//! `POST /v1/chat/completions`: the OpenAI-compatible endpoint.

use axum::extract::{Extension, State};
use axum::response::Response;
use serde_json::{Map, Value};

use super::JsonBody;
use crate::app::AppState;
use crate::error::ApiError;
use crate::ops::observe::Arrival;
use crate::ops::request_id::RequestId;
use crate::relay::openai;

/// Forwards a chat request upstream with `stream: true` and answers in the
/// caller's choice of format.
pub async fn completions(
    State(app): State<AppState>,
    Extension(Arrival(arrived)): Extension<Arrival>,
    request_id: RequestId,
    JsonBody(mut body): JsonBody<Map<String, Value>>,
) -> Result<Response, ApiError> {
    let wants_stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => {
            return Err(ApiError::InvalidRequest(
                "`stream` must be a boolean".into(),
            ));
        }
    };
    match body.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => {}
        _ => {
            return Err(ApiError::InvalidRequest(
                "`messages` must be a non-empty array".into(),
            ));
        }
    }
    let model = match body.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        None | Some(Value::Null) => app.config.model.clone().ok_or_else(|| {
            ApiError::InvalidRequest("`model` is required (no LADLE_MODEL is set)".into())
        })?,
        Some(_) => return Err(ApiError::InvalidRequest("`model` must be a string".into())),
    };
    body.insert("model".into(), Value::String(model.clone()));
    body.insert("stream".into(), Value::Bool(true));
    let mut job = app.job(arrived, &request_id, &body, None);
    // A committed stream cannot take words back, so it never retries after output.
    job.policy.retry_after_output = !wants_stream;
    let progress = app.complete(job);
    Ok(if wants_stream {
        openai::streaming(progress, request_id.to_string()).await
    } else {
        openai::whole(progress, request_id.as_str(), &model).await
    })
}
