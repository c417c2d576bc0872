//! Know the Redis: a fleet's Redis without its append-only file loses every job
//! when it restarts, so ladle says so: `ladle check` warns (and says `ok` once
//! `appendonly yes`), and `serve` logs one `WARN` naming the risk and reports
//! `ladle_redis_persistent 0`. Against a real redis-server.

use std::time::Duration;

use serde_json::Value;

use crate::support::mock_upstream::MockUpstream;
use crate::support::process::{LadleProcess, finished, ladle_command, text_of};
use crate::support::redis::RedisServer;
use crate::support::*;

/// `ladle check`'s output against the Redis at `url`.
async fn check_with(url: &str) -> String {
    let mut command = ladle_command();
    command
        .arg("check")
        .env("LADLE_PROMPTS_DIR", prompts_copy())
        .env("LADLE_REDIS_URL", url);
    let output = finished(command).await;
    assert!(output.status.success(), "a warning is no problem");
    text_of(&output)
}

#[tokio::test]
async fn a_redis_without_its_append_only_file_is_named_as_a_risk() {
    let redis = RedisServer::start().await;
    let warned = check_with(&redis.url()).await;
    assert!(
        warned.contains("warning redis has no append-only file"),
        "{warned}"
    );
    assert!(
        !warned.contains(crate::support::redis::REDIS_PASSWORD),
        "the URL's password never shows"
    );

    let upstream = MockUpstream::start().await;
    let url = redis.url();
    let gateway = LadleProcess::start(&upstream.url, &[("LADLE_REDIS_URL", &url)]).await;
    let line = eventually(Duration::from_secs(5), "the WARN line", async || {
        gateway.lines().into_iter().find_map(|line| {
            let line: Value = serde_json::from_str(&line).ok()?;
            let said = line["message"].as_str()?.contains("no append-only file");
            said.then_some(line)
        })
    })
    .await;
    assert_eq!(line["level"], "WARN");
    assert_eq!(gateway.metric("ladle_redis_persistent").await, 0.0);

    let mut connection = redis.connection().await;
    let _: () = ::redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query_async(&mut connection)
        .await
        .expect("appendonly on");
    let fine = check_with(&redis.url()).await;
    assert!(
        fine.contains("ok      redis keeps jobs across its restart"),
        "{fine}"
    );
}
