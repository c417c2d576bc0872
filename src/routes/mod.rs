//! HTTP routes: extract, call, respond. Handlers stay thin; the work is in
//! `completion`, `relay` and `prompts`, and every error they return is an `ApiError`.

pub mod admin;
pub mod chat;
pub mod ops;
pub mod tasks;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use bytes::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::ops::body_deadline::{self, BodyTimedOut};

/// A JSON body, read within the body limit and parsed whatever the content type
/// says (`curl -d` sends form encoding by default); failures are contract errors.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(request, state).await?;
        json(&bytes).map(JsonBody)
    }
}

/// A body read within the limit, to be parsed by the handler (into a type that
/// borrows from it).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        read_body(request, state).await.map(RawBody)
    }
}

/// A body parsed as JSON; failures are contract errors.
pub fn json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::InvalidRequest(format!("body is not the expected JSON: {e}")))
}

/// The raw body, within the body limit.
pub async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    let limit = request
        .extensions()
        .get::<BodyLimit>()
        .map_or(usize::MAX, |l| l.0);
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::BodyTooLarge(limit)
            } else if body_deadline::timed_out(&rejection) {
                ApiError::InvalidRequest(BodyTimedOut.to_string())
            } else {
                ApiError::InvalidRequest(format!("could not read the body: {rejection}"))
            }
        })
}

/// The configured body limit, for the error message.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Unknown routes and methods.
pub async fn not_found(request: Request) -> ApiError {
    ApiError::NotFound(format!(
        "no route for {} {}",
        request.method(),
        request.uri().path()
    ))
}
