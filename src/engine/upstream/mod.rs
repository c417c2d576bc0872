//! The upstream client: the only module that speaks HTTP to an upstream.
//!
//! An [`Upstream`] is a value (name, client, URL, key), never a global, so several
//! of them can sit behind the attempt loop later. It sends one POST and hands back
//! the status, the headers the retry policy needs, and the body as a byte stream.
//! Parsing lives in `sse` and `chunk`; timeouts and retries live in `completion`.
//! Nothing here retries or redirects a POST: a second request is always the attempt
//! loop's decision. HTTP itself is reqwest's (`client`).

pub mod chunk;
mod client;
pub mod continuation;
pub mod dial;
pub mod order;
mod redact;
pub mod settings;
pub mod sse;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use reqwest::header::HeaderValue;

pub use self::client::{ClientOptions, check_options, on_worker_thread};

use self::client::HttpTransport;
use self::continuation::Continuation;
use self::dial::Dialed;
use self::settings::{SetupError, UpstreamProxy, UpstreamSettings};
use crate::engine::failure::FailureKind;
use crate::engine::secret::Secret;

/// One OpenAI-compatible upstream.
pub struct Upstream {
    /// A short name for logs, metrics, events and `meta`.
    pub name: String,
    /// Replaces the `model` of every call to this upstream.
    pub model: Option<String>,
    /// Lower is tried first.
    pub priority: u32,
    /// Shares first attempts among usable upstreams of one priority.
    pub weight: u32,
    /// Attempts in a row a request gives it before a retry moves on.
    pub attempts: u32,
    /// How it continues a partial answer (contract 11.4).
    pub continuation: Continuation,
    transport: Arc<dyn Transport>,
    /// The key and the proxy's credentials: removed from any text that leaves.
    secrets: Vec<Secret>,
}

/// How one request reaches an upstream: HTTP in production, a scripted fake when
/// a test runs the attempt loop under paused time.
pub trait Transport: Send + Sync {
    /// Sends one attempt's request; resolves when the response headers arrive.
    /// A failure is `Connect`, `Tls` or `Io` (nothing was answered).
    fn send(&self, request: Outgoing) -> BoxFuture<'_, Result<UpstreamResponse, FailureKind>>;
}

/// One attempt's request: the body, and what is the attempt's own.
pub struct Outgoing {
    /// The request body.
    pub body: Bytes,
    /// The trace, with a span id for this attempt (`traceparent`).
    pub traceparent: HeaderValue,
    /// The caller's `tracestate`, passed on.
    pub tracestate: Option<HeaderValue>,
    /// Written when a connection is made for this attempt.
    pub dialed: Arc<Dialed>,
}

/// How the upstream framed its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `text/event-stream`.
    EventStream,
    /// `application/json`: the upstream ignored `stream`.
    Json,
    /// Anything else; the attempt sniffs the bytes.
    Unknown,
}

/// An upstream answer whose headers have arrived.
pub struct UpstreamResponse {
    /// HTTP status.
    pub status: u16,
    /// `Retry-After`, as seconds or an HTTP date, converted to a wait.
    pub retry_after: Option<Duration>,
    /// How the body is framed, by its declared content type.
    pub kind: BodyKind,
    /// The body, as it arrives.
    pub body: BoxStream<'static, Result<Bytes, FailureKind>>,
}

impl Upstream {
    /// An upstream as configured (requests go to `{url}/chat/completions`), through
    /// its own proxy setting.
    pub fn new(settings: &UpstreamSettings, options: &ClientOptions) -> Result<Self, SetupError> {
        let options = ClientOptions {
            proxy: settings.proxy.clone(),
            ..options.clone()
        };
        let transport = HttpTransport::new(&settings.url, &settings.api_key, &options)?;
        let mut upstream = Upstream::with_transport(
            &settings.name,
            Arc::new(transport),
            settings.api_key.clone(),
        );
        upstream.model = settings.model.clone();
        upstream.priority = settings.priority;
        upstream.weight = settings.weight;
        if let UpstreamProxy::Url(proxy) = &options.proxy {
            upstream.secrets.extend(proxy_password(proxy.expose()));
        }
        upstream.secrets.extend(options.secrets.iter().cloned());
        upstream.attempts = settings.attempts;
        upstream.continuation = settings.continuation;
        Ok(upstream)
    }

    /// An upstream reached through any transport; `api_key` is what `scrub` removes.
    pub fn with_transport(name: &str, transport: Arc<dyn Transport>, api_key: Secret) -> Self {
        Upstream {
            name: name.to_owned(),
            model: None,
            priority: 0,
            weight: 1,
            attempts: 1,
            continuation: Continuation::None,
            transport,
            secrets: vec![api_key],
        }
    }

