//! The retry budget is the fleet's: what one replica spent, the other cannot.

use std::time::Duration;

use ladle::config::Config;
use ladle::engine::budget::BudgetSettings;

use crate::support::mock_upstream::*;
use crate::support::redis::RedisServer;
use crate::support::*;

#[tokio::test]
async fn the_fleet_shares_one_retry_budget_per_upstream_during_an_outage() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.fallback(status(
        503,
        r#"{"error": {"message": "当前模型访问量较大，请稍后重试"}}"#,
    ));
    // No earned retries, a floor of 4 per window, two attempts per request.
    let tight = |c: &mut Config| {
        c.retry.max_attempts = 2;
        c.budget = BudgetSettings {
            ratio: 0.0,
            min_per_s: 1,
            window: Duration::from_secs(4),
        };
    };
    let a = Gateway::replica(&redis, &upstream)
        .adjust(tight)
        .start()
        .await;
    let b = Gateway::replica(&redis, &upstream)
        .adjust(tight)
        .start()
        .await;
    for _ in 0..8 {
        assert_eq!(a.chat(false).await.status(), 503);
    }
    assert_eq!(upstream.requests().len(), 8 + 4, "A spent the floor");
    // B knows once a sharing round of A's has put A's counts in Redis and a
    // round of B's has read them since. Each replica runs one EVAL a round
    // (every 250 ms) and nothing else here runs EVAL: three more, and at least
    // one of them was B's.
    let limit = Duration::from_secs(2);
    eventually(
        limit,
        "A's 8 first attempts and 4 retries in Redis",
        async || redis.shared_budget("default").await == (8, 4),
    )
    .await;
    let rounds = redis.calls("EVAL").await;
    eventually(limit, "a sharing round of B's", async || {
        redis.calls("EVAL").await >= rounds + 3
    })
    .await;
    for _ in 0..8 {
        assert_eq!(b.chat(false).await.status(), 503);
    }
    assert_eq!(
        upstream.requests().len(),
        8 + 4 + 8,
        "B made no retry: the fleet's budget was spent (apart, each would retry 4)"
    );
    assert_eq!(
        b.metric("ladle_retries_throttled_total{upstream=\"default\"}")
            .await,
        8.0
    );
}
