//! The request id every response carries: the caller's `X-Request-Id`, or a new one.
//!
//! tower-http sets and echoes the header; this reads it back for handlers, logs
//! and error bodies, so all three always agree.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue};
use tower_http::request_id::MakeRequestId;

/// The header's name.
pub const HEADER: &str = "x-request-id";

/// The id of the current request: the header's value itself, so a copy is a
/// reference count, not a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The id the request carries (set by the request-id layer before any handler).
    pub fn of(request: &Request) -> Self {
        Self::from_headers(request.headers())
    }

    fn from_headers(headers: &axum::http::HeaderMap) -> Self {
        // A `HeaderName` looks up by its hash alone; a `&str` is parsed first.
        let id = headers
            .get(HeaderName::from_static(HEADER))
            .filter(|v| v.to_str().is_ok())
            .cloned()
            .unwrap_or(HeaderValue::from_static("-"));
        RequestId(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        self.0.to_str().unwrap_or("-")
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(Self::from_headers(&parts.headers))
    }
}

/// New ids: random (version 4) UUIDs, from uuid's thread-local generator (no
/// system call per request).
#[derive(Clone, Default)]
pub struct MakeIds;

impl MakeIds {
    /// A generator.
    pub fn new() -> Self {
        MakeIds
    }

    /// The next id, written into a stack buffer.
    fn next_id(&self) -> [u8; 36] {
        let mut id = [0u8; 36];
        uuid::Uuid::new_v4().hyphenated().encode_lower(&mut id);
        id
    }
}

impl MakeRequestId for MakeIds {
    fn make_request_id<B>(
        &mut self,
        _: &axum::http::Request<B>,
    ) -> Option<tower_http::request_id::RequestId> {
        HeaderValue::from_bytes(&self.next_id())
            .ok()
            .map(tower_http::request_id::RequestId::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuid_shaped_and_differ_within_and_across_generators() {
        let ids = MakeIds::new();
        let text = |id: [u8; 36]| String::from_utf8(id.to_vec()).expect("ASCII");
        let (a, b) = (text(ids.next_id()), text(ids.next_id()));
        let other = text(MakeIds::new().next_id());
        for id in [&a, &b, &other] {
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        }
        assert_ne!(a, b);
        assert_ne!(a, other);
    }
}
