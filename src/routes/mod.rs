//! HTTP routes: extract, call, respond. Handlers stay thin; the work is in
//! `request` (one pipeline for both completion routes), `relay` and `prompts`,
//! and every error they return is an `ApiError`.

pub mod admin;
pub mod chat;
pub mod job_events;
pub mod jobs;
pub mod models;
pub mod ops;
pub mod responses;
pub mod responses_stored;
pub mod tasks;

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::HeaderName;
use axum::http::request::Parts;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use crate::clients::gate::Caller;
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::ops::facts::CompletionNote;
use crate::ops::request_body::{self, BodyTimedOut, BodyTooLarge};
pub use crate::request::body::json;

/// A JSON body, read within the body limit and parsed whatever the content type
/// says (`curl -d` sends form encoding by default); failures are contract errors.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let bytes = read_body(request).await?;
        json(&bytes).map(JsonBody)
    }
}

/// `X-Request-Timeout-Ms` (contract 6.5): the caller's own budget for the request.
/// It shortens the deadline, never lengthens it; anything but a positive whole
/// number of milliseconds is `400 invalid_request`.
pub struct CallerTimeout(pub Option<Duration>);

impl<S: Send + Sync> FromRequestParts<S> for CallerTimeout {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts
            .headers
            .get(HeaderName::from_static("x-request-timeout-ms"))
        else {
            return Ok(CallerTimeout(None));
        };
        positive_millis(value.as_bytes())
            .map(|ms| CallerTimeout(Some(Duration::from_millis(ms))))
            .ok_or_else(|| {
                ApiError::InvalidRequest(
                    "`X-Request-Timeout-Ms` must be a positive whole number of milliseconds".into(),
                )
            })
    }
}

/// The completion routes' own headers: `X-Request-Timeout-Ms` and
/// `Idempotency-Key`, each checked (a bad one is `400 invalid_request`); and the
/// caller, as the client keys' gate named it.
pub struct CompletionHeaders {
    /// The caller's budget, which only shortens the deadline.
    pub timeout: Option<Duration>,
    /// The request's idempotency key.
    pub key: Option<String>,
    /// The client key's name (`""` without client keys).
    pub client: String,
    /// The caller's trace (or the one the observer started).
    pub trace: TraceContext,
}

/// The caller's client key name (`""` without client keys): jobs and
/// idempotency keys are its own.
pub struct ClientName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ClientName {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let caller = parts.extensions.get::<Caller>();
        Ok(ClientName(caller.map(|c| c.0.clone()).unwrap_or_default()))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for CompletionHeaders {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let CallerTimeout(timeout) = CallerTimeout::from_request_parts(parts, state).await?;
        let IdempotencyKey(key) = IdempotencyKey::from_request_parts(parts, state).await?;
        let Ok(ClientName(client)) = ClientName::from_request_parts(parts, state).await;
        let Ok(trace) = TraceContext::from_request_parts(parts, state).await;
        Ok(CompletionHeaders {
            timeout,
            key,
            client,
            trace,
        })
    }
}

/// A completion route's answer, with its note for the request's log line (an
/// error too: it is rendered later, by the observer).
pub fn noted(answer: Result<Response, ApiError>, note: CompletionNote) -> Response {
    let mut response = answer.unwrap_or_else(axum::response::IntoResponse::into_response);
    response.extensions_mut().insert(note);
    response
}

/// `Idempotency-Key` (contract 6.6): 1–255 visible ASCII characters, else
/// `400 invalid_request`.
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts
            .headers
            .get(HeaderName::from_static("idempotency-key"))
        else {
            return Ok(IdempotencyKey(None));
        };
        let key = value.as_bytes();
        if !crate::idempotency::valid_key(key) {
            return Err(ApiError::InvalidRequest(
                "`Idempotency-Key` must be 1 to 255 visible ASCII characters".into(),
            ));
        }
        Ok(IdempotencyKey(Some(
            String::from_utf8_lossy(key).into_owned(),
        )))
    }
}

/// Digits only (no sign, no point, no spaces), and more than zero.
fn positive_millis(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text)
        .ok()?
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
}

/// A body read within the limit, to be parsed by the handler (into a type that
/// borrows from it).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        read_body(request).await.map(RawBody)
    }
}

/// The raw body, within the bounds `ops::request_body` set. A body that arrives
/// in one piece (most do) is that piece itself, not a copy.
pub async fn read_body(request: Request) -> Result<Bytes, ApiError> {
    let mut pieces = request.into_body().into_data_stream();
    let mut next = async || pieces.next().await.transpose().map_err(|e| unreadable(&e));
    let Some(first) = next().await? else {
        return Ok(Bytes::new());
    };
    let Some(second) = next().await? else {
        return Ok(first);
    };
    let mut joined = BytesMut::from(first);
    joined.extend_from_slice(&second);
    while let Some(piece) = next().await? {
        joined.extend_from_slice(&piece);
    }
    Ok(joined.freeze())
}

/// What a failed body read means for the caller.
fn unreadable(error: &axum::Error) -> ApiError {
    if let Some(BodyTooLarge(limit)) = request_body::cause(error) {
        ApiError::BodyTooLarge(limit)
    } else if request_body::cause::<BodyTimedOut>(error).is_some() {
        ApiError::InvalidRequest(BodyTimedOut.to_string())
    } else {
        ApiError::InvalidRequest(format!("could not read the body: {error}"))
    }
}

/// Unknown routes and methods.
pub async fn not_found(request: Request) -> ApiError {
    ApiError::NotFound(format!(
        "no route for {} {}",
        request.method(),
        request.uri().path()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_timeout_is_a_positive_whole_number_of_milliseconds() {
        assert_eq!(positive_millis(b"1500"), Some(1500));
        for bad in [
            &b"0"[..],
            b"-5",
            b"1.5",
            b"soon",
            b"",
            b"+7",
            b" 7",
            b"99999999999999999999999",
        ] {
            assert_eq!(
                positive_millis(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
