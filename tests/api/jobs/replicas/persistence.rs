//! Know the Redis: a fleet's Redis without its append-only file loses every job
//! when it restarts, so ladle says so: `ladle check` warns (and says `ok` once
//! `appendonly yes`), and `serve` logs one `WARN` naming the risk and reports
//! `ladle_redis_persistent 0`; and a job such a Redis lost answers `410
//! job_lost`, not `404`. Against a real redis-server.

use std::time::Duration;

use serde_json::Value;

use crate::support::mock_upstream::*;
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

#[tokio::test]
async fn a_job_its_redis_lost_is_410_job_lost_and_an_id_never_made_stays_404() {
    let mut redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let url = redis.url();
    let gateway = LadleProcess::start(&upstream.url, &[("LADLE_REDIS_URL", &url)]).await;
    let body = serde_json::json!({"ingredients": ["鸡蛋"]});
    let submitted = gateway.post("/v1/tasks/fridge?async=true", &body).await;
    assert_eq!(submitted.status(), 202);
    let lost = json_of(submitted).await["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    assert_eq!(
        lost.len(),
        "job_".len() + 32,
        "a fleet's id carries its epoch: {lost}"
    );

    // The Redis restarts without persistence: it comes back empty.
    redis.stop();
    redis.restart().await;
    let gone = eventually(
        Duration::from_secs(5),
        "the lost job's answer",
        async || {
            let read = gateway.get(&format!("/v1/jobs/{lost}")).await;
            (read.status() != 503).then_some(read)
        },
    )
    .await;
    assert_eq!(gone.status(), 410);
    let error = json_of(gone).await;
    assert_eq!(
        (
            error["error"]["code"].as_str(),
            error["error"]["retryable"].as_bool()
        ),
        (Some("job_lost"), Some(false)),
        "{error}"
    );

    // A new submit learns the new epoch; an id of it that was never made, and a
    // forged one, are not found.
    let again = eventually(Duration::from_secs(5), "a submit accepted", async || {
        let sent = gateway.post("/v1/tasks/fridge?async=true", &body).await;
        (sent.status() == 202).then_some(sent)
    })
    .await;
    let fresh = json_of(again).await["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    assert_eq!(
        gateway.get(&format!("/v1/jobs/{fresh}")).await.status(),
        200
    );
    let epoch = ladle::jobs::ids::epoch_of(&fresh).expect("an epoch");
    assert_ne!(
        Some(epoch),
        ladle::jobs::ids::epoch_of(&lost),
        "a new epoch"
    );
    let never = ladle::jobs::ids::in_epoch(epoch);
    let mut forged = lost.clone();
    forged.replace_range(8..9, if &lost[8..9] == "x" { "y" } else { "x" });
    for id in [never, forged] {
        let read = gateway.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(read.status(), 404, "{id}");
    }
}
