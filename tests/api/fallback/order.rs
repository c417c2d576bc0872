//! Several upstreams (contract 6.1): the order of a request, fallback to the next
//! upstream at once, priority and weight, the per-upstream model, and what names
//! the upstream in events, `meta` and metrics.

use std::time::Duration;

use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::*;

use super::{a_then_b, assert_answer, calls, fridge_events, gateway_over, two_mocks};

#[tokio::test]
async fn a_busy_first_upstream_falls_back_to_the_second_at_once() {
    let (a, b) = two_mocks().await;
    a.fallback(status(503, r#"{"error":{"message":"busy"}}"#));
    b.push([sse_answer(&["备用"])]);
    let gateway = a_then_b(&a, &b).await;
    let started = Instant::now();
    assert_answer(&gateway, "备用").await;
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "no back-off before a fallback"
    );
    assert_eq!(calls(&a, &b), (1, 1));
    assert_eq!(
        gateway
            .metric("ladle_fallbacks_total{from=\"a\",to=\"b\"}")
            .await,
        1.0
    );
    let busy = "ladle_upstream_attempts_total{outcome=\"busy\",upstream=\"a\"}";
    assert_eq!(gateway.metric(busy).await, 1.0);
    let ok = "ladle_upstream_attempts_total{outcome=\"ok\",upstream=\"b\"}";
    assert_eq!(gateway.metric(ok).await, 1.0);
}

#[tokio::test]
async fn a_refused_or_stalled_upstream_falls_back_too() {
    let closed = format!("http://127.0.0.1:{}/v1", free_port());
    let (stalled, good) = two_mocks().await;
    stalled.fallback(sse(vec![Step::Stall]));
    good.cycle([sse_answer(&["好"])]);
    for first in [closed.as_str(), stalled.url.as_str()] {
        let gateway = gateway_over(vec![
            upstream("a", first, 0, 1),
            upstream("b", &good.url, 1, 1),
        ])
        .await;
        let body = json_of(gateway.chat(false).await).await;
        assert_eq!(
            body["choices"][0]["message"]["content"], "好",
            "first: {first}"
        );
    }
    assert_eq!(good.requests().len(), 2);
}

#[tokio::test]
async fn back_on_an_upstream_already_tried_waits_the_back_off() {
    let (a, b) = two_mocks().await;
    a.push([status(503, "{}"), sse_answer(&["再来"])]);
    b.push([status(503, "{}")]);
    let gateway = a_then_b(&a, &b).await;
    let started = Instant::now();
    assert_answer(&gateway, "再来").await;
    // a (busy) → b at once (busy) → a again after attempt 2's back-off (300 ms).
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1000),
        "{took:?}"
    );
    assert_eq!(calls(&a, &b), (2, 1));
}

#[tokio::test]
async fn the_lowest_priority_goes_first_and_weights_share_first_attempts() {
    let (low, heavy, light) = (
        MockUpstream::start().await,
        MockUpstream::start().await,
        MockUpstream::start().await,
    );
    for mock in [&low, &heavy, &light] {
        mock.cycle([sse_answer(&["x"])]);
    }
    let gateway = gateway_over(vec![
        upstream("low", &low.url, 1, 100),
        upstream("heavy", &heavy.url, 0, 3),
        upstream("light", &light.url, 0, 1),
    ])
    .await;
    for _ in 0..80 {
        assert_eq!(gateway.chat(false).await.status(), 200);
    }
    assert_eq!(
        low.requests().len(),
        0,
        "priority 1 waits while priority 0 answers"
    );
    let (h, l) = (heavy.requests().len(), light.requests().len());
    assert_eq!(h + l, 80);
    // 3:1 expects 60:20; a generous band keeps chance from failing the test.
    assert!((45..=75).contains(&h), "heavy {h}, light {l}");
}

#[tokio::test]
async fn a_task_names_the_next_upstream_and_meta_names_the_one_that_answered() {
    let (a, b) = two_mocks().await;
    a.fallback(status(429, "{}"));
    b.push([sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])]);
    let mut second = upstream("b", &b.url, 1, 1);
    second.model = Some("b-model".into());
    let gateway = gateway_over(vec![upstream("a", &a.url, 0, 1), second]).await;
    let events = fridge_events(&gateway).await;
    let retry = events
        .iter()
        .find(|(e, _)| e == "retry")
        .expect("a retry event");
    let retry: serde_json::Value = serde_json::from_str(&retry.1).expect("JSON");
    assert_eq!(retry["upstream"], "b");
    assert_eq!(retry["wait_ms"], 0);
    let result = events
        .iter()
        .find(|(e, _)| e == "result")
        .expect("a result");
    let result: serde_json::Value = serde_json::from_str(&result.1).expect("JSON");
    assert_eq!(result["meta"]["upstream"], "b");
    assert_eq!(result["meta"]["model"], "b-model");
    assert_eq!(a.requests()[0].body["model"], "test-model");
    assert_eq!(
        b.requests()[0].body["model"],
        "b-model",
        "the model sent to b"
    );
}
