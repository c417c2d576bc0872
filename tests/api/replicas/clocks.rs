//! Leases run by Redis's clock, not a replica's: with one replica's clock 30 s
//! ahead (libfaketime, Debian's `faketime`), it never finds the other's live runs
//! expired, so no job is interrupted and none runs twice. On two real binaries
//! and a real redis-server.

use std::path::PathBuf;

use futures_util::future::join_all;

use crate::jobs::{fridge, job_after, job_id};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::redis::RedisServer;
use crate::support::scripts::paced_answer;

/// libfaketime's multi-threaded library, as Debian's `faketime` installs it.
fn libfaketime() -> PathBuf {
    ["x86_64-linux-gnu", "aarch64-linux-gnu"]
        .iter()
        .map(|arch| PathBuf::from(format!("/usr/lib/{arch}/faketime/libfaketimeMT.so.1")))
        .find(|path| path.exists())
        .expect("libfaketime is installed (Debian package `faketime`; .ci/run installs it)")
}

#[tokio::test]
async fn a_replica_30_s_ahead_interrupts_no_job_and_runs_none_twice() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // Each run takes about 1.2 s: past a 1 s lease, so only renewals hold it.
    upstream.cycle([paced_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#], 600)]);
    let url = redis.url();
    let fleet = [
        ("LADLE_REDIS_URL", url.as_str()),
        ("LADLE_REDIS_LEASE_MS", "1000"),
        ("LADLE_JOB_CONCURRENCY", "3"),
    ];
    let on_time = LadleProcess::start(&upstream.url, &fleet).await;
    let preload = libfaketime();
    let mut ahead_env = fleet.to_vec();
    let preload = preload.to_str().expect("a UTF-8 path");
    ahead_env.extend([
        ("LD_PRELOAD", preload),
        ("FAKETIME", "+30s"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]);
    let ahead = LadleProcess::start(&upstream.url, &ahead_env).await;

    let submits = (0..6).map(|n| {
        let gateway = if n % 2 == 0 { &on_time } else { &ahead };
        async move {
            let body = fridge(&format!("第{n}份"));
            job_id(gateway.post("/v1/tasks/fridge?async=true", &body).await).await
        }
    });
    let ids = join_all(submits).await;
    for id in &ids {
        let job = job_after(&on_time, id, 20_000).await;
        assert_eq!(
            (job["status"].as_str(), job["runs"].as_u64()),
            (Some("succeeded"), Some(1)),
            "{job}"
        );
    }
    assert_eq!(
        upstream.requests().len(),
        ids.len(),
        "one upstream call per job"
    );
    let interrupted = "ladle_job_runs_total{task=\"fridge\",outcome=\"interrupted\"}";
    for replica in [&on_time, &ahead] {
        assert_eq!(replica.metric(interrupted).await, 0.0);
    }
}
