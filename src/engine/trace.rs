//! W3C trace context (contract 9): the caller's `traceparent` and `tracestate`
//! go on to the upstream on every attempt, each attempt with a span id of its
//! own, so a trace the caller started shows every call ladle made for it.
//!
//! ladle exports no spans (yet): the ids are what other tools join on, and every
//! log line of a request names its `trace_id`. A malformed `traceparent` is
//! dropped, never passed on, and ladle starts a trace of its own, as it does for
//! a request without one; a trace ladle starts is marked sampled, so an upstream
//! that records traces keeps this one.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};

/// The header that carries the trace and the caller's span.
pub const TRACEPARENT: &str = "traceparent";
/// The header of vendors' trace state, passed on as it came.
pub const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` passed on: the 512 characters the W3C asks every
/// vendor to propagate (a longer one is dropped, not cut).
const MAX_TRACESTATE: usize = 512;
/// The most list members a `tracestate` may have (W3C).
const MAX_TRACESTATE_MEMBERS: usize = 32;

/// A request's trace: its id, its flags, and the caller's trace state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: u128,
    flags: u8,
    state: Option<HeaderValue>,
}

impl TraceContext {
    /// The caller's trace if its `traceparent` is well formed, else a new one.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut parents = headers.get_all(TRACEPARENT).iter();
        let parent = match (parents.next(), parents.next()) {
            (Some(one), None) => parse(one.as_bytes()),
            _ => None,
        };
        let Some((trace_id, flags)) = parent else {
            return Self::start();
        };
        let state = headers
            .get(TRACESTATE)
            .filter(|v| {
                let members = v.as_bytes().split(|b| *b == b',');
                let members = members.filter(|m| !m.trim_ascii().is_empty()).count();
                v.len() <= MAX_TRACESTATE && members <= MAX_TRACESTATE_MEMBERS && v.to_str().is_ok()
            })
            .cloned();
        TraceContext {
            trace_id,
            flags,
            state,
        }
    }

    /// A new trace, for a request without a usable one (and a job's run).
    pub fn start() -> Self {
        TraceContext {
            trace_id: new_id(rand::random::<u128>),
            flags: SAMPLED,
            state: None,
        }
    }

    /// The trace id, as logs show it: 32 lower-case hex digits.
    pub fn id(&self) -> TraceId {
        TraceId(self.trace_id)
    }

    /// The `traceparent` for one attempt: the request's trace, a new span id.
    pub fn for_attempt(&self) -> HeaderValue {
        let span = new_id(rand::random::<u64>);
        let mut text = *b"00-________________________________-________________-__";
        hex(&mut text[3..35], self.trace_id);
        hex(&mut text[36..52], u128::from(span));
        hex(&mut text[53..55], u128::from(self.flags));
        // Hex digits and dashes only: always a valid header value.
        HeaderValue::from_bytes(&text).unwrap_or(HeaderValue::from_static(""))
    }

    /// The caller's `tracestate`, passed on unchanged.
    pub fn state(&self) -> Option<&HeaderValue> {
        self.state.as_ref()
    }
}

/// The trace the observer found or started for the request (parsed here only
/// when a request is served without the observer).
impl<S: Send + Sync> FromRequestParts<S> for TraceContext {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(match parts.extensions.get::<TraceContext>() {
            Some(trace) => trace.clone(),
            None => TraceContext::from_headers(&parts.headers),
        })
    }
}

/// A trace id, displayed as 32 lower-case hex digits (no allocation per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceId(u128);

impl std::fmt::Display for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Writes the low `into.len()` hex digits of `value`, lower case.
fn hex(into: &mut [u8], mut value: u128) {
    for digit in into.iter_mut().rev() {
        *digit = b"0123456789abcdef"[(value & 0xf) as usize];
        value >>= 4;
    }
}

/// The `sampled` flag.
const SAMPLED: u8 = 0x01;

/// A random id that is not all zeros (the spec's invalid id).
fn new_id<T: PartialEq + Default>(random: impl Fn() -> T) -> T {
    loop {
        let id = random();
        if id != T::default() {
            return id;
        }
    }
}

/// A `traceparent` of version `00` (or a later version, read as `00`, as the
/// spec asks): the trace id and the flags; `None` when it is malformed.
fn parse(value: &[u8]) -> Option<(u128, u8)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split('-');
    let version = parts.next()?;
    let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
    let rest = parts.next();
    let lower_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !lower_hex(version, 2) || version == "ff" || (version == "00" && rest.is_some()) {
        return None;
    }
    if !lower_hex(trace, 32) || !lower_hex(span, 16) || !lower_hex(flags, 2) {
        return None;
    }
    let trace_id = u128::from_str_radix(trace, 16).ok()?;
    let span_id = u64::from_str_radix(span, 16).ok()?;
    if trace_id == 0 || span_id == 0 {
        return None;
    }
    Some((trace_id, u8::from_str_radix(flags, 16).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    impl TraceContext {
        fn trace_id(&self) -> String {
            self.id().to_string()
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("a header value"));
        }
        map
    }

    #[test]
    fn a_good_traceparent_keeps_its_trace_and_flags_with_a_new_span_per_attempt() {
        let trace = TraceContext::from_headers(&headers(&[
            (TRACEPARENT, GOOD),
            (TRACESTATE, "congo=t61rcWkgMzE"),
        ]));
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let (a, b) = (trace.for_attempt(), trace.for_attempt());
        for sent in [&a, &b] {
            let sent = sent.to_str().expect("ASCII");
            assert!(
                sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
                "{sent}"
            );
            assert!(sent.ends_with("-01"), "{sent}");
            assert_eq!(parse(sent.as_bytes()).map(|p| p.0), Some(trace.trace_id));
            assert!(
                !sent.contains("00f067aa0ba902b7"),
                "the caller's span is a parent"
            );
        }
        assert_ne!(a, b, "each attempt a span of its own");
        assert_eq!(
            trace.state().map(|s| s.to_str().ok()),
            Some(Some("congo=t61rcWkgMzE"))
        );
    }

    #[test]
    fn a_malformed_traceparent_is_dropped_and_a_new_trace_started() {
        let malformed = [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ];
        for value in malformed {
            let trace = TraceContext::from_headers(&headers(&[
                (TRACEPARENT, value),
                (TRACESTATE, "congo=t61rcWkgMzE"),
            ]));
            assert_ne!(
                trace.trace_id(),
                "4bf92f3577b34da6a3ce929d0e0e4736",
                "{value}"
            );
            assert_eq!(trace.state(), None, "{value}: no state without its parent");
            assert_eq!(trace.flags, SAMPLED, "{value}");
        }
        let twice = headers(&[(TRACEPARENT, GOOD), (TRACEPARENT, GOOD)]);
        let trace = TraceContext::from_headers(&twice);
        assert_ne!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn a_later_version_is_read_as_version_00_and_passed_on_as_00() {
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes-next";
        let trace = TraceContext::from_headers(&headers(&[(TRACEPARENT, later)]));
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let sent = trace.for_attempt();
        let sent = sent.to_str().expect("ASCII");
        assert!(sent.starts_with("00-") && sent.ends_with("-00"), "{sent}");
    }

    #[test]
    fn without_a_traceparent_every_request_starts_a_trace_of_its_own() {
        let (a, b) = (
            TraceContext::from_headers(&HeaderMap::new()),
            TraceContext::from_headers(&HeaderMap::new()),
        );
        assert_ne!(a.trace_id(), b.trace_id());
        assert_eq!(a.trace_id().len(), 32);
    }
}
