//! `GET /v1/jobs/{id}/events` (contract 11.1, 11.2): a job's event stream from a
//! cursor (`Last-Event-ID`, else `?after=`), or its long-poll form for clients
//! that cannot read a stream (`Accept: application/json`); and the stream a
//! submit asks for with `Accept: text/event-stream`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::time::Instant;

use super::ClientName;
use super::jobs::{Wait, find};
use crate::error::ApiError;
use crate::jobs::Job;
use crate::jobs::events::read::{EndLine, Reader, long_poll};
use crate::jobs::events::{EventId, Feed, JobEnd, Kept, Start, final_alone};
use crate::ops::facts::{OutlivesItsWork, ReaderStall};
use crate::relay::sse_response;
use crate::request::submit::submitted_headers;
use crate::state::AppState;

/// The query of an events read.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    after: Option<String>,
    wait_ms: Option<String>,
}

/// `GET /v1/jobs/{id}/events`.
pub async fn read(
    State(app): State<AppState>,
    ClientName(client): ClientName,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Ok(Path(id)) = id else {
        return Err(ApiError::JobNotFound);
    };
    let Query(query) = query.map_err(|e| {
        ApiError::InvalidRequest(format!("the query string is malformed: {}", e.body_text()))
    })?;
    // The job first: another key's (or no) job is `404` whatever the cursor.
    let job = find(&app, &id, &client).await?;
    let (cursor, named) = cursor(&headers, query.after)?;
    let wait = Wait {
        wait_ms: query.wait_ms,
    }
    .wait()?;
    let long_polled =
        accepts(&headers, "application/json") && !accepts(&headers, "text/event-stream");
    let (feed, start) = open(&app, &job, named).await?;
    let alone = matches!(start, Start::FinalAlone { .. }).then(|| final_alone(&job));
    if !long_polled {
        let reader = (feed, start, alone);
        return Ok(stream(&app, &job, reader, cursor));
    }
    let mut line = EndLine::new(&job.id, cursor.clone(), start, None);
    let until = wait.map(|wait| Instant::now() + wait);
    let stopping = app.jobs.stopping();
    let (events, done) = long_poll(&feed, start, alone, until, &stopping, &mut line).await;
    let mut body = String::from(r#"{"events":["#);
    for (n, event) in events.iter().enumerate() {
        if n > 0 {
            body.push(',');
        }
        let name = serde_json::to_string(&*event.name).unwrap_or_default();
        body.push_str(&format!(r#"{{"id":"{}","event":{name},"data":"#, event.id));
        body.push_str(&String::from_utf8_lossy(&event.data));
        body.push('}');
    }
    let next = events.last().map(|e| e.id.to_string()).or(cursor);
    let next = serde_json::to_string(&next).unwrap_or_default();
    body.push_str(&format!(r#"],"next":{next},"done":{done}}}"#));
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// The stream a submit asked for (contract 11.1): the job's, from its first
/// kept event, with the submit's headers. The client key's slot it took is
/// given back now: the job exists.
pub async fn submitted(app: &AppState, job: &Job, replayed: bool) -> Result<Response, ApiError> {
    let reader = open(app, job, None).await?;
    let alone = matches!(reader.1, Start::FinalAlone { .. }).then(|| final_alone(job));
    let mut response = stream(app, job, (reader.0, reader.1, alone), None);
    submitted_headers(&mut response, job, replayed);
    *response.status_mut() = StatusCode::OK;
    response.extensions_mut().insert(OutlivesItsWork);
    Ok(response)
}

/// A job's feed and where a reader starts in it.
type Opened = (Arc<Feed>, Start);

/// The job's feed, and where a reader with `cursor` starts in it.
async fn open(app: &AppState, job: &Job, cursor: Option<EventId>) -> Result<Opened, ApiError> {
    let finished = job.status.finished();
    let feed = app.jobs.events().feed(&job.id, finished).await?;
    let final_id = job
        .final_event
        .as_deref()
        .and_then(|id| EventId::parse(id).ok().flatten());
    let end = JobEnd { finished, final_id };
    let mut start = feed.start(cursor, end);
    // A cursor past what this replica has read: the event was made on another
    // one a moment ago (a client resuming here what it read there). Events
    // reach every replica within 250 ms (11.1) when it keeps up; wait four times
    // that for it (a loaded replica's follower runs late) rather than start the
    // run again.
    if let Some(cursor) = cursor.filter(|c| !finished && feed.behind(*c)) {
        let (mut changed, _) = feed.subscribe();
        let until = Instant::now() + CATCHING_UP;
        while feed.behind(cursor) {
            match tokio::time::timeout_at(until, changed.changed()).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
        start = feed.start(Some(cursor), end);
    }
    Ok((feed, start))
}

/// How long a cursor past this replica's copy of the log waits for it. Only a
/// cursor no replica has made yet waits it all (and then reads from the run's
/// start, as 11.2 says of an unknown one).
const CATCHING_UP: Duration = Duration::from_secs(1);

/// The SSE answer; `204` when the cursor is the finished job's final event (so
/// an `EventSource` stops reconnecting).
fn stream(
    app: &AppState,
    job: &Job,
    (feed, start, alone): (Arc<Feed>, Start, Option<Kept>),
    cursor: Option<String>,
) -> Response {
    let line = EndLine::new(&job.id, cursor, start, Some(app.metrics.clone()));
    if start == Start::Over {
        drop(line.ended("final"));
        return StatusCode::NO_CONTENT.into_response();
    }
    let (jobs, id) = (app.jobs.clone(), job.id.clone());
    // A reader's client must take each frame within `LADLE_STREAM_STALL_MS`, or
    // its connection is cut: a reader that never reads holds nothing for long.
    let stall = app.jobs.events().settings().stall;
    let reader = Reader {
        stall,
        feed,
        start,
        alone,
        shutdown: app.jobs.stopping(),
        runs_here: Box::new(move || jobs.runs_here(&id)),
        line,
    };
    let mut response = sse_response(Body::from_stream(reader.stream()));
    response.extensions_mut().insert(ReaderStall(stall));
    response
}

/// The cursor as given (`Last-Event-ID` wins over `?after=`; empty is none),
/// and the event it names (a cursor past any id names none: `u32::MAX`s).
fn cursor(
    headers: &HeaderMap,
    after: Option<String>,
) -> Result<(Option<String>, Option<EventId>), ApiError> {
    let header = headers
        .get("last-event-id")
        .map(|value| value.to_str().map(str::to_owned).map_err(|_| malformed()));
    let given = match header.transpose()? {
        Some(header) if !header.is_empty() => Some(header),
        _ => after.filter(|after| !after.is_empty()),
    };
    let Some(text) = given else {
        return Ok((None, None));
    };
    let named = EventId::parse(&text).map_err(|_| malformed())?;
    let beyond = EventId {
        run: u32::MAX,
        seq: u32::MAX,
    };
    Ok((Some(text), Some(named.unwrap_or(beyond))))
}

fn malformed() -> ApiError {
    ApiError::InvalidRequest(
        "the cursor (Last-Event-ID or after) must be {run}.{seq}: two runs of 1 to 10 digits"
            .into(),
    )
}

/// Whether `Accept` names `kind`.
fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|accept| accept.contains(kind))
}
