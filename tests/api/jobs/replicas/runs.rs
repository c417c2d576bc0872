//! Background jobs across replicas (contract 7.1 "Replicas"): jobs live in the
//! fleet's Redis, so a job submitted on one replica is read, waited for and
//! canceled on any, is run again by another replica when the one running it
//! dies, and runs once at a time however many replicas look for work.

use std::time::Duration;

use ladle::config::Config;
use reqwest::Response;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::redis::RedisServer;
use crate::support::scripts::{drip, recipe_answer, slow_answer};
use crate::support::*;

/// Submits a recipe job for `dish`.
async fn submit(replica: &Endpoint, dish: &str) -> Response {
    replica
        .post("/v1/tasks/recipe?async=true", &json!({"dish": dish}))
        .await
}

/// Submits a recipe job for `dish`; its id (the submit must be accepted).
async fn submitted(replica: &Endpoint, dish: &str) -> String {
    let response = submit(replica, dish).await;
    assert_eq!(response.status(), 202);
    let job = json_of(response).await;
    assert_eq!(job["status"], "queued");
    job["id"].as_str().expect("an id").to_owned()
}

/// The job as `replica` shows it, waiting up to `wait_ms` for it to finish.
async fn job_on(replica: &Endpoint, id: &str, wait_ms: u64) -> Value {
    let response = replica
        .get(&format!("/v1/jobs/{id}?wait_ms={wait_ms}"))
        .await;
    assert_eq!(response.status(), 200);
    json_of(response).await
}

async fn cancel(replica: &Endpoint, id: &str) -> Response {
    replica.delete(&format!("/v1/jobs/{id}")).await
}

