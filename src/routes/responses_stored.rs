//! A stored response after its create (contract 12): `GET
//! /v1/responses/{id}` (the object, or with `?stream=true` its events, resumed
//! after `starting_after`), its cancel and its delete. A stored response is a
//! job whose id is the response's (`resp_X` ↔ `job_X`); its events are the job's log,
//! rendered in order from the start by one `Events`, so a sequence number names
//! the same event on every replica and every read.

use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use serde::Deserialize;
use serde_json::Value;

use super::ClientName;
use super::jobs::find;
use crate::error::ApiError;
use crate::jobs::events::{Feed, Kind};
use crate::jobs::{Canceled, Job, JobStatus};
use crate::relay::responses::object::{Status, job_id};
use crate::relay::responses::{Event, Events, Made, sse_with_pings};
use crate::state::AppState;
use crate::wall::unix_millis;

/// The query of a retrieve.
#[derive(Debug, Deserialize)]
pub struct RetrieveQuery {
    stream: Option<String>,
    starting_after: Option<String>,
}

/// `GET /v1/responses/{id}`.
pub async fn retrieve(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<RetrieveQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| {
        ApiError::InvalidRequest(format!("the query string is malformed: {}", e.body_text()))
    })?;
    let (job, made) = response_job(&app, id, &client).await?;
    let streamed = match query.stream.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::InvalidRequest(
                "`stream` must be true or false".into(),
            ));
        }
    };
    let after = match query.starting_after.as_deref() {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::InvalidRequest("`starting_after` must be a whole number".into())
        })?),
    };
    if !streamed {
        return Ok(axum::Json(object_of(&job, &made)).into_response());
    }
    if !made.echo.background {
        return Err(ApiError::InvalidRequest(
            "only a background response's events are kept: retrieve this one without `stream`"
                .into(),
        ));
    }
    events(&app, &job, made, after).await
}

/// `POST /v1/responses/{id}/cancel`: the response, `cancelled`; a finished one
/// unchanged.
pub async fn cancel(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let (job, made) = response_job(&app, id, &client).await?;
    let canceled = app
        .jobs
        .store()
        .cancel(&job.id, &client, unix_millis())
        .await?;
    let job = match canceled {
        Canceled::Unknown => return Err(not_found()),
        Canceled::Finished(job) => job,
        Canceled::Now(moved) => {
            app.jobs.canceled(&moved).await;
            moved.job
        }
    };
    Ok(axum::Json(object_of(&job, &made)).into_response())
}

/// `DELETE /v1/responses/{id}`: forgotten (one still running is canceled
/// first, so its run stops). A background response's event log can no longer
/// be reached (every read finds the job first) and goes at its
/// `LADLE_STREAM_TTL_MS`.
pub async fn delete(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let (job, made) = response_job(&app, id, &client).await?;
    let store = app.jobs.store();
    if !job.status.finished()
        && let Canceled::Now(moved) = store.cancel(&job.id, &client, unix_millis()).await?
    {
        app.jobs.canceled(&moved).await;
    }
    if !store.forget(&job.id, &client).await? {
        return Err(not_found());
    }
    let deleted = serde_json::json!({"id": made.id, "object": "response.deleted", "deleted": true});
    Ok(axum::Json(deleted).into_response())
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such response".into())
}

/// The job of response `id`, and the response it makes.
async fn response_job(
    app: &AppState,
    id: Result<Path<String>, PathRejection>,
    client: &str,
) -> Result<(Job, Made), ApiError> {
    let Ok(Path(id)) = id else {
        return Err(not_found());
    };
    let job_id = job_id(&id).ok_or_else(not_found)?;
    let job = find(app, &job_id, client)
        .await
        .map_err(|error| match error {
            ApiError::JobNotFound | ApiError::JobLost => not_found(),
            other => other,
        })?;
    let made = job
        .request
        .response
        .as_ref()
        .and_then(|stored| Made::for_job(&job.id, stored))
        .ok_or_else(not_found)?;
    Ok((job, made))
}

