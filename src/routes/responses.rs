//! `POST /v1/responses` (contract 12): the Responses API's create over the
//! chat-completions upstreams, answered with the response object or its events.
//! The request is mapped to a chat body once (`request::responses`) and runs as
//! any chat request does: deadline, retries, fallback, breakers, continuation.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{CompletionHeaders, RawBody, noted, responses_stored};
use crate::cache::CacheControl;
use crate::engine::completion::CompletionRoute;
use crate::error::ApiError;
use crate::jobs::{JobRequest, record};
use crate::ops::facts::{Arrival, CompletionNote};
use crate::ops::request_id::RequestId;
use crate::relay::responses::Made;
use crate::relay::{Reply, ResponseShape};
use crate::request::responses::Asked;
use crate::request::{self, Call, responses, submit};
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
    let answer = match asked.echo.background {
        true => background(&app, asked, &request_id, headers).await,
        false => {
            let call = responses_call(arrived, &request_id, headers, asked);
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
    request_id: &RequestId,
    headers: CompletionHeaders,
) -> Result<Response, ApiError> {
    let chat: Value = serde_json::from_slice(&asked.body()).unwrap_or_default();
    let stored = Made::new(asked.model, asked.echo).stored(chat, asked.input);
    let request = JobRequest {
        v: record::VERSION,
        task: RESPONSES_TASK.to_owned(),
        variables: Map::new(),
        timeout_ms: headers.timeout.map(|t| t.as_millis() as u64),
        cache_control: None,
        response: Some(stored.clone()),
    };
    let job = submit::create(app, request, &headers.client, None).await?;
    let made = Made::for_job(&job.id, &stored)
        .ok_or_else(|| ApiError::UpstreamFailed("the response could not be made".into()))?;
    tracing::info!(request_id = %request_id, response_id = %made.id, job_id = %job.id, "response created");
    match asked.stream {
        true => responses_stored::events(app, &job, made, None).await,
        false => Ok(axum::Json(responses_stored::object_of(&job, &made)).into_response()),
    }
}

/// The task name of a background response's job.
pub const RESPONSES_TASK: &str = "responses";

fn responses_call(
    arrived: Instant,
    request_id: &RequestId,
    headers: CompletionHeaders,
    asked: Asked,
) -> Call {
    let shape = match asked.stream {
        true => ResponseShape::ResponsesEvents,
        false => ResponseShape::ResponsesJson,
    };
    let body = asked.body();
    let made = Made::new(asked.model.clone(), asked.echo);
    tracing::info!(request_id = %request_id, response_id = %made.id, "response created");
    Call {
        body,
        one_choice: true,
        reply: Reply {
            shape,
            request_id: request_id.to_string(),
            route: CompletionRoute::Responses,
            model: asked.model,
            keep_alive: None,
            made: Some(Arc::new(made)),
        },
        arrived,
        timeout: headers.timeout,
        // Stored responses (and with them a repeat's answer) come with the
        // jobs' store: a key is not applied here yet.
        key: None,
        prompt: None,
        cache_key: None,
        cache_control: CacheControl::default(),
        client: headers.client,
        trace: headers.trace,
    }
}
