//! `POST /v1/responses` (contract 12): the Responses API's create over the
//! chat-completions upstreams, answered with the response object or its events.
//! The request is mapped to a chat body once (`request::responses`) and runs as
//! any chat request does: deadline, retries, fallback, breakers, continuation.
//! An `Idempotency-Key` names a create as 6.6 names a chat request (its
//! `stream` aside); a background create's key is a job submit's (7.1).

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{CompletionHeaders, RawBody, noted, responses_stored};
use crate::cache::CacheControl;
use crate::error::ApiError;
use crate::jobs::{JobRequest, record};
use crate::ops::facts::{Arrival, CompletionNote};
use crate::ops::request_id::RequestId;
use crate::relay::CompletionRoute;
use crate::relay::replay::REPLAYED;
use crate::relay::responses::Made;
use crate::relay::{Reply, ResponseShape};
use crate::request::responses::kept::ToKeep;
use crate::request::responses::{Asked, RESPONSES_TASK};
use crate::request::submit::{Named, create_once};
use crate::request::{self, Call, responses};
use crate::state::AppState;

/// Creates a response: runs it and answers as the caller asked.
pub async fn create(
    State(app): State<AppState>,
    Extension(Arrival(arrived)): Extension<Arrival>,
    request_id: RequestId,
    headers: CompletionHeaders,
    RawBody(bytes): RawBody,
) -> Response {
    let mut note = CompletionNote::default();
    let asked = match asked(&app, &bytes, &headers.client).await {
        Ok(asked) => asked,
        Err(error) => return noted(Err(error), note),
    };
    // What names the create under its key: the body as sent, `stream` aside.
    let identity = || {
        let mut body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if let Value::Object(fields) = &mut body {
            fields.remove("stream");
        }
        body
    };
    let answer = match asked.echo.background {
        true => background(&app, asked, headers, &identity(), &mut note).await,
        false => {
            let call = responses_call(arrived, &request_id, headers, asked, identity);
            note.response_id = call.reply.made.as_ref().map(|made| made.id.clone());
            request::complete(&app, call, &mut note).await
        }
    };
    noted(answer, note)
}

/// The create understood, with the stored conversation its
/// `previous_response_id` names before its input.
async fn asked(app: &AppState, bytes: &[u8], client: &str) -> Result<Asked, ApiError> {
    let mut asked = responses::parse(bytes, app.config.model.as_deref())?;
    if let Some(previous) = asked.previous.clone() {
        let before = responses_stored::conversation(app, &previous, client).await?;
        asked.with_previous(before);
    }
    Ok(asked)
}

/// A background response (contract 12): a job of task `responses`, durable
/// before its answer: the object `queued`, or its events from `response.created`
/// on (the client may leave; the generation goes on).
async fn background(
    app: &AppState,
    asked: Asked,
    headers: CompletionHeaders,
    identity: &Value,
    note: &mut CompletionNote,
) -> Result<Response, ApiError> {
    let chat: Value = serde_json::from_slice(&asked.body()).unwrap_or_default();
    let stored = Made::new(asked.model, asked.echo).stored(chat, asked.input);
    let request = JobRequest {
        v: record::VERSION,
        task: RESPONSES_TASK.to_owned(),
        variables: Map::new(),
        timeout_ms: headers.timeout.map(|t| t.as_millis() as u64),
        cache_control: None,
        response: Some(stored),
    };
    let named = Named {
        key: headers.key.as_deref(),
        path: "submit:/v1/responses",
        identity,
    };
    let (job, replayed) = create_once(app, request, &headers.client, named).await?;
    let made = job
        .request
        .response
        .as_ref()
        .and_then(|stored| Made::for_job(&job.id, stored))
        .ok_or_else(|| ApiError::UpstreamFailed("the response could not be made".into()))?;
    note.response_id = Some(made.id.clone());
    let mut response = match asked.stream {
        true => responses_stored::events(app, &job, made, None).await?,
        false => axum::Json(responses_stored::object_of(&job, &made)).into_response(),
    };
    if replayed {
        let headers = response.headers_mut();
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
    }
    Ok(response)
}

fn responses_call(
    arrived: Instant,
    request_id: &RequestId,
    headers: CompletionHeaders,
    asked: Asked,
    identity: impl FnOnce() -> Value,
) -> Call {
    let shape = match asked.stream {
        true => ResponseShape::ResponsesEvents,
        false => ResponseShape::ResponsesJson,
    };
    let body = asked.body();
    let made = Arc::new(Made::new(asked.model.clone(), asked.echo));
    // A plain response's job keeps no chat body: only a background run sends one.
    let keep = made.echo.store.then(|| {
        let stored = made.stored(Value::Null, asked.input);
        ToKeep::new(made.clone(), stored, headers.client.clone())
    });
    Call {
        body,
        one_choice: true,
        reply: Reply {
            shape,
            request_id: request_id.to_string(),
            route: CompletionRoute::Responses,
            model: asked.model,
            created: made.created_at,
            keep_alive: None,
            made: Some(made),
        },
        arrived,
        timeout: headers.timeout,
        key: headers.key.map(|key| (key, identity())),
        prompt: None,
        cache_key: None,
        cache_control: CacheControl::default(),
        client: headers.client,
        trace: headers.trace,
        keep,
    }
}