/// The conversation of stored response `id` (contract 12's
/// `previous_response_id`): its input (instructions excepted) and its output,
/// as chat messages. Only a completed response has one to go on from.
pub async fn conversation(app: &AppState, id: &str, client: &str) -> Result<Vec<Value>, ApiError> {
    let path = Ok(Path(id.to_owned()));
    let (job, made) = response_job(app, path, client).await?;
    let object = object_of(&job, &made);
    if !matches!(object["status"].as_str(), Some("completed" | "incomplete")) {
        return Err(ApiError::InvalidRequest(format!(
            "`previous_response_id` names a response that is {}",
            object["status"].as_str().unwrap_or("not answered")
        )));
    }
    let stored = job.request.response.unwrap_or_default();
    let mut messages = stored["input"].as_array().cloned().unwrap_or_default();
    let text: String = object["output"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|part| part["text"].as_str().map(str::to_owned))
        .collect();
    messages.push(serde_json::json!({"role": "assistant", "content": text}));
    Ok(messages)
}

/// The response object of a background response's job, as it stands.
pub fn object_of(job: &Job, made: &Made) -> Value {
    match (job.status, &job.result) {
        (JobStatus::Succeeded, Some(object)) => object.clone(),
        (JobStatus::Running, _) => made.object(&Status::InProgress, Vec::new(), None),
        (JobStatus::Canceled, _) => made.object(&Status::Cancelled, Vec::new(), None),
        (JobStatus::Failed | JobStatus::Succeeded, _) => {
            let error = job.error.clone().unwrap_or_default();
            made.object(&Status::failed(&error), Vec::new(), None)
        }
        (JobStatus::Queued | JobStatus::RetryWait, _) => {
            made.object(&Status::Queued, Vec::new(), None)
        }
    }
}

/// A background response's events, after sequence number `after`: the job's log
/// rendered from its start, then live until its final `job` event. A finished
/// response whose events are gone gets its final event alone.
pub async fn events(
    app: &AppState,
    job: &Job,
    made: Made,
    after: Option<u64>,
) -> Result<Response, ApiError> {
    let feed = app
        .jobs
        .events()
        .feed(&job.id, job.status.finished())
        .await?;
    let mut renderer = Events::new(made.clone());
    let gone = job.status.finished() && feed.read(0, 1).is_empty();
    let body = if gone {
        let alone = renderer.ended(object_of(job, &made));
        stream::iter([alone]).boxed()
    } else {
        rendered(feed, renderer, app.background.stopping()).boxed()
    };
    let frames = body
        .filter(move |event| std::future::ready(after.is_none_or(|n| event.sequence > n)))
        .map(|event| event.frame());
    Ok(sse_with_pings(frames))
}

/// Every event of `feed` rendered, from the start, until its final `job`
/// event (or shutdown).
fn rendered(
    feed: Arc<Feed>,
    renderer: Events,
    stopping: tokio_util::sync::CancellationToken,
) -> impl futures_util::Stream<Item = Event> + Send + 'static {
    let (changed, _progress) = feed.subscribe();
    let state = (feed, renderer, changed, 0usize, false);
    stream::unfold(
        state,
        move |(feed, mut renderer, mut changed, index, over)| {
            let stopping = stopping.clone();
            async move {
                if over {
                    return None;
                }
                let mut batch = feed.read(index, 256);
                while batch.is_empty() {
                    tokio::select! {
                        moved = changed.changed() => moved.ok()?,
                        () = stopping.cancelled() => return None,
                    }
                    batch = feed.read(index, 256);
                }
                let mut out = Vec::new();
                let mut ended = false;
                for kept in &batch {
                    let data: Value = serde_json::from_slice(&kept.data).unwrap_or_default();
                    out.extend(renderer.on_logged(&kept.name, &data));
                    ended |= matches!(kept.kind, Kind::Job(status) if status.finished());
                }
                let index = index + batch.len();
                Some((stream::iter(out), (feed, renderer, changed, index, ended)))
            }
        },
    )
    .flatten()
}
