//! How long a breaker stays open (contract 6.2), on loopback with scaled times:
//! the base while probes fail fast, doubling while they time out, the base again
//! after a close; and a recovered primary back in use within one base opening.

use std::time::Duration;

use ladle::engine::breaker::BreakerSettings;
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::*;

/// Opens after one failure; `base_ms` at first, doubling up to `max_ms`.
fn growing(base_ms: u64, max_ms: u64) -> BreakerSettings {
    BreakerSettings {
        open_base: Duration::from_millis(base_ms),
        open_max: Duration::from_millis(max_ms),
        ..breaker(1, base_ms)
    }
}

/// A gateway in front of primary `a` and backup `b`, with a quick idle timeout.
async fn pair(a: &MockUpstream, b: &MockUpstream, settings: BreakerSettings) -> Gateway {
    Gateway::options()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(long_back_offs)
        .adjust(move |c| {
            c.breaker_settings = settings;
            c.timeouts.idle = Duration::from_millis(50);
        })
        .start()
        .await
}

/// Sends a chat request every 10 ms for `run`; the contents answered, in order.
async fn traffic(gateway: &Gateway, run: Duration) -> Vec<String> {
    let until = Instant::now() + run;
    let mut answers = Vec::new();
    while Instant::now() < until {
        let body = json_of(gateway.chat(false).await).await;
        answers.push(
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or("-")
                .to_owned(),
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    answers
}

/// The gaps between the calls `upstream` received, in ms.
fn gaps(upstream: &MockUpstream) -> Vec<u128> {
    let calls = upstream.requests();
    calls
        .windows(2)
        .map(|w| (w[1].arrived - w[0].arrived).as_millis())
        .collect()
}

#[tokio::test]
async fn probes_that_fail_fast_reopen_the_breaker_for_the_base_time_only() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.fallback(status(503, r#"{"error":{"message":"busy"}}"#));
    b.fallback(sse_answer(&["备用"]));
    let gateway = pair(&a, &b, growing(150, 1200)).await;
    traffic(&gateway, Duration::from_millis(800)).await;
    let gaps = gaps(&a);
    // Every opening lasts 150 ms, plus the wait for the next request (≤ ~40 ms).
    assert!(gaps.len() >= 3, "{gaps:?}");
    assert!(gaps.iter().all(|g| (145..230).contains(g)), "{gaps:?}");
}

#[tokio::test]
async fn probes_that_time_out_double_the_opening_up_to_the_cap_and_a_close_resets_it() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.fallback(sse(vec![Step::Stall]));
    b.fallback(sse_answer(&["备用"]));
    let gateway = pair(&a, &b, growing(100, 400)).await;
    traffic(&gateway, Duration::from_millis(1500)).await;
    // Each gap is the stalled attempt's idle timeout (50 ms) plus the opening:
    // 100, 200, 400, then 400 again (the cap).
    let slow = gaps(&a);
    let openings: Vec<u128> = slow.iter().map(|g| g.saturating_sub(50)).collect();
    assert!(openings.len() >= 4, "{slow:?}");
    // The gaps are between arrivals at the mock, the timers run from the attempts'
    // starts: a first call that waited longer for its connection than the next
    // makes a gap a few ms short of the opening.
    for (opening, expected) in openings.iter().zip([100u128, 200, 400, 400]) {
        assert!(
            (expected - 5..expected + 60).contains(opening),
            "{openings:?}"
        );
    }
    // The primary recovers: the next probe closes the breaker, and the next
    // opening is the base again.
    a.fallback(sse_answer(&["主"]));
    let answers = traffic(&gateway, Duration::from_millis(600)).await;
    assert_eq!(answers.last().map(String::as_str), Some("主"));
    let before = a.requests().len();
    a.fallback(status(503, "{}"));
    traffic(&gateway, Duration::from_millis(300)).await;
    let calls = a.requests();
    let reopened = (calls[before + 1].arrived - calls[before].arrived).as_millis();
    assert!(
        (95..160).contains(&reopened),
        "after a close, the base again: {reopened}"
    );
}

#[tokio::test]
async fn a_recovered_primary_gets_traffic_again_within_one_base_opening() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.fallback(status(503, "{}"));
    b.fallback(sse_answer(&["备用"]));
    let gateway = pair(&a, &b, growing(200, 5_000)).await;
    traffic(&gateway, Duration::from_millis(700)).await;
    a.fallback(sse_answer(&["主"]));
    let recovered = Instant::now();
    eventually(
        Duration::from_secs(2),
        "the primary answering again",
        async || {
            let body = json_of(gateway.chat(false).await).await;
            body["choices"][0]["message"]["content"] == "主"
        },
    )
    .await;
    let back = recovered.elapsed();
    // One base opening (200 ms) at most, plus the gap to the next request.
    assert!(back < Duration::from_millis(260), "{back:?}");
}
