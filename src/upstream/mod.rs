//! The upstream client: the only module that speaks HTTP to an upstream.
//!
//! An [`Upstream`] is a value (name, client, URL, key), never a global, so several
//! of them can sit behind the attempt loop later. It sends one POST and hands back
//! the status, the headers the retry policy needs, and the body as a byte stream.
//! Parsing lives in `sse` and `chunk`; timeouts and retries live in `completion`.
//! Nothing here retries or redirects a POST: a second request is always the attempt
//! loop's decision. (A pooled connection found closed before the request was
//! written is swapped for a fresh one; nothing was sent, so that is no retry.)

pub mod chunk;
mod connection;
mod exchange;
mod scan;
pub mod sse;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Uri};

pub use self::connection::on_worker_thread;

use self::connection::{Connection, Connector, Pool};
use self::exchange::BodyStream;

use crate::config::Secret;

/// One OpenAI-compatible upstream.
pub struct Upstream {
    /// A short name for logs and metrics.
    pub name: String,
    transport: Arc<dyn Transport>,
    api_key: Secret,
}

/// How one request reaches an upstream: HTTP in production, a scripted fake when
/// a test runs the attempt loop under paused time.
pub trait Transport: Send + Sync {
    /// Sends one attempt's request body; resolves when the response headers arrive.
    fn send(&self, body: Bytes) -> BoxFuture<'_, Result<UpstreamResponse, SendError>>;
}

/// The production transport: HTTP/1.1 over pooled connections, each driven by the
/// task that reads its answer (see `exchange`).
struct HttpTransport {
    connector: Connector,
    pool: Arc<Pool>,
    /// `Host`, as the URL gives it.
    authority: HeaderValue,
    /// The path of `{base_url}/chat/completions`.
    path: String,
    /// `Bearer {key}`, marked sensitive; `None` when no key is set.
    authorization: Option<HeaderValue>,
}

/// How connections to an upstream are made.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Longest wait for TCP and TLS to be ready.
    pub timeout: Duration,
    /// A PEM file of extra trusted CA certificates, for `https` upstreams.
    pub ca_file: Option<PathBuf>,
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
        connect: &ConnectOptions,
    ) -> Result<Self, String> {
        let transport = HttpTransport::new(base_url, &api_key, connect)?;
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

impl HttpTransport {
    fn new(base_url: &str, api_key: &Secret, connect: &ConnectOptions) -> Result<Self, String> {
        let invalid = |why: &str| format!("the upstream URL `{base_url}` {why}");
        let uri: Uri = base_url.parse().map_err(|_| invalid("does not parse"))?;
        let tls = match uri.scheme_str() {
            Some("http") => None,
            Some("https") => Some(connection::tls_connector(connect.ca_file.as_deref())?),
            _ => return Err(invalid("is neither http:// nor https://")),
        };
        let authority = uri.authority().ok_or_else(|| invalid("has no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = authority
            .port_u16()
            .unwrap_or(if tls.is_some() { 443 } else { 80 });
        let authorization = if api_key.is_empty() {
            None
        } else {
            let mut value = HeaderValue::try_from(format!("Bearer {}", api_key.expose()))
                .map_err(|_| "the upstream key is not a valid header value".to_owned())?;
            value.set_sensitive(true);
            Some(value)
        };
        Ok(HttpTransport {
            connector: Connector::new(host.to_owned(), port, tls, connect.timeout),
            pool: Arc::default(),
            authority: HeaderValue::try_from(authority.as_str())
                .map_err(|_| invalid("has a bad host"))?,
            path: format!("{}/chat/completions", uri.path().trim_end_matches('/')),
            authorization,
        })
    }

    fn request(&self, body: Bytes) -> Result<Request<Full<Bytes>>, SendError> {
        let mut request = Request::post(self.path.as_str())
            .header(header::HOST, self.authority.clone())
            .header(header::CONTENT_TYPE, JSON.clone())
            .header(header::ACCEPT, ACCEPT.clone());
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization.clone());
        }
        request
            .body(Full::new(body))
            .map_err(|e| SendError::Io(e.to_string()))
    }

    /// A pooled connection when one is open, else a new one; and whether it was pooled.
    async fn connection(&self) -> Result<(Connection, bool), SendError> {
        if let Some(pooled) = self.pool.take() {
            return Ok((pooled, true));
        }
        let fresh = self.connector.connect().await.map_err(SendError::Connect)?;
        Ok((fresh, false))
    }
}

static JSON: HeaderValue = HeaderValue::from_static("application/json");
static ACCEPT: HeaderValue = HeaderValue::from_static("text/event-stream, application/json");

impl Transport for HttpTransport {
    fn send(&self, body: Bytes) -> BoxFuture<'_, Result<UpstreamResponse, SendError>> {
        Box::pin(async move {
            let (mut connection, mut pooled) = self.connection().await?;
            let (head, connection) = loop {
                match exchange::send(connection, self.request(body.clone())?).await {
                    Ok(sent) => break sent,
                    // A pooled connection the upstream closed before taking the
                    // request: nothing was sent, so a fresh connection is no retry.
                    Err(error) if pooled && error.is_canceled() => {
                        connection = self.connector.connect().await.map_err(SendError::Connect)?;
                        pooled = false;
                    }
                    Err(error) => return Err(SendError::Io(error_chain(&error))),
                }
            };
            let (parts, incoming) = head.into_parts();
            Ok(UpstreamResponse {
                status: parts.status.as_u16(),
                retry_after: retry_after(&parts.headers),
                kind: body_kind(&parts.headers),
                body: BodyStream::new(incoming, connection, self.pool.clone()).boxed(),
            })
        })
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
            &ConnectOptions::default(),
        )
        .expect("client builds");
        assert_eq!(
            upstream.scrub("bad key sk-abcdef given"),
            "bad key [redacted] given"
        );
    }
}