/// A replica's job runs that ended as `outcome` (`2xx`, `canceled`, …).
async fn runs_ended(replica: &Endpoint, outcome: &str) -> f64 {
    let label = format!("outcome=\"{outcome}\"");
    replica
        .metrics()
        .await
        .lines()
        .filter(|line| line.starts_with("ladle_job_runs_total{") && line.contains(&label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A `503 store_unavailable` with `Retry-After`.
async fn store_unavailable(response: Response) {
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let (_, error) = error_of(response).await;
    assert_eq!(
        (error["code"].clone(), error["retryable"].clone()),
        (json!("store_unavailable"), json!(true))
    );
}

#[tokio::test]
async fn a_job_submitted_on_one_replica_is_read_and_waited_for_on_the_other() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([recipe_answer()]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let response = submit(&a, "红烧肉").await;
    assert_eq!(response.status(), 202);
    let location = response.headers().get("location").cloned();
    let id = json_of(response).await["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    assert_eq!(
        location.expect("Location"),
        format!("/v1/jobs/{id}").as_str()
    );
    let seen = json_of(b.get(&format!("/v1/jobs/{id}")).await).await;
    assert_eq!(seen["id"], id.as_str(), "B reads the job at once");
    let done = job_on(&b, &id, 10_000).await;
    assert_eq!(
        (done["status"].clone(), done["runs"].clone()),
        (json!("succeeded"), json!(1))
    );
    let expected: Value =
        serde_json::from_str(&fixture_text("recipe-normalized.json")).expect("golden JSON");
    assert_eq!(done["result"]["output"], expected);
    assert_eq!(
        job_on(&a, &id, 1).await,
        done,
        "both replicas show the same job"
    );
    assert_eq!(upstream.requests().len(), 1);
    assert_eq!(
        runs_ended(&a, "2xx").await + runs_ended(&b, "2xx").await,
        1.0
    );
}

#[tokio::test]
async fn a_cancel_on_one_replica_stops_the_run_on_the_other_within_a_second() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // Output every 50 ms: the run goes on until something stops it.
    upstream.push([drip("炖", millis(50))]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let id = submitted(&a, "东坡肉").await;
    requests_arrive(&upstream, 1).await;
    // B starts once A runs the job, so the run is A's.
    let b = Gateway::replica(&redis, &upstream).start().await;
    let canceled_at = Instant::now();
    let response = cancel(&b, &id).await;
    assert_eq!(response.status(), 200);
    assert_eq!(json_of(response).await["status"], "canceled");
    let closed = upstream
        .closed_at(0)
        .await
        .expect("A's upstream socket closes");
    assert!(
        ms(canceled_at, closed) < 1_000,
        "closed {} ms after the cancel",
        ms(canceled_at, closed)
    );
    eventually(
        Duration::from_secs(1),
        "A's run to end canceled",
        async || runs_ended(&a, "canceled").await == 1.0,
    )
    .await;
    assert_eq!(job_on(&a, &id, 1).await["status"], "canceled");
    assert_eq!(
        cancel(&a, &id).await.status(),
        409,
        "over already, on either replica"
    );
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn the_job_of_a_replica_that_dies_is_run_again_by_another_after_its_lease() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([drip("炖", millis(50)), recipe_answer()]);
    let state_db = std::env::temp_dir().join(format!(
        "ladle-jobs-unused-{}-{}.db",
        std::process::id(),
        free_port()
    ));
    let (url, state) = (redis.url(), state_db.display().to_string());
    let env = [
        ("LADLE_REDIS_URL", url.as_str()),
        ("LADLE_REDIS_LEASE_MS", "600"),
        ("LADLE_STATE_DB", state.as_str()),
    ];
    let mut a = LadleProcess::start(&upstream.url, &env).await;
    let id = submitted(&a, "狮子头").await;
    requests_arrive(&upstream, 1).await;
    let b = LadleProcess::start(&upstream.url, &env).await;
    a.kill();
    let killed = Instant::now();
    let done = job_on(&b, &id, 10_000).await;
    assert_eq!(
        (done["status"].clone(), done["runs"].clone()),
        (json!("succeeded"), json!(2))
    );
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    // Not before A's lease (renewed every 100 ms, 600 ms long) ran out.
    let after = ms(killed, requests[1].arrived);
    assert!(
        (400..3_000).contains(&after),
        "run again {after} ms after the kill"
    );
    assert_eq!(runs_ended(&b, "interrupted").await, 1.0);
    assert!(
        !state_db.exists(),
        "with Redis the state file is not even created"
    );
}

#[tokio::test]
async fn with_redis_stopped_submits_reads_and_cancels_are_503_until_it_returns() {
    let mut redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.fallback(recipe_answer());
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let id = submitted(&a, "白切鸡").await;
    assert_eq!(job_on(&b, &id, 10_000).await["status"], "succeeded");
    redis.stop();
    store_unavailable(submit(&a, "白切鸡").await).await;
    store_unavailable(b.get(&format!("/v1/jobs/{id}")).await).await;
    store_unavailable(b.get(&format!("/v1/jobs/{id}?wait_ms=100")).await).await;
    store_unavailable(cancel(&b, &id).await).await;
    redis.restart().await;
    let id = eventually(
        Duration::from_secs(3),
        "a submit to be accepted again",
        async || {
            let response = submit(&a, "盐焗鸡").await;
            match response.status().as_u16() {
                202 => Some(json_of(response).await["id"].as_str().map(str::to_owned)),
                _ => None,
            }
        },
    )
    .await
    .expect("an id");
    // B may still take Redis for down for a second (it asks a Redis it found
    // down once a second): short waits, read again until the job is done.
    let done = eventually(
        Duration::from_secs(5),
        "B to read the job done",
        async || {
            let response = b.get(&format!("/v1/jobs/{id}?wait_ms=1000")).await;
            match response.status().as_u16() {
                200 => Some(json_of(response).await)
                    .filter(|job| job["status"] != "queued" && job["status"] != "running"),
                _ => None,
            }
        },
    )
    .await;
    assert_eq!(done["status"], "succeeded");
    let (status, error) = error_of(cancel(&b, &id).await).await;
    assert_eq!(
        (status, error["code"].clone()),
        (409, json!("job_finished"))
    );
}

#[tokio::test]
async fn the_bound_on_unfinished_jobs_is_the_fleets() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.fallback(drip("炖", millis(50)));
    let one_at_a_time = |config: &mut Config| {
        config.jobs.max_queued = 3;
        config.jobs.runner.concurrency = 1;
    };
    let a = Gateway::replica(&redis, &upstream)
        .adjust(one_at_a_time)
        .start()
        .await;
    let b = Gateway::replica(&redis, &upstream)
        .adjust(one_at_a_time)
        .start()
        .await;
    let first = submitted(&a, "一").await;
    submitted(&a, "二").await;
    // Each replica runs one; the third waits queued.
    requests_arrive(&upstream, 2).await;
    submitted(&b, "三").await;
    for replica in [&a, &b] {
        let response = submit(replica, "四").await;
        assert_eq!(response.status(), 503);
        assert!(response.headers().contains_key("retry-after"));
        assert_eq!(error_of(response).await.1["code"], "overloaded");
    }
    // Both replicas count the fleet's jobs.
    for replica in [&a, &b] {
        let what = format!("{} to count 2 running and 1 queued", replica.base);
        eventually(Duration::from_secs(2), what, async || {
            replica.metric("ladle_jobs{status=\"running\"}").await == 2.0
                && replica.metric("ladle_jobs{status=\"queued\"}").await == 1.0
        })
        .await;
    }
    assert_eq!(cancel(&b, &first).await.status(), 200);
    submitted(&b, "四").await;
}

#[tokio::test]
async fn no_job_runs_twice_however_many_replicas_look_for_work() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    let mut answer = recipe_answer();
    answer.0.insert(1, Step::Pause(millis(30)));
    upstream.fallback(answer);
    let two = |config: &mut Config| config.jobs.runner.concurrency = 2;
    let a = Gateway::replica(&redis, &upstream)
        .adjust(two)
        .start()
        .await;
    let b = Gateway::replica(&redis, &upstream)
        .adjust(two)
        .start()
        .await;
    let dishes: Vec<String> = (1..=16).map(|n| format!("第{n}道菜")).collect();
    let submits = dishes.iter().enumerate().map(|(n, dish)| {
        let replica = if n % 2 == 0 { &a } else { &b };
        submitted(replica, dish)
    });
    let ids = futures_util::future::join_all(submits).await;
    for (n, id) in ids.iter().enumerate() {
        let done = job_on(if n % 2 == 0 { &b } else { &a }, id, 20_000).await;
        assert_eq!(
            (done["status"].clone(), done["runs"].clone()),
            (json!("succeeded"), json!(1)),
            "{id}"
        );
    }
    let sent: Vec<String> = (0..upstream.requests().len())
        .map(|index| user_message_sent(&upstream, index))
        .collect();
    for dish in &dishes {
        let asked = sent
            .iter()
            .filter(|message| message.contains(dish.as_str()))
            .count();
        assert_eq!(asked, 1, "{dish} was asked for {asked} times");
    }
    assert_eq!(sent.len(), 16);
    let (on_a, on_b) = (runs_ended(&a, "2xx").await, runs_ended(&b, "2xx").await);
    assert!(
        on_a > 0.0 && on_b > 0.0 && on_a + on_b == 16.0,
        "A ran {on_a}, B {on_b}"
    );
}

#[tokio::test]
async fn a_replica_shutting_down_keeps_the_lease_of_the_run_it_lets_finish() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // A whole recipe written over about 1.5 s: longer than the lease (600 ms).
    let parts = pieces(&fixture_text("recipe-raw-model-output.txt"), 7);
    let gap = millis((1_500 / parts.len() as u64).max(1));
    upstream.push([slow_answer(
        &parts.iter().map(String::as_str).collect::<Vec<_>>(),
        gap,
    )]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (a, server) = Gateway::replica(&redis, &upstream)
        .start_until(async move {
            let _ = stopped.await;
        })
        .await;
    let id = submitted(&a, "佛跳墙").await;
    requests_arrive(&upstream, 1).await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    // SIGTERM, as it were: A stops taking work and lets its run finish.
    let _ = stop.send(());
    let stopping = Instant::now();
    let done = job_on(&b, &id, 10_000).await;
    assert!(stopping.elapsed() > millis(700), "the run outlived a lease");
    assert_eq!(
        (done["status"].clone(), done["runs"].clone()),
        (json!("succeeded"), json!(1))
    );
    assert_eq!(upstream.requests().len(), 1, "B never ran it meanwhile");
    let drained = tokio::time::timeout(Duration::from_secs(5), server).await;
    assert!(matches!(drained, Ok(Ok(Ok(())))), "A stopped: {drained:?}");
}
