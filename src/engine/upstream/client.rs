//! HTTP to an upstream, by reqwest: proxies, HTTP/2 over TLS, happy eyeballs and
//! connection pooling come from a well-kept client rather than from us.
//!
//! Built once at start-up, so a bad proxy URL or CA file stops `check` and `serve`
//! before anything listens. Nothing here re-sends a request: redirects and reqwest's
//! own retries are off (hyper may still move a request that was never written from
//! a pooled connection found closed to a fresh one; nothing was sent, so that is no
//! retry).

use std::cell::Cell;
use std::error::Error as StdError;
use std::path::Path;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{StreamExt, TryStreamExt};
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER,
};
use reqwest::{Client, Method, Request, Url};

use super::dial::TimeConnects;
use super::settings::{SetupError, UpstreamProxy, invalid};
use super::{Outgoing, Transport, UpstreamResponse, body_kind, retry_after};
use crate::engine::failure::FailureKind;
use crate::engine::secret::Secret;

/// How an upstream is reached, besides its URL.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// Longest wait for TCP (and the proxy, and TLS) to be ready.
    pub connect_timeout: Duration,
    /// A PEM file of extra trusted CA certificates (`LADLE_UPSTREAM_CA_FILE`).
    pub ca_file: Option<std::path::PathBuf>,
    /// The proxy setting (`LADLE_UPSTREAM_PROXY`).
    pub proxy: UpstreamProxy,
    /// Worker threads that send requests; each gets a client (and pool) of its own.
    pub workers: usize,
    /// Other secrets no upstream text may carry out (the admin token).
    pub secrets: Vec<Secret>,
}

/// The trace context's headers (W3C Trace Context).
const TRACEPARENT: HeaderName = HeaderName::from_static(crate::engine::trace::TRACEPARENT);
const TRACESTATE: HeaderName = HeaderName::from_static(crate::engine::trace::TRACESTATE);

/// Idle pooled connections are closed after this long.
const POOL_IDLE: Duration = Duration::from_secs(60);
/// Most idle connections kept per upstream and worker.
const POOL_MAX_IDLE: usize = 512;

thread_local! {
    /// Which worker thread this is; 0 for every thread of a shared runtime.
    static WORKER: Cell<usize> = const { Cell::new(0) };
}

/// Marks the current thread as worker `index`, so it sends through its own client.
pub fn on_worker_thread(index: usize) {
    WORKER.with(|worker| worker.set(index));
}

/// The production transport: one reqwest client per worker thread.
///
/// A client's pooled connection is driven by a task on the runtime that opened it;
/// with one single-threaded runtime per worker, a shared client would wake another
/// thread for every chunk of a connection opened elsewhere.
pub struct HttpTransport {
    clients: Box<[Client]>,
    /// `{base path}/chat/completions?{query}`.
    url: Url,
    headers: HeaderMap,
}

impl HttpTransport {
    /// A transport for `base_url`; errors name the setting at fault.
    pub fn new(
        base_url: &str,
        api_key: &Secret,
        options: &ClientOptions,
    ) -> Result<Self, SetupError> {
        let url = completions_url(base_url)?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if !api_key.is_empty() {
            let mut bearer = HeaderValue::try_from(format!("Bearer {}", api_key.expose()))
                .map_err(|_| {
                    invalid(
                        "LADLE_UPSTREAM_API_KEY",
                        "holds a character a header cannot carry",
                    )
                })?;
            bearer.set_sensitive(true);
            headers.insert(AUTHORIZATION, bearer);
        }
        let clients = (0..options.workers.max(1))
            .map(|_| build_client(options))
            .collect::<Result<_, _>>()?;
        Ok(HttpTransport {
            clients,
            url,
            headers,
        })
    }

    fn client(&self) -> &Client {
        let worker = WORKER.with(Cell::get);
        &self.clients[worker % self.clients.len()]
    }
}

impl Transport for HttpTransport {
    fn send(&self, outgoing: Outgoing) -> BoxFuture<'_, Result<UpstreamResponse, FailureKind>> {
        let mut request = Request::new(Method::POST, self.url.clone());
        let headers = request.headers_mut();
        *headers = self.headers.clone();
        headers.insert(TRACEPARENT, outgoing.traceparent);
        if let Some(state) = outgoing.tracestate {
            headers.insert(TRACESTATE, state);
        }
        *request.body_mut() = Some(outgoing.body.into());
        let sent = outgoing.dialed.around(self.client().execute(request));
        Box::pin(async move {
            let response = sent.await.map_err(send_error)?;
            let headers = response.headers();
            let text = |name| {
                headers
                    .get(name)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
            };
            Ok(UpstreamResponse {
                status: response.status().as_u16(),
                retry_after: text(RETRY_AFTER).and_then(retry_after),
                kind: body_kind(text(CONTENT_TYPE).unwrap_or("")),
                body: response
                    .bytes_stream()
                    .map_err(|e| FailureKind::Io(describe(&e)))
                    .boxed(),
            })
        })
    }
}

/// Checks the client settings alone, for `check` without an upstream URL.
pub fn check_options(options: &ClientOptions) -> Result<(), SetupError> {
    build_client(options).map(drop)
}

