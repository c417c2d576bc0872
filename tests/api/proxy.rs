//! The upstream through a real forward proxy: Debian's `tinyproxy`, started on a
//! free loopback port with a config of its own and stopped by PID. The standard
//! variables reach the real binary (a child process), since a client reads them
//! when it is built; an explicit `LADLE_UPSTREAM_PROXY` is tried in process.

use std::time::Duration;

use ladle::config::{Secret, UpstreamProxy};

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::proxy::Tinyproxy;
use crate::support::tls::{TlsUpstream, tls_fixture};
use crate::support::*;

#[tokio::test]
async fn an_http_upstream_is_reached_through_the_environments_proxy() {
    let proxy = Tinyproxy::start("").await;
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["代理"])]);
    let gateway = LadleProcess::start(&upstream.url, &[("HTTP_PROXY", &proxy.url)]).await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "代理");
    let log = proxy.log();
    assert!(
        log.contains(&format!("POST {}/chat/completions", upstream.url)),
        "the proxy relayed the request: {log}"
    );
}

#[tokio::test]
async fn an_https_upstream_is_reached_by_connect_through_the_environments_proxy() {
    let proxy = Tinyproxy::start("").await;
    let upstream = TlsUpstream::start().await;
    let ca = tls_fixture("ca.pem");
    let env = [
        ("https_proxy", proxy.url.as_str()),
        ("LADLE_UPSTREAM_CA_FILE", &ca),
    ];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "加密");
    let authority = upstream
        .url
        .trim_start_matches("https://")
        .trim_end_matches("/v1");
    let log = proxy.log();
    assert!(
        log.contains(&format!("CONNECT {authority}")),
        "the proxy tunnelled the request: {log}"
    );
}

#[tokio::test]
async fn no_proxy_and_none_bypass_the_environments_proxy() {
    let proxy = Tinyproxy::start("").await;
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["直连"]), sse_answer(&["直连"])]);
    let bypasses: [&[(&str, &str)]; 2] = [
        &[("HTTP_PROXY", &proxy.url), ("NO_PROXY", "127.0.0.1")],
        &[("HTTP_PROXY", &proxy.url), ("LADLE_UPSTREAM_PROXY", "none")],
    ];
    for env in bypasses {
        let gateway = LadleProcess::start(&upstream.url, env).await;
        let body = json_of(gateway.chat(false).await).await;
        assert_eq!(body["choices"][0]["message"]["content"], "直连", "{env:?}");
    }
    assert_eq!(upstream.requests().len(), 2);
    assert!(!proxy.log().contains("chat/completions"), "{}", proxy.log());
}

#[tokio::test]
async fn an_explicit_proxy_with_credentials_is_used_and_its_password_never_logged() {
    let proxy = Tinyproxy::start("BasicAuth ladle pr0xy-s3cret\n").await;
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["凭证"])]);
    let with_password = proxy.url.replace("http://", "http://ladle:pr0xy-s3cret@");
    let env = [("LADLE_UPSTREAM_PROXY", with_password.as_str())];
    let mut gateway = LadleProcess::start(&upstream.url, &env).await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "凭证");
    assert!(proxy.log().contains("chat/completions"));
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let logs = gateway.all_lines().join("\n");
    assert!(!logs.contains("pr0xy-s3cret"), "{logs}");
}

#[tokio::test]
async fn a_proxy_that_is_down_is_a_not_started_failure() {
    let closed = free_port();
    let app = Gateway::with(move |config| {
        config.upstream_proxy =
            UpstreamProxy::Url(Secret::new(format!("http://127.0.0.1:{closed}")));
    })
    .await;
    // The proxy's failures are the upstream's: not started, retried, then 504.
    let response = app.chat(false).await;
    assert_not_started_to_the_deadline(&app, response).await;
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn a_proxy_that_refuses_the_tunnel_is_a_not_started_failure() {
    // Only port 443 may be tunnelled to; the upstream listens elsewhere.
    let proxy = Tinyproxy::start("ConnectPort 443\n").await;
    let upstream = TlsUpstream::start().await;
    let via = UpstreamProxy::Url(Secret::new(proxy.url.clone()));
    let gateway = Gateway::options()
        .url(&upstream.url)
        .adjust(|c| {
            c.upstream_ca_file = Some(tls_fixture("ca.pem").into());
            c.upstream_proxy = via;
        })
        .start()
        .await;
    let response = gateway.chat(false).await;
    assert_error(response, 504, "upstream_timeout").await;
    assert!(upstream.versions().is_empty());
    assert!(
        proxy.log().matches("CONNECT").count() >= 2,
        "retried: {}",
        proxy.log()
    );
}
