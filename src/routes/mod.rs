//! HTTP routes: extract, call, respond. Handlers stay thin; the work is in
//! `completion`, `relay` and `prompts`, and every error they return is an `ApiError`.

pub mod admin;
pub mod chat;
pub mod ops;
pub mod tasks;

use axum::extract::{FromRequest, Request};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::ops::request_body::{self, BodyTimedOut, BodyTooLarge};

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

/// A body read within the limit, to be parsed by the handler (into a type that
/// borrows from it).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        read_body(request).await.map(RawBody)
    }
}

/// A body parsed as JSON; failures are contract errors. The body is checked as
/// UTF-8 once, as a whole: `from_slice` would check every key and string again.
pub fn json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    let invalid = |e: &dyn std::fmt::Display| {
        ApiError::InvalidRequest(format!("body is not the expected JSON: {e}"))
    };
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(&e))?;
    serde_json::from_str(text).map_err(|e| invalid(&e))
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