fn build_client(options: &ClientOptions) -> Result<Client, SetupError> {
    let mut builder = Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .connect_timeout(options.connect_timeout)
        .connector_layer(TimeConnects)
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(POOL_MAX_IDLE);
    if let Some(path) = &options.ca_file {
        for certificate in ca_certificates(path)? {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder = match &options.proxy {
        UpstreamProxy::FromEnvironment => builder,
        UpstreamProxy::Off => builder.no_proxy(),
        UpstreamProxy::Url(url) => builder.proxy(
            reqwest::Proxy::all(url.expose())
                .map_err(|_| invalid("LADLE_UPSTREAM_PROXY", "not a usable proxy URL"))?,
        ),
    };
    // The only failures left are TLS set-up ones: a CA certificate rustls refuses.
    builder.build().map_err(|error| {
        let why = describe(&error);
        invalid(
            "LADLE_UPSTREAM_CA_FILE",
            format!("the client cannot be built: {why}"),
        )
    })
}

/// The certificates of a PEM file; a file without one is an error, not a no-op.
fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, SetupError> {
    let key = "LADLE_UPSTREAM_CA_FILE";
    let pem = std::fs::read(path)
        .map_err(|e| invalid(key, format!("cannot read {}: {e}", path.display())))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
        invalid(
            key,
            format!("{} is not PEM: {}", path.display(), describe(&e)),
        )
    })?;
    if certificates.is_empty() {
        let why = format!("{} holds no PEM certificate", path.display());
        return Err(invalid(key, why));
    }
    Ok(certificates)
}

/// `POST {url}/chat/completions`, the URL's query string kept.
fn completions_url(base_url: &str) -> Result<Url, SetupError> {
    // The URL is not echoed: its userinfo or query may hold a secret.
    let bad = |why: &str| invalid("LADLE_UPSTREAM_URL", format!("the upstream URL {why}"));
    let mut url = Url::parse(base_url).map_err(|e| bad(&format!("does not parse: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("is neither http:// nor https://"));
    }
    if url.host().is_none() {
        return Err(bad("has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Not echoed: the URL holds credentials.
        return Err(invalid(
            "LADLE_UPSTREAM_URL",
            "credentials in the URL are not supported; use LADLE_UPSTREAM_API_KEY",
        ));
    }
    let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_fragment(None);
    Ok(url)
}

/// Sorts a failed send into what happened: no connection (proxy included), a TLS
/// handshake that waiting cannot fix, or a connection that broke.
fn send_error(error: reqwest::Error) -> FailureKind {
    let text = describe(&error);
    if let Some(tls) = rustls_error(&error) {
        return FailureKind::Tls(format!("TLS handshake with the upstream failed: {tls}"));
    }
    // No request timeout is set on the client: a timeout here is the connect's.
    if error.is_timeout() {
        FailureKind::ConnectTimeout(text)
    } else if error.is_connect() {
        FailureKind::Connect(text)
    } else {
        FailureKind::Io(text)
    }
}

/// The rustls error somewhere in the chain. An `io::Error`'s `source()` skips the
/// error it wraps (hyper-rustls wraps rustls's error in two), so those are opened
/// with `get_ref` instead.
fn rustls_error<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        next = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
            None => current.source(),
        };
    }
    None
}

/// The error and its causes on one line, without the URL (its query may carry a
/// secret, and the upstream is named in every log line anyway).
fn describe(error: &reqwest::Error) -> String {
    let mut text = String::from(if error.is_connect() {
        "connect failed"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_body() || error.is_decode() {
        "reading the body failed"
    } else {
        "the request failed"
    });
    let mut cause = error.source();
    while let Some(current) = cause {
        text.push_str(": ");
        text.push_str(&current.to_string());
        cause = current.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_completions_url_keeps_the_query_and_drops_a_trailing_slash() {
        let url = |base: &str| {
            completions_url(base)
                .map(|u| u.to_string())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            url("https://x.openai.azure.com/openai/deployments/d/?api-version=2024-06-01"),
            Ok("https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01".into())
        );
        assert_eq!(
            url("http://127.0.0.1:9/v1"),
            Ok("http://127.0.0.1:9/v1/chat/completions".into())
        );
        assert!(url("ftp://host/v1").is_err());
        let with_password = url("https://user:hunter2@host/v1").expect_err("refused");
        assert!(!with_password.contains("hunter2"), "{with_password}");
    }

    #[test]
    fn a_ca_file_must_exist_and_hold_a_certificate() {
        let options = |path: &str| ClientOptions {
            ca_file: Some(path.into()),
            ..ClientOptions::default()
        };
        let missing = check_options(&options("/nonexistent/ca.pem"))
            .expect_err("missing")
            .to_string();
        assert!(missing.starts_with("LADLE_UPSTREAM_CA_FILE"), "{missing}");
        let empty = std::env::temp_dir().join(format!("ladle-empty-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let none = check_options(&options(&empty.to_string_lossy()))
            .expect_err("empty")
            .to_string();
        assert!(none.contains("no PEM certificate"), "{none}");
        let _ = std::fs::remove_file(empty);
    }
}
