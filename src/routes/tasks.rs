//! `POST /v1/tasks/{name}`: prompt-template tasks.

use axum::extract::{Extension, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderName, header};
use axum::response::Response;
use serde_json::{Map, Value};

use super::{CompletionHeaders, JsonBody, noted};
use crate::cache::CacheControl;
use crate::ops::facts::{Arrival, CompletionNote};
use crate::ops::request_id::RequestId;
use crate::relay::ResponseShape;
use crate::request::submit::Submit;
use crate::request::{self, TaskRequest, task_call};
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

/// Whether the caller asked for a background job (contract 7.1): `Prefer:
/// respond-async` (other preferences in the header are ignored) or `?async=true`;
/// and the request's `Cache-Control`, which the answer cache reads (and each of
/// a job's runs keeps).
pub struct Submission {
    asked: bool,
    cache_control: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Submission {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let prefers = parts
            .headers
            .get_all(HeaderName::from_static("prefer"))
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|preference| {
                let name = preference.split(';').next().unwrap_or_default();
                name.trim().eq_ignore_ascii_case("respond-async")
            });
        let asked = parts.uri.query().is_some_and(|query| {
            query
                .split('&')
                .any(|pair| matches!(pair, "async=true" | "async=1"))
        });
        // Every `Cache-Control` line counts (RFC 9110: one list, however split).
        let lines: Vec<&str> = parts
            .headers
            .get_all(header::CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let cache_control = (!lines.is_empty()).then(|| lines.join(","));
        Ok(Submission {
            asked: prefers || asked,
            cache_control,
        })
    }
}

/// Renders the task's prompt with the body's variables and completes it, or
/// hands it over as a background job.
#[expect(
    clippy::too_many_arguments,
    reason = "an axum handler takes each extractor as an argument"
)]
pub async fn run(
    State(app): State<AppState>,
    Extension(Arrival(arrived)): Extension<Arrival>,
    request_id: RequestId,
    Path(name): Path<String>,
    WantsEvents(wants_events): WantsEvents,
    submission: Submission,
    headers: CompletionHeaders,
    JsonBody(variables): JsonBody<Map<String, Value>>,
) -> Response {
    let mut note = CompletionNote::default();
    if submission.asked {
        let submit = Submit {
            task: name,
            variables,
            timeout: headers.timeout,
            key: headers.key,
            client: headers.client,
            cache_control: submission.cache_control,
            request_id: request_id.to_string(),
            arrived,
        };
        let answer = match request::submit::submit(&app, submit).await {
            Ok((job, replayed)) if wants_events => {
                super::job_events::submitted(&app, &job, replayed).await
            }
            Ok((job, replayed)) => Ok(request::submit::accepted(&job, replayed)),
            Err(error) => Err(error),
        };
        return noted(answer, note);
    }
    let shape = match wants_events {
        true => ResponseShape::TaskEvents,
        false => ResponseShape::TaskJson,
    };
    let asked = TaskRequest {
        shape,
        request_id: request_id.to_string(),
        task: name,
        variables,
        arrived,
        timeout: headers.timeout,
        key: headers.key,
        client: headers.client,
        cache_control: CacheControl::parse(submission.cache_control.as_deref()),
        trace: headers.trace,
    };
    let answer = match task_call(&app, asked).await {
        Ok(call) => request::complete(&app, call, &mut note).await,
        Err(error) => Err(error),
    };
    noted(answer, note)
}
