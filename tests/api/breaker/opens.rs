//! Circuit breakers (contract 6.2) and retry budgets (6.3) against real TCP mock
//! upstreams.

use std::time::Duration;

use ladle::config::BreakerMode;
use ladle::engine::breaker::BreakerSettings;
use ladle::engine::budget::BudgetSettings;

use crate::support::mock_upstream::*;
use crate::support::tls::TlsUpstream;
use crate::support::*;

#[tokio::test]
async fn after_n_failures_in_a_row_the_breaker_opens_and_the_upstream_is_skipped() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.fallback(status(503, "{}"));
    b.cycle([sse_answer(&["b"])]);
    let gateway = Gateway::options()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(|c| {
            c.breaker_settings = breaker(2, 10_000);
        })
        .start()
        .await;
    for _ in 0..5 {
        assert_eq!(gateway.chat(false).await.status(), 200);
    }
    assert_eq!(
        a.requests().len(),
        2,
        "open after two failures: skipped since"
    );
    assert_eq!(b.requests().len(), 5);
    assert_eq!(
        gateway.metric("ladle_breaker_state{upstream=\"a\"}").await,
        1.0
    );
    assert_eq!(
        gateway.metric("ladle_breaker_state{upstream=\"b\"}").await,
        0.0
    );
    let opened = "ladle_breaker_transitions_total{upstream=\"a\",to=\"open\"}";
    assert_eq!(gateway.metric(opened).await, 1.0);
}

#[tokio::test]
async fn the_failed_share_over_the_window_opens_it_too() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.cycle([status(503, "{}"), sse_answer(&["a"])]);
    b.cycle([sse_answer(&["b"])]);
    let gateway = Gateway::options()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(|c| {
            c.breaker_settings = BreakerSettings {
                failures: 100,
                error_ratio: 0.5,
                min_attempts: 4,
                ..breaker(100, 10_000)
            };
        })
        .start()
        .await;
    for _ in 0..6 {
        assert_eq!(gateway.chat(false).await.status(), 200);
    }
    // a: fail, ok, fail, ok → 4 counted, half failed → open; then skipped.
    assert_eq!(a.requests().len(), 4);
}

#[tokio::test]
async fn half_open_lets_exactly_one_probe_through_and_its_success_closes_it() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.push([status(503, "{}")]);
    // The probe's answer takes a while, so the other requests overlap it.
    a.fallback(sse(vec![
        Step::Pause(Duration::from_millis(150)),
        data(&content("a")),
        data(&finish()),
        data("[DONE]"),
    ]));
    b.cycle([sse_answer(&["b"])]);
    let gateway = Gateway::options()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(|c| {
            c.breaker_settings = breaker(1, 200);
        })
        .start()
        .await;
    assert_eq!(
        gateway.chat(false).await.status(),
        200,
        "a fails, opens; b answers"
    );
    // Half-open comes with time, not with a state to poll: the breaker turns
    // half-open when a request asks after its 200 ms (asking would spend the
    // probe), so the test waits out the open time itself.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let answers = futures_util::future::join_all((0..6).map(|_| gateway.chat(false))).await;
    assert!(answers.iter().all(|r| r.status() == 200));
    assert_eq!(a.requests().len(), 2, "the first failure and one probe");
    let closed = "ladle_breaker_transitions_total{upstream=\"a\",to=\"closed\"}";
    assert_eq!(gateway.metric(closed).await, 1.0);
    assert_eq!(gateway.chat(false).await.status(), 200);
    assert_eq!(a.requests().len(), 3, "closed: a is first again");
}

#[tokio::test]
async fn every_breaker_open_is_503_with_retry_after_and_no_upstream_call() {
    let a = MockUpstream::start().await;
    a.fallback(status(503, "{}"));
    let gateway = Gateway::options()
        .upstreams(vec![upstream("a", &a.url, 0, 1)])
        .adjust(|c| {
            c.breaker = BreakerMode::On;
            c.breaker_settings = breaker(1, 5_000);
        })
        .start()
        .await;
    assert_eq!(
        gateway.chat(false).await.status(),
        503,
        "busy; the breaker opens"
    );
    let calls = a.requests().len();
    let refused = gateway.chat(false).await;
    assert_eq!(refused.status(), 503);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=5).contains(&wait), "{wait}");
    assert_eq!(refused.headers()["x-should-retry"], "true");
    assert_eq!(json_of(refused).await["error"]["code"], "upstream_busy");
    assert_eq!(a.requests().len(), calls, "no upstream call");
}

#[tokio::test]
async fn a_budget_caps_retries_during_an_outage_while_fallbacks_still_go_out() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.fallback(status(503, "{}"));
    b.fallback(status(503, "{}"));
    let gateway = Gateway::options()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(|c| {
            c.breaker = BreakerMode::Off;
            c.budget = BudgetSettings {
                ratio: 0.25,
                min_per_s: 0,
                window: Duration::from_secs(10),
            };
        })
        .start()
        .await;
    let requests = 8;
    for _ in 0..requests {
        assert_eq!(gateway.chat(false).await.status(), 503);
    }
    // Each request: a (first), b (a fallback: first), then retries to a and b,
    // which the budgets allow 0.25 per first attempt: over eight requests, two
    // retries to each (in the 4th and the 8th).
    let (to_a, to_b) = (a.requests().len(), b.requests().len());
    assert_eq!(to_a, requests + requests / 4, "a got {to_a}");
    assert_eq!(
        to_b,
        requests + requests / 4,
        "every fallback went out, and the retries the budget allows: b got {to_b}"
    );
    let throttled = gateway
        .metric("ladle_retries_throttled_total{upstream=\"a\"}")
        .await
        + gateway
            .metric("ladle_retries_throttled_total{upstream=\"b\"}")
            .await;
    assert!(throttled >= 1.0, "{throttled}");
}

#[tokio::test]
async fn an_upstream_whose_tls_failed_is_not_called_again_in_that_request() {
    let untrusted = TlsUpstream::start().await;
    let busy = MockUpstream::start().await;
    busy.fallback(status(503, "{}"));
    let gateway = Gateway::options()
        .upstreams(vec![
            upstream("tls", &untrusted.url, 0, 1),
            upstream("busy", &busy.url, 1, 1),
        ])
        .adjust(|c| c.breaker = BreakerMode::Off)
        .start()
        .await;
    let response = gateway.chat(false).await;
    // tls (final for it) → busy at once → busy again after its back-offs; never tls.
    assert_error(response, 503, "upstream_busy").await;
    assert_eq!(untrusted.handshakes(), 1);
    assert!(busy.requests().len() >= 2);
}
