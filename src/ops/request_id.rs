//! The request id every response carries: the caller's `X-Request-Id`, or a new one.
//!
//! tower-http sets and echoes the header; this reads it back for handlers, logs
//! and error bodies, so all three always agree.

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use std::convert::Infallible;

/// The header's name.
pub const HEADER: &str = "x-request-id";

/// The id of the current request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    /// The id the request carries (set by the request-id layer before any handler).
    pub fn of(request: &Request) -> Self {
        Self::from_headers(request.headers())
    }

    fn from_headers(headers: &axum::http::HeaderMap) -> Self {
        let id = headers
            .get(HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        RequestId(id.to_owned())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(Self::from_headers(&parts.headers))
    }
}
