//! An answer that stalls midway, after output (contract 2's "other" failure): it is
//! retried once, at once, only within `LADLE_EARLY_RETRY_WINDOW_MS` of the request's
//! start. ladle keeps that rule (docs/design/11-failover/, "The early window stays
//! the judge of other failures"); a window of deadline − min-remaining turns it
//! into "retry while a whole answer still fits", which is what these tests show
//! both ways of.

use std::time::Duration;

use crate::support::mock_upstream::*;
use crate::support::*;

/// Writes a word every 100 ms for `for_ms`, then stalls: the idle timeout (300 ms)
/// ends it that much later.
fn stalls_midway(for_ms: u64) -> Script {
    let mut steps = Vec::new();
    for _ in 0..for_ms / 100 {
        steps.push(data(&content("写")));
        steps.push(Step::Pause(Duration::from_millis(100)));
    }
    steps.push(Step::Stall);
    sse(steps)
}

/// The fast config's deadline (3 s), idle timeout (300 ms) and reserve (500 ms),
/// and an early window of `window_ms`.
async fn gateway(upstream: &MockUpstream, window_ms: u64) -> Gateway {
    Gateway::options()
        .mock(upstream)
        .adjust(move |c| c.retry.early_retry_window = Duration::from_millis(window_ms))
        .start()
        .await
}

#[tokio::test]
async fn a_stall_after_output_outside_the_early_window_is_not_retried_by_default() {
    let upstream = MockUpstream::start().await;
    upstream.push([stalls_midway(800), sse_answer(&["完整"])]);
    let gateway = gateway(&upstream, 1000).await;
    let response = gateway.chat(false).await;
    assert_error(response, 502, "upstream_failed").await;
    assert_eq!(
        upstream.requests().len(),
        1,
        "failed at ~1.1 s, past the 1 s window"
    );
}

#[tokio::test]
async fn a_window_of_deadline_minus_reserve_retries_a_stall_while_a_whole_answer_fits() {
    let upstream = MockUpstream::start().await;
    upstream.push([stalls_midway(800), sse_answer(&["完整"])]);
    // 3000 ms deadline − 500 ms reserve.
    let gateway = gateway(&upstream, 2500).await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "完整");
    assert_eq!(upstream.requests().len(), 2);
}
