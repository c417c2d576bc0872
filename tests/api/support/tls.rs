//! An HTTPS upstream: TLS with the fixture certificate for `localhost` (signed by
//! the fixture CA in `tests/fixtures/tls/`), h2 and HTTP/1.1 offered by ALPN,
//! counting handshakes and recording each request's HTTP version.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::http::{Response, Version};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use super::mock_upstream::{content, finish};

/// The path of a file in `tests/fixtures/tls/`.
pub fn tls_fixture(name: &str) -> String {
    format!("{}/tests/fixtures/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// An upstream on TLS (certificate for `localhost`, signed by the fixture CA)
/// that offers h2 and HTTP/1.1 by ALPN, answers every request with one short SSE
/// stream, and records the HTTP version of each request.
pub struct TlsUpstream {
    /// `https://localhost:PORT/v1`.
    pub url: String,
    handshakes: Arc<AtomicUsize>,
    versions: Arc<Mutex<Vec<Version>>>,
}

impl TlsUpstream {
    /// Starts the upstream on an ephemeral loopback port.
    pub async fn start() -> TlsUpstream {
        Self::with_handshake_delay(Duration::ZERO).await
    }

    /// An upstream that waits `delay` after accepting a connection before its
    /// TLS handshake: a slow connect, as a far upstream or a slow proxy makes it.
    pub async fn with_handshake_delay(delay: Duration) -> TlsUpstream {
        let certs = CertificateDer::pem_file_iter(tls_fixture("localhost.pem"))
            .expect("certificate file")
            .collect::<Result<Vec<_>, _>>()
            .expect("certificate parses");
        let key = PrivateKeyDer::from_pem_file(tls_fixture("localhost.key")).expect("key parses");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server config");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let handshakes = Arc::new(AtomicUsize::new(0));
        let versions = Arc::new(Mutex::new(Vec::new()));
        let (counted, recorded) = (handshakes.clone(), versions.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let (acceptor, recorded) = (acceptor.clone(), recorded.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let Ok(tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    let answer = service_fn(move |request: hyper::Request<_>| {
                        recorded.lock().expect("lock").push(request.version());
                        let events = format!(
                            "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
                            content("加密"),
                            finish()
                        );
                        let response = Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(events);
                        async move { response }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), answer)
                        .await;
                });
            }
        });
        TlsUpstream {
            url: format!("https://localhost:{port}/v1"),
            handshakes,
            versions,
        }
    }

    /// TLS handshakes begun so far (successful or not).
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }

    /// The HTTP version of each request so far.
    pub fn versions(&self) -> Vec<Version> {
        self.versions.lock().expect("lock").clone()
    }
}
