//! `POST /v1/responses` (contract 12): the Responses API's create over the
//! chat-completions upstreams, answered with the response object or its events.
//! The request is mapped to a chat body once (`request::responses`) and runs as
//! any chat request does: deadline, retries, fallback, breakers, continuation.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::Response;
use bytes::Bytes;
use tokio::time::Instant;

use super::{CompletionHeaders, RawBody, noted};
use crate::cache::CacheControl;
use crate::engine::completion::CompletionRoute;
use crate::error::ApiError;
use crate::ops::facts::{Arrival, CompletionNote};
use crate::ops::request_id::RequestId;
use crate::relay::responses::Made;
use crate::relay::{Reply, ResponseShape};
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
    let answer = match responses_call(&app, arrived, &request_id, headers, &bytes) {
        Ok(call) => request::complete(&app, call, &mut note).await,
        Err(error) => Err(error),
    };
    noted(answer, note)
}

fn responses_call(
    app: &AppState,
    arrived: Instant,
    request_id: &RequestId,
    headers: CompletionHeaders,
    bytes: &Bytes,
) -> Result<Call, ApiError> {
    let asked = responses::parse(bytes, app.config.model.as_deref())?;
    let shape = match asked.stream {
        true => ResponseShape::ResponsesEvents,
        false => ResponseShape::ResponsesJson,
    };
    let made = Made::new(asked.model.clone(), asked.echo);
    tracing::info!(request_id = %request_id, response_id = %made.id, "response created");
    Ok(Call {
        body: asked.body,
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
    })
}
