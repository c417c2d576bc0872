//! Several upstreams (contract 2, 6.1): the order of a request, fallback to the
//! next upstream, per-upstream attempts before moving on, and does-not-fit
//! rejections routed on while any other 4xx is final.

mod attempts;
mod order;
mod rejections;

use ladle::config::UpstreamSettings;
use serde_json::Value;

use crate::support::mock_upstream::MockUpstream;
use crate::support::*;

/// Two fresh mock upstreams, to be `a` (first) and `b` (behind it).
async fn two_mocks() -> (MockUpstream, MockUpstream) {
    (MockUpstream::start().await, MockUpstream::start().await)
}

/// A gateway over `upstreams` with long back-offs, so a fallback at once shows.
async fn gateway_over(upstreams: Vec<UpstreamSettings>) -> Gateway {
    Gateway::options()
        .upstreams(upstreams)
        .adjust(long_back_offs)
        .start()
        .await
}

/// A gateway over `a` first and `b` behind it, with long back-offs.
async fn a_then_b(a: &MockUpstream, b: &MockUpstream) -> Gateway {
    gateway_over(primary_and_backup(&a.url, &b.url)).await
}

/// How many requests `a` and `b` were sent.
fn calls(a: &MockUpstream, b: &MockUpstream) -> (usize, usize) {
    (a.requests().len(), b.requests().len())
}

/// Asks for a chat answer, asserts its content is `expected` and returns its body.
async fn assert_answer(gateway: &Gateway, expected: &str) -> Value {
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], expected);
    body
}

/// The SSE events of a fridge task asked for one egg.
async fn fridge_events(gateway: &Gateway) -> Vec<(String, String)> {
    let response = gateway
        .post_events(
            "/v1/tasks/fridge",
            &serde_json::json!({"ingredients": ["鸡蛋"]}),
        )
        .await;
    sse_events(&response.text().await.expect("events"))
}
