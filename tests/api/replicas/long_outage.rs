//! A Redis outage longer than the lease throws no work away: runs that finished
//! while Redis was frozen write their outcome when it is back, and runs still
//! streaming keep their job (their replica renews before anyone sweeps), so no
//! job runs twice. Two real binaries and a real redis-server frozen with SIGSTOP
//! (its data kept, as in a partition).

use std::time::Duration;

use crate::jobs::{fridge, job_after, job_id};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::redis::RedisServer;
use crate::support::scripts::paced_answer;
use crate::support::*;

#[tokio::test]
async fn runs_that_outlive_a_redis_outage_longer_than_the_lease_run_once() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    let answer = |pause_ms| paced_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#], pause_ms);
    // Two runs end during the outage, two go on past it.
    upstream.push([answer(300), answer(300), answer(900), answer(900)]);
    upstream.fallback(answer(0));
    let url = redis.url();
    let fleet = [
        ("LADLE_REDIS_URL", url.as_str()),
        ("LADLE_REDIS_LEASE_MS", "300"),
        ("LADLE_JOB_CONCURRENCY", "2"),
        ("LADLE_DEADLINE_MS", "10000"),
    ];
    let a = LadleProcess::start(&upstream.url, &fleet).await;
    let b = LadleProcess::start(&upstream.url, &fleet).await;
    let mut ids = Vec::new();
    for (n, gateway) in [&a, &b, &a, &b].into_iter().enumerate() {
        let body = fridge(&format!("第{n}份"));
        ids.push(job_id(gateway.post("/v1/tasks/fridge?async=true", &body).await).await);
    }
    requests_arrive(&upstream, 4).await;
    redis.pause();
    // Longer than the lease, and than the short runs.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    redis.resume();
    // A replica asks a Redis it found down at most once a second: reads answer
    // `503` until it has seen Redis back.
    for gateway in [&a, &b] {
        eventually(Duration::from_secs(5), "Redis seen back", async || {
            let read = gateway.get(&format!("/v1/jobs/{}", ids[0])).await;
            (read.status() == 200).then_some(())
        })
        .await;
    }
    for id in &ids {
        let job = job_after(&a, id, 10_000).await;
        assert_eq!(
            (job["status"].as_str(), job["runs"].as_u64()),
            (Some("succeeded"), Some(1)),
            "{job}"
        );
    }
    assert_eq!(upstream.requests().len(), 4, "no run made twice");
}
