//! The upstream client: the only module that touches reqwest.
//!
//! An [`Upstream`] is a value (name, client, URL, key), never a global, so several
//! of them can sit behind the attempt loop later. It sends one POST and hands back
//! the status, the headers the retry policy needs, and the body as a byte stream.
//! Parsing lives in `sse` and `chunk`; timeouts and retries live in `completion`.
//! reqwest never retries or redirects a POST here, and there is no reconnect logic
//! anywhere: a second request is always the attempt loop's decision.

pub mod chunk;
pub mod sse;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use reqwest::header::{self, HeaderMap};

use crate::config::Secret;

/// One OpenAI-compatible upstream.
pub struct Upstream {
    /// A short name for logs and metrics.
    pub name: String,
    transport: Arc<dyn Transport>,
    api_key: Secret,
}

/// How one request reaches an upstream: reqwest in production, a scripted fake when
/// a test runs the attempt loop under paused time.
pub trait Transport: Send + Sync {
    /// Sends one attempt's request body; resolves when the response headers arrive.
    fn send(&self, body: Bytes) -> BoxFuture<'_, Result<UpstreamResponse, SendError>>;
}

/// The production transport: one reqwest client, connection pooling included.
struct HttpTransport {
    client: reqwest::Client,
    chat_url: String,
    api_key: Secret,
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
    pub body: BoxStream<'static, Result<Bytes, String>>,
}

/// Sending failed before any response headers arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The connection could not be made (refused, unreachable, connect timeout).
    Connect(String),
    /// The connection broke before the headers arrived.
    Io(String),
}

impl Upstream {
    /// An upstream at `base_url` (requests go to `{base_url}/chat/completions`).
    pub fn new(
        name: &str,
        base_url: &str,
        api_key: Secret,
        connect_timeout: Duration,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| e.to_string())?;
        let transport = HttpTransport {
            client,
            chat_url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key: api_key.clone(),
        };
        Ok(Upstream::with_transport(name, Arc::new(transport), api_key))
    }

    /// An upstream reached through any transport; `api_key` is what `scrub` removes.
    pub fn with_transport(name: &str, transport: Arc<dyn Transport>, api_key: Secret) -> Self {
        Upstream {
            name: name.to_owned(),
            transport,
            api_key,
        }
    }

    /// Sends one attempt's request body; resolves when the response headers arrive.
    /// Error texts come back with the key scrubbed out.
    pub async fn send(&self, body: Bytes) -> Result<UpstreamResponse, SendError> {
        self.transport
            .send(body)
            .await
            .map_err(|error| match error {
                SendError::Connect(text) => SendError::Connect(self.scrub(&text)),
                SendError::Io(text) => SendError::Io(self.scrub(&text)),
            })
    }

    /// Removes the API key from text that came from outside (upstreams sometimes
    /// echo the key they rejected), so it can be logged.
    pub fn scrub(&self, text: &str) -> String {
        let key = self.api_key.expose();
        if key.len() >= 4 && text.contains(key) {
            text.replace(key, "[redacted]")
        } else {
            text.to_owned()
        }
    }
}

impl Transport for HttpTransport {
    fn send(&self, body: Bytes) -> BoxFuture<'_, Result<UpstreamResponse, SendError>> {
        Box::pin(async move {
            let mut request = self
                .client
                .post(&self.chat_url)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "text/event-stream, application/json")
                .body(body);
            if !self.api_key.is_empty() {
                request = request.bearer_auth(self.api_key.expose());
            }
            let response = request.send().await.map_err(|e| send_error(&e))?;
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let kind = body_kind(response.headers());
            let body = response
                .bytes_stream()
                .map(|r| r.map_err(|e| error_chain(&e)))
                .boxed();
            Ok(UpstreamResponse {
                status,
                retry_after,
                kind,
                body,
            })
        })
    }
}

/// reqwest's error text names the URL but never the headers.
fn send_error(error: &reqwest::Error) -> SendError {
    let text = error_chain(error);
    if error.is_connect() || error.is_timeout() {
        SendError::Connect(text)
    } else {
        SendError::Io(text)
    }
}

/// The error and its sources on one line ("error sending request: connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn body_kind(headers: &HeaderMap) -> BodyKind {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        BodyKind::EventStream
    } else if content_type.starts_with("application/json") {
        BodyKind::Json
    } else {
        BodyKind::Unknown
    }
}

/// `Retry-After` as delta-seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(name, HeaderValue::from_str(value).expect("valid header"));
        map
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        assert_eq!(
            retry_after(&headers(header::RETRY_AFTER, "7")),
            Some(Duration::from_secs(7))
        );
        let future = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let wait = retry_after(&headers(header::RETRY_AFTER, &future)).expect("a date parses");
        assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120));
        let past = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH);
        assert_eq!(
            retry_after(&headers(header::RETRY_AFTER, &past)),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(header::RETRY_AFTER, "soon")), None);
    }

    #[test]
    fn content_types_decide_the_body_kind() {
        let kind = |ct| body_kind(&headers(header::CONTENT_TYPE, ct));
        assert_eq!(
            kind("text/event-stream; charset=utf-8"),
            BodyKind::EventStream
        );
        assert_eq!(kind("Application/JSON"), BodyKind::Json);
        assert_eq!(kind("text/plain"), BodyKind::Unknown);
    }

    #[test]
    fn scrub_removes_the_key_from_echoed_text() {
        let upstream = Upstream::new(
            "u",
            "http://127.0.0.1:1",
            Secret::new("sk-abcdef"),
            Duration::from_secs(1),
        )
        .expect("client builds");
        assert_eq!(
            upstream.scrub("bad key sk-abcdef given"),
            "bad key [redacted] given"
        );
    }
}