    /// Sends one attempt's request; resolves when the response headers arrive.
    /// Error texts come back with the secrets scrubbed out.
    pub async fn send(&self, request: Outgoing) -> Result<UpstreamResponse, FailureKind> {
        self.transport
            .send(request)
            .await
            .map_err(|failure| failure.map_text(|text| self.scrub(text)))
    }

    /// The request body for this upstream: as given, or with `model` replaced by
    /// the upstream's own (a configuration choice, rare: it parses and writes the
    /// body anew).
    pub fn body_for(&self, body: &Bytes, model: &str) -> Bytes {
        match &self.model {
            Some(own) if own != model => with_model(body, own),
            _ => body.clone(),
        }
    }

    /// Removes the API key and the proxy's credentials from text that came from
    /// outside (upstreams sometimes echo the key they rejected), and cuts it at
    /// `MAX_UPSTREAM_TEXT` (a 1 MiB error message would be logged whole on every
    /// attempt), so it can be logged.
    pub fn scrub(&self, text: &str) -> String {
        let secrets: Vec<&str> = self.secrets.iter().map(Secret::expose).collect();
        cut(redact::redact(text, &secrets), MAX_UPSTREAM_TEXT)
    }
}

/// The most of an upstream's words kept for a log line or a message.
pub const MAX_UPSTREAM_TEXT: usize = 1024;

/// `text` cut to at most `max` bytes, at a character boundary, marked `…` when cut.
pub fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
    text
}

/// The body with its `model` replaced.
fn with_model(body: &Bytes, model: &str) -> Bytes {
    let Ok(mut fields) = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(body)
    else {
        return body.clone();
    };
    fields.insert("model".into(), serde_json::Value::String(model.to_owned()));
    serde_json::to_vec(&fields).map_or_else(|_| body.clone(), Bytes::from)
}

/// The user name and password of a proxy URL, as they might appear in a message.
fn proxy_password(url: &str) -> Vec<Secret> {
    let Ok(url) = reqwest::Url::parse(url) else {
        return Vec::new();
    };
    [url.username(), url.password().unwrap_or("")]
        .into_iter()
        .filter(|part| !part.is_empty())
        .map(Secret::new)
        .collect()
}

/// The body kind a `Content-Type` value declares.
fn body_kind(content_type: &str) -> BodyKind {
    let starts = |prefix: &str| {
        content_type
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    };
    if starts("text/event-stream") {
        BodyKind::EventStream
    } else if starts("application/json") {
        BodyKind::Json
    } else {
        BodyKind::Unknown
    }
}

/// `Retry-After` as delta-seconds or an HTTP date.
fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_words_are_cut_at_1_kib_on_a_character_boundary() {
        let upstream = Upstream::new(
            &UpstreamSettings::single("http://127.0.0.1:1", Secret::default(), UpstreamProxy::Off),
            &ClientOptions::default(),
        )
        .expect("client builds");
        let long = "访".repeat(1_000);
        let scrubbed = upstream.scrub(&long);
        assert!(scrubbed.len() <= MAX_UPSTREAM_TEXT, "{}", scrubbed.len());
        assert!(scrubbed.ends_with('…'));
        assert_eq!(upstream.scrub("short"), "short");
    }

    #[test]
    fn a_model_override_replaces_only_the_model() {
        let body = Bytes::from_static(br#"{"model":"a","stream":true,"messages":[]}"#);
        let changed: serde_json::Value =
            serde_json::from_slice(&with_model(&body, "b")).expect("JSON");
        assert_eq!(
            changed,
            serde_json::json!({"model": "b", "stream": true, "messages": []})
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        assert_eq!(retry_after("7"), Some(Duration::from_secs(7)));
        let future = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let wait = retry_after(&future).expect("a date parses");
        assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120));
        let past = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH);
        assert_eq!(retry_after(&past), Some(Duration::ZERO));
        assert_eq!(retry_after("soon"), None);
    }

    #[test]
    fn content_types_decide_the_body_kind() {
        assert_eq!(
            body_kind("text/event-stream; charset=utf-8"),
            BodyKind::EventStream
        );
        assert_eq!(body_kind("Application/JSON"), BodyKind::Json);
        assert_eq!(body_kind("text/plain"), BodyKind::Unknown);
        assert_eq!(body_kind("text/ev"), BodyKind::Unknown);
    }

    #[test]
    fn scrub_removes_the_key_from_echoed_text() {
        let settings = UpstreamSettings::single(
            "http://127.0.0.1:1",
            Secret::new("sk-abcdef"),
            UpstreamProxy::Url(Secret::new("http://proxyuser:pr0xy-pass@127.0.0.1:3")),
        );
        let upstream = Upstream::new(&settings, &ClientOptions::default()).expect("client builds");
        assert_eq!(
            upstream.scrub("bad key sk-abcdef given via proxyuser:pr0xy-pass"),
            "bad key [redacted] given via [redacted]:[redacted]"
        );
    }
}
