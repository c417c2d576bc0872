//! `POST /v1/chat/completions`: the OpenAI-compatible endpoint. The body is
//! forwarded as the caller wrote it, with `model` filled in and `stream` forced on.

use axum::extract::{Extension, State};
use axum::response::Response;
use bytes::Bytes;
use tokio::time::Instant;

use super::{CompletionHeaders, RawBody, noted};
use crate::cache::CacheControl;
use crate::engine::completion::answer::MAX_CHOICES;
use crate::error::ApiError;
use crate::ops::facts::{Arrival, CompletionNote};
use crate::ops::request_id::RequestId;
use crate::relay::CompletionRoute;
use crate::relay::{Reply, ResponseShape};
use crate::request::body::{ChatBody, is_non_empty_array};
use crate::request::{self, Call};
use crate::state::AppState;

/// Forwards a chat request upstream with `stream: true` and answers in the
/// caller's choice of format.
pub async fn completions(
    State(app): State<AppState>,
    Extension(Arrival(arrived)): Extension<Arrival>,
    request_id: RequestId,
    headers: CompletionHeaders,
    RawBody(bytes): RawBody,
) -> Response {
    let mut note = CompletionNote::default();
    let answer = match chat_call(&app, arrived, &request_id, headers, &bytes) {
        Ok(call) => request::complete(&app, call, &mut note).await,
        Err(error) => Err(error),
    };
    noted(answer, note)
}

/// The request as a `Call`, checked: `stream` a boolean, `messages` a non-empty
/// array, a `model` given or configured.
fn chat_call(
    app: &AppState,
    arrived: Instant,
    request_id: &RequestId,
    headers: CompletionHeaders,
    bytes: &Bytes,
) -> Result<Call, ApiError> {
    let body: ChatBody<'_> = super::json(bytes)?;
    let wants_stream = match body.field("stream") {
        None => false,
        Some(raw) => serde_json::from_str::<Option<bool>>(raw.get())
            .map_err(|_| ApiError::InvalidRequest("`stream` must be a boolean".into()))?
            .unwrap_or(false),
    };
    if !body.field("messages").is_some_and(is_non_empty_array) {
        return Err(ApiError::InvalidRequest(
            "`messages` must be a non-empty array".into(),
        ));
    }
    let model = match body
        .field("model")
        .map(|raw| serde_json::from_str::<Option<String>>(raw.get()))
    {
        Some(Ok(Some(model))) if !model.is_empty() => model,
        None | Some(Ok(None)) => app.config.model.clone().ok_or_else(|| {
            ApiError::InvalidRequest("`model` is required (no LADLE_MODEL is set)".into())
        })?,
        Some(_) => return Err(ApiError::InvalidRequest("`model` must be a string".into())),
    };
    // Every choice of an answer ladle assembles is kept whole (contract 10).
    if let Some(raw) = body.field("n") {
        let n: Option<u64> = serde_json::from_str(raw.get())
            .map_err(|_| ApiError::InvalidRequest("`n` must be a whole number".into()))?;
        if n.is_some_and(|n| n == 0 || n > u64::from(MAX_CHOICES)) {
            return Err(ApiError::InvalidRequest(format!(
                "`n` must be between 1 and {MAX_CHOICES}"
            )));
        }
    }
    let shape = match wants_stream {
        true => ResponseShape::ChatStream,
        false => ResponseShape::ChatJson,
    };
    let keep_alive = app.config.stream_keepalive.map(|every| (every, arrived));
    Ok(Call {
        body: body.upstream(&model, shape.assembled()),
        one_choice: body.one_choice(),
        reply: Reply {
            shape,
            request_id: request_id.to_string(),
            route: CompletionRoute::Chat,
            model,
            created: crate::wall::unix_seconds(),
            keep_alive: keep_alive.filter(|_| wants_stream),
            made: None,
        },
        arrived,
        timeout: headers.timeout,
        key: headers
            .key
            .map(|key| (key, serde_json::from_slice(bytes).unwrap_or_default())),
        prompt: None,
        cache_key: None,
        cache_control: CacheControl::default(),
        client: headers.client,
        trace: headers.trace,
        keep: None,
    })
}
