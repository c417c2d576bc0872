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

/// The longest caller's id used.
const MAX_LEN: usize = 128;

/// Removes a caller's `X-Request-Id` that is not 1–128 visible ASCII characters
/// (contract 10), so that a new one is made: a 400 KB id would otherwise be
/// echoed and written into every log line of the request.
pub fn drop_unfit<B>(mut request: axum::http::Request<B>) -> axum::http::Request<B> {
    let fit = |id: &HeaderValue| {
        let bytes = id.as_bytes();
        (1..=MAX_LEN).contains(&bytes.len()) && bytes.iter().all(|b| (0x21..=0x7e).contains(b))
    };
    let header = HeaderName::from_static(HEADER);
    let headers = request.headers_mut();
    let all_fit = headers.get_all(&header).iter().all(fit);
    if !all_fit || headers.get_all(&header).iter().count() > 1 {
        headers.remove(&header);
    }
    request
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
    fn a_callers_id_is_kept_only_when_it_is_1_to_128_visible_characters() {
        let kept = |id: &[u8]| {
            let request = axum::http::Request::builder()
                .header(HEADER, HeaderValue::from_bytes(id).expect("a header value"))
                .body(())
                .expect("a request");
            drop_unfit(request).headers().contains_key(HEADER)
        };
        assert!(kept(b"order-42_A~!"));
        assert!(kept(&[b'x'; 128]));
        assert!(!kept(&[b'x'; 129]));
        assert!(!kept(b"has space"));
        assert!(!kept(b""));
        assert!(!kept("中文".as_bytes()));
    }

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
