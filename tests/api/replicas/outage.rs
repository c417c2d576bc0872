//! Redis going away, at start and under load, and coming back.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::Duration;

use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::redis::{REDIS_PASSWORD, RedisServer};
use crate::support::*;

#[tokio::test]
async fn an_unreachable_redis_at_start_stops_nothing_but_admin_writes() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse_answer(&["照常"]));
    let url = format!("redis://:{REDIS_PASSWORD}@127.0.0.1:{}", free_port());
    let env = [
        ("LADLE_REDIS_URL", url.as_str()),
        ("LADLE_ADMIN_TOKEN", ADMIN_TOKEN),
    ];
    let mut gateway = LadleProcess::start(&upstream.url, &env).await;
    // Chat, with and without a key, and tasks from the folder's prompts.
    assert_eq!(gateway.chat(false).await.status(), 200);
    assert_eq!(gateway.chat_keyed("k-1").await.status(), 200);
    let ready = gateway.get("/readyz").await;
    assert_eq!(ready.status(), 200, "readiness depends on the prompts only");
    let ready = json_of(ready).await;
    assert_eq!(ready["redis"], "unreachable");
    assert_eq!(ready["prompts"], 2);
    let write = gateway.put_prompt("soup", &small_prompt("汤"), None).await;
    assert_eq!(write.status(), 503);
    assert!(write.headers().contains_key("retry-after"));
    let error = json_of(write).await["error"].clone();
    assert_eq!(error["code"], "store_unavailable");
    assert_eq!(error["retryable"], true);
    let metrics = gateway.metrics().await;
    assert!(metrics.contains("ladle_redis_up 0"), "{metrics}");
    assert!(
        metrics.contains("ladle_redis_errors_total{op="),
        "{metrics}"
    );
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let logs = gateway.all_lines().join("\n");
    let said_why = logs.lines().any(|line| {
        serde_json::from_str::<serde_json::Value>(line).is_ok_and(|line| {
            line["message"] == "a store was unavailable"
                && line["op"] == "prompts_write"
                && line["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("refused"))
        })
    });
    assert!(
        said_why,
        "the failed write and its cause are logged:\n{logs}"
    );
    assert!(!logs.contains(REDIS_PASSWORD), "{logs}");
}

#[tokio::test]
async fn redis_stopped_under_load_fails_no_request_and_sharing_resumes_when_it_returns() {
    let mut redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse_answer(&["稳"]));
    let a = Arc::new(Gateway::replica(&redis, &upstream).start().await);
    let b = Arc::new(Gateway::replica(&redis, &upstream).start().await);
    a.sees("recipe", b.prompt_etag("recipe").await.as_deref())
        .await;
    // Load on both replicas, half of it keyed, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|worker| {
            let (replica, stop) = (if worker % 2 == 0 { &a } else { &b }.clone(), stop.clone());
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let response = if n % 2 == 0 {
                        replica.chat_keyed(&format!("load-{worker}-{n}")).await
                    } else {
                        replica.chat(false).await
                    };
                    statuses.push(response.status().as_u16());
                }
                statuses
            })
        })
        .collect();
    // Redis stops once the load is under way.
    requests_arrive(&upstream, 20).await;
    redis.stop();
    // Within 2 s both replicas notice; writes are refused meanwhile.
    for replica in [&a, &b] {
        let what = format!("{} to find Redis unreachable", replica.base);
        eventually(Duration::from_secs(2), what, async || {
            replica.ready().await["redis"] == "unreachable"
        })
        .await;
        assert_eq!(replica.metric("ladle_redis_up").await, 0.0);
    }
    let refused = a.put_prompt("soup", &small_prompt("停"), None).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(json_of(refused).await["error"]["code"], "store_unavailable");
    // Redis comes back once the load has gone on without it for a while.
    requests_arrive(&upstream, upstream.requests().len() + 20).await;
    redis.restart().await;
    // Within 2 s of its return, a write on A goes through and B serves it.
    let started = Instant::now();
    let last = Cell::new(None);
    let what = Lazy(|| format!("a write on A to go through (last: {:?})", last.get()));
    let etag = eventually(Duration::from_secs(2), what, async || {
        let saved = a.put_prompt("soup", &small_prompt("回来了"), None).await;
        last.set(Some(saved.status().as_u16()));
        saved.status().is_success().then(|| etag_of(&saved))
    })
    .await;
    b.sees("soup", Some(&etag)).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    for replica in [&a, &b] {
        assert_eq!(replica.ready().await["redis"], "ok");
        assert_eq!(replica.metric("ladle_redis_up").await, 1.0);
    }
    // Keys are shared again too.
    assert!(!replayed(&a.chat_keyed("after-the-outage").await));
    assert!(replayed(&b.chat_keyed("after-the-outage").await));
    stop.store(true, Ordering::Relaxed);
    let mut answered = 0;
    for worker in load {
        let statuses = worker.await.expect("a load worker");
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
        answered += statuses.len();
    }
    assert!(answered > 20, "the load ran: {answered} requests");
}
