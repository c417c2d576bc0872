//! Idempotency keys across replicas: a kept result, a run in progress, and a
//! claim whose replica died.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::redis::{REDIS_PASSWORD, RedisServer};
use crate::support::scripts::paced_answer;
use crate::support::*;

#[tokio::test]
async fn a_key_used_on_one_replica_is_replayed_by_the_other_without_an_upstream_call() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["红烧", "肉"])]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let first = a.chat_keyed("order-1").await;
    assert!(!replayed(&first));
    let first = json_of(first).await;
    let again = b.chat_keyed("order-1").await;
    assert!(replayed(&again));
    assert_eq!(json_of(again).await, first, "A's body, unchanged");
    assert_eq!(upstream.requests().len(), 1);
    assert_eq!(
        b.metric("ladle_idempotency_total{outcome=\"replayed\"}")
            .await,
        1.0
    );
    // Another request under the key is refused on either replica.
    let other = b
        .post_keyed(
            "/v1/chat/completions",
            "order-1",
            &json!({"messages": [{"role": "user", "content": "别的菜"}]}),
            false,
        )
        .await;
    assert_eq!(other.status(), 422);
}

#[tokio::test]
async fn a_run_in_progress_on_one_replica_is_waited_for_by_the_other() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // The run outlasts the claim's lease (600 ms): A must keep renewing it.
    upstream.push([paced_answer(&["慢", "炖", "好"], 250)]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let running = tokio::spawn(async move { json_of(a.chat_keyed("stew").await).await });
    requests_arrive(&upstream, 1).await;
    let waited = b.chat_keyed("stew").await;
    assert!(replayed(&waited));
    let waited = json_of(waited).await;
    let ran = running.await.expect("A's request");
    assert_eq!(waited, ran);
    assert_eq!(waited["choices"][0]["message"]["content"], "慢炖好");
    assert_eq!(upstream.requests().len(), 1);
    assert_eq!(
        b.metric("ladle_idempotency_total{outcome=\"joined\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_claim_held_by_a_killed_replica_expires_with_its_lease() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // A's run never ends: the upstream stalls until A dies.
    upstream.push([sse(vec![data(&role()), Step::Stall])]);
    upstream.fallback(sse_answer(&["重做"]));
    let url = redis.url();
    let env = [
        ("LADLE_REDIS_URL", url.as_str()),
        // Longer than B takes to start on a loaded machine: the claim must
        // still be held when B's repeat comes.
        ("LADLE_REDIS_LEASE_MS", "1200"),
        ("LADLE_IDLE_TIMEOUT_MS", "10000"),
        ("LADLE_DEADLINE_MS", "20000"),
    ];
    let mut a = LadleProcess::start(&upstream.url, &env).await;
    // The request dies with A: its error is no answer to wait for.
    let on_a = a.chat_request(false).header("idempotency-key", "crashed");
    tokio::spawn(async move {
        let _ = on_a.send().await;
    });
    requests_arrive(&upstream, 1).await;
    a.kill();
    let b = Gateway::replica(&redis, &upstream).start().await;
    // The repeat waits for the dead run until its lease runs out, then hears it
    // was dropped; the next repeat runs anew.
    let started = Instant::now();
    let waited = b.chat_keyed("crashed").await;
    assert!(replayed(&waited));
    assert_eq!(waited.status(), 502);
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "{:?}",
        started.elapsed()
    );
    let rerun = b.chat_keyed("crashed").await;
    assert!(!replayed(&rerun));
    assert_eq!(
        json_of(rerun).await["choices"][0]["message"]["content"],
        "重做"
    );
    // The dead replica never logged the Redis password.
    let logs = a.all_lines().join("\n");
    assert!(logs.contains("redis reachable"), "{logs}");
    assert!(!logs.contains(REDIS_PASSWORD), "{logs}");
}

#[tokio::test]
async fn a_run_whose_client_left_goes_on_for_a_repeat_waiting_on_another_replica() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([paced_answer(&["接着", "做"], 150)]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let leaving = tokio::spawn(async move { a.chat_keyed("left").await });
    requests_arrive(&upstream, 1).await;
    let waiting = tokio::spawn(async move { b.chat_keyed("left").await });
    // Once B's repeat is seen waiting, A's client goes away.
    redis.wait_for_key("ladle:idem-watched:left").await;
    leaving.abort();
    let waited = waiting.await.expect("B's request");
    assert!(replayed(&waited));
    assert_eq!(
        json_of(waited).await["choices"][0]["message"]["content"],
        "接着做"
    );
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_result_over_the_size_bound_is_answered_but_not_kept() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // 1,100 chunks of 1,000 bytes: over the 1 MiB a kept result may take.
    let piece = "汤".repeat(333) + "x";
    let pieces: Vec<&str> = std::iter::repeat_n(piece.as_str(), 1_100).collect();
    upstream.push([sse_answer(&pieces), sse_answer(&["小份"])]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let big = a.chat_keyed("big").await;
    assert_eq!(big.status(), 200);
    let big = json_of(big).await;
    assert_eq!(
        big["choices"][0]["message"]["content"]
            .as_str()
            .map(str::len),
        Some(1_100_000)
    );
    let again = b.chat_keyed("big").await;
    assert!(!replayed(&again), "not kept: the repeat runs anew");
    assert_eq!(
        json_of(again).await["choices"][0]["message"]["content"],
        "小份"
    );
    assert_eq!(upstream.requests().len(), 2);
}
