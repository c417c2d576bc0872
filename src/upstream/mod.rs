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
mod http1;
mod scan;
pub mod sse;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use hyper::Uri;

pub use self::connection::on_worker_thread;

use self::connection::{Connection, Connector, Pool};
use self::exchange::{BodyStream, Failure};
use self::http1::RequestHead;

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

/// The production transport: HTTP/1.1 over pooled connections, each read by the
/// task that relays its answer (see `exchange`).
struct HttpTransport {
    connector: Connector,
    pool: Arc<Pool>,
    /// `POST {base_url}/chat/completions` with host and key, written once.
    head: RequestHead,
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
        let authorization = (!api_key.is_empty()).then(|| format!("Bearer {}", api_key.expose()));
        let path = format!("{}/chat/completions", uri.path().trim_end_matches('/'));
        Ok(HttpTransport {
            connector: Connector::new(host.to_owned(), port, tls, connect.timeout),
            pool: Arc::default(),
            head: RequestHead::new(&path, authority.as_str(), authorization.as_deref())?,
        })
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

impl Transport for HttpTransport {
    fn send(&self, body: Bytes) -> BoxFuture<'_, Result<UpstreamResponse, SendError>> {
        Box::pin(async move {
            let request = self.head.encode(&body);
            let (mut connection, mut pooled) = self.connection().await?;
            let head = loop {
                match exchange::send(&mut connection, &request).await {
                    Ok(head) => break head,
                    // A pooled connection the upstream closed before taking the
                    // request: nothing was sent, so a fresh connection is no retry.
                    Err(Failure::Unsent(_)) if pooled => {
                        connection = self.connector.connect().await.map_err(SendError::Connect)?;
                        pooled = false;
                    }
                    Err(Failure::Unsent(error)) => return Err(SendError::Io(error.to_string())),
                    Err(Failure::Broken(text)) => return Err(SendError::Io(text)),
                }
            };
            Ok(UpstreamResponse {
                status: head.status,
                retry_after: head.retry_after.as_deref().and_then(retry_after),
                kind: head.kind,
                body: BodyStream::new(connection, &head, self.pool.clone()).boxed(),
            })
        })
    }
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
