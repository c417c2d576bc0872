//! The request id every response carries: the caller's `X-Request-Id`, or a new one.
//!
//! tower-http sets and echoes the header; this reads it back for handlers, logs
//! and error bodies, so all three always agree.

use std::convert::Infallible;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{FromRequestParts, Request};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use tower_http::request_id::MakeRequestId;

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

/// New ids, shaped like UUIDs: a random half drawn once per process and a counter
/// half. Unique within the process by the counter and across processes by the
/// random half, without asking the OS for randomness on every request.
#[derive(Clone)]
pub struct MakeIds {
    prefix: u64,
    next: std::sync::Arc<AtomicU64>,
}

impl MakeIds {
    /// A generator with a fresh random half.
    pub fn new() -> Self {
        // std's hasher keys come from the OS's random source.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(u64::from(std::process::id()));
        MakeIds {
            prefix: hasher.finish(),
            next: std::sync::Arc::default(),
        }
    }

    /// `pppppppp-pppp-pppp-nnnn-nnnnnnnnnnnn`: 16 hex digits of the random half, 16
    /// of the counter, written straight into place (a `format!` cost more than the
    /// rest of the layer).
    fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut id = [b'-'; 36];
        let digits = (0..16)
            .map(|i| (self.prefix >> (60 - 4 * i)) & 0xf)
            .chain((0..16).map(|i| (n >> (60 - 4 * i)) & 0xf));
        let places = (0..36).filter(|i| ![8, 13, 18, 23].contains(i));
        for (place, digit) in places.zip(digits) {
            id[place] = b"0123456789abcdef"[digit as usize];
        }
        id.iter().map(|&b| char::from(b)).collect()
    }
}

impl Default for MakeIds {
    fn default() -> Self {
        Self::new()
    }
}

impl MakeRequestId for MakeIds {
    fn make_request_id<B>(
        &mut self,
        _: &axum::http::Request<B>,
    ) -> Option<tower_http::request_id::RequestId> {
        HeaderValue::try_from(self.next_id())
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
        let (a, b) = (ids.next_id(), ids.next_id());
        let other = MakeIds::new().next_id();
        for id in [&a, &b, &other] {
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        }
        assert_ne!(a, b);
        assert_ne!(a, other);
    }
}
