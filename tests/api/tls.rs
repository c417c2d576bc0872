//! HTTPS upstreams: HTTP/2 by ALPN, extra CAs, and certificates nobody trusts.

use hyper::http::Version;

use crate::support::tls::{TlsUpstream, tls_fixture};
use crate::support::*;

#[tokio::test]
async fn an_https_upstream_that_offers_h2_is_spoken_to_in_h2() {
    let upstream = TlsUpstream::start().await;
    let gateway = Gateway::options()
        .url(&upstream.url)
        .adjust(|c| c.upstream_ca_file = Some(tls_fixture("ca.pem").into()))
        .start()
        .await;
    let response = gateway.chat(false).await;
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    assert_eq!(body["choices"][0]["message"]["content"], "加密");
    assert_eq!(upstream.versions(), [Version::HTTP_2]);
}

#[tokio::test]
async fn an_https_upstream_with_an_unknown_ca_is_a_final_failure_after_one_handshake() {
    let upstream = TlsUpstream::start().await;
    let gateway = Gateway::options().url(&upstream.url).start().await;
    let response = gateway.chat(false).await;
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
