//! A client key's `rate_per_s` is one bucket for the fleet (contract 8): what
//! one replica let through, the other knows within a second; without Redis each
//! replica has a bucket of its own.

use std::time::Duration;

use tokio::time::Instant;

use crate::clients::{KEY_A, KEY_B, chat_as, keys_file, rate_limited, retry_after, with_keys};
use crate::support::mock_upstream::*;
use crate::support::redis::RedisServer;
use crate::support::*;

/// Four at once, then one every 4 s: what a test's few rounds refill (a round is
/// 250 ms) never adds up to a token.
const FLEET_RATE: &str = "rate_per_s = 0.25\nburst = 4";

/// What the fleet has told Redis it took of key `name`: every replica's field
/// of `ladle:rate:{name}`, summed.
async fn shared_takings(redis: &RedisServer, name: &str) -> u64 {
    let mut connection = redis.connection().await;
    let fields: Vec<(String, u64)> = ::redis::cmd("HGETALL")
        .arg(format!("ladle:rate:{name}"))
        .query_async(&mut connection)
        .await
        .expect("HGETALL");
    fields.iter().map(|(_, taken)| taken).sum()
}

#[tokio::test]
async fn what_one_replica_let_through_the_other_refuses_within_a_second() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.cycle([sse_answer(&["好"])]);
    // `probe` (used on B only, never limited in practice) shows B's sharing
    // rounds: B's rounds share every key at once.
    let path = keys_file(&[
        ("fleet", KEY_A, FLEET_RATE),
        ("probe", KEY_B, "rate_per_s = 1000\nburst = 1000"),
    ]);
    let a = Gateway::replica(&redis, &upstream)
        .adjust(with_keys(&path))
        .start()
        .await;
    let b = Gateway::replica(&redis, &upstream)
        .adjust(with_keys(&path))
        .start()
        .await;
    for _ in 0..4 {
        assert_eq!(chat_as(&a, KEY_A).await.status(), 200);
    }
    let last_on_a = Instant::now();
    rate_limited(chat_as(&a, KEY_A).await, "4").await;
    // A's round tells Redis; then a round of B's that shares a probe token B
    // took after that has heard A's four. (Each request made to find out would
    // take one of B's own tokens, so B is asked once, when it must know.)
    eventually(
        Duration::from_secs(1),
        "A's four takings in Redis",
        async || shared_takings(&redis, "fleet").await == 4,
    )
    .await;
    // Two probes, each waited for: a round that shared the first may have read
    // the fleet's takings before A's landed (under load a round is slow), but
    // the one that shares the second began after the first had ended.
    for probes in 1..=2 {
        assert_eq!(chat_as(&b, KEY_B).await.status(), 200);
        eventually(
            Duration::from_secs(1),
            "a sharing round of B's",
            async || shared_takings(&redis, "probe").await == probes,
        )
        .await;
    }
    // B's bucket lost A's four in a round of its own: its next token is about
    // 4 s off, less what refilled since that round (under a second).
    let refused = chat_as(&b, KEY_A).await;
    let seconds: u64 = retry_after(&refused).parse().expect("whole seconds");
    assert!(seconds >= 3, "Retry-After: {seconds}");
    rate_limited(refused, &seconds.to_string()).await;
    let knew = last_on_a.elapsed();
    assert!(knew <= Duration::from_millis(1500), "B knew after {knew:?}");
    assert_eq!(upstream.requests().len(), 4 + 2, "A's four and B's probes");
}

#[tokio::test]
async fn without_redis_each_replica_has_a_bucket_of_its_own() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([sse_answer(&["好"])]);
    let path = keys_file(&[("fleet", KEY_A, FLEET_RATE)]);
    let a = Gateway::options()
        .mock(&upstream)
        .adjust(with_keys(&path))
        .start()
        .await;
    let b = Gateway::options()
        .mock(&upstream)
        .adjust(with_keys(&path))
        .start()
        .await;
    for _ in 0..4 {
        assert_eq!(chat_as(&a, KEY_A).await.status(), 200);
    }
    assert_eq!(chat_as(&a, KEY_A).await.status(), 429);
    for _ in 0..4 {
        assert_eq!(chat_as(&b, KEY_A).await.status(), 200, "B's own burst");
    }
    assert_eq!(chat_as(&b, KEY_A).await.status(), 429);
}
