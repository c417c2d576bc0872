//! HTTPS upstreams: HTTP/2 by ALPN, extra CAs, and certificates nobody trusts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hyper::http::{Response, Version};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use crate::helpers::*;
use crate::mock_upstream::{content, finish};
use crate::upstream::post_chat;

#[tokio::test]
async fn an_https_upstream_that_offers_h2_is_spoken_to_in_h2() {
    let upstream = TlsUpstream::start().await;
    let prompts_dir = prompts_copy();
    let mut config = fast_config(&prompts_dir);
    config.upstream_ca_file = Some(fixture("ca.pem").into());
    let base = spawn_gateway(config, &upstream.url).await;
    let response = post_chat(&base).await;
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    assert_eq!(body["choices"][0]["message"]["content"], "加密");
    assert_eq!(upstream.versions(), [Version::HTTP_2]);
}

#[tokio::test]
async fn an_https_upstream_with_an_unknown_ca_is_a_final_failure_after_one_handshake() {
    let upstream = TlsUpstream::start().await;
    let prompts_dir = prompts_copy();
    let base = spawn_gateway(fast_config(&prompts_dir), &upstream.url).await;
    let response = post_chat(&base).await;
    assert_eq!(response.status(), 502);
    let error = json_of(response).await["error"].clone();
    assert_eq!(error["code"], "upstream_failed");
    assert_eq!(error["retryable"], false);
    let message = error["message"].as_str().expect("a message");
    assert!(
        message.contains("certificate") && message.contains("UnknownIssuer"),
        "the message names the cause: {message}"
    );
    assert_eq!(upstream.handshakes(), 1, "not retried");
    assert!(upstream.versions().is_empty(), "nothing was sent");
}

pub fn fixture(name: &str) -> String {
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
    pub async fn start() -> TlsUpstream {
        let certs = CertificateDer::pem_file_iter(fixture("localhost.pem"))
            .expect("certificate file")
            .collect::<Result<Vec<_>, _>>()
            .expect("certificate parses");
        let key = PrivateKeyDer::from_pem_file(fixture("localhost.key")).expect("key parses");
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

    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }

    pub fn versions(&self) -> Vec<Version> {
        self.versions.lock().expect("lock").clone()
    }
}
