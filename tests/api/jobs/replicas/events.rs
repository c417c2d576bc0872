//! A job's event stream across replicas (contract 11.1, 11.2): its events live
//! in Redis, so a run on one replica is read live on another within 250 ms,
//! a stream dropped on one is resumed on the other from the cursor seen, and a
//! replica killed mid-run leaves its events for the re-run's to follow.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::jobs::events::{IDEAS, located, paced_ideas, reader, submit_streamed, text_of};
use crate::jobs::submit;
use crate::support::events::{EventReader, gapless, ids};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::redis::RedisServer;
use crate::support::scripts::drip;
use crate::support::*;

#[tokio::test]
async fn a_run_on_one_replica_is_read_live_and_resumed_on_the_other() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([paced_ideas(10, 80)]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let response = submit_streamed(&a, "番茄").await;
    assert_eq!(response.status(), 200);
    let id = located(&response);
    let mut on_a = EventReader::new(response);
    let mut on_b = reader(&b, &id, None).await;
    // Read side by side: each event reaches B soon after A.
    let mut lags = Vec::new();
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    while let Some(event) = on_a.next().await {
        let at = Instant::now();
        let there = on_b.next().await.expect("B has it too");
        lags.push(Instant::now() - at);
        seen_a.push(event);
        seen_b.push(there);
    }
    assert_eq!(on_b.next().await, None, "B's stream ends with A's");
    assert_eq!(seen_a, seen_b, "the same events, byte for byte");
    assert!(gapless(&ids(&seen_a)), "{:?}", ids(&seen_a));
    assert_eq!(text_of(&seen_a), IDEAS);
    let slowest = lags.iter().max().expect("lags");
    assert!(*slowest < Duration::from_millis(250), "{slowest:?}");

    // Dropped on A after five events, resumed on B from the fifth's id.
    upstream.push([paced_ideas(10, 80)]);
    let response = submit_streamed(&a, "青椒").await;
    let id = located(&response);
    let first = EventReader::new(response).take(5).await;
    let seen = first[4].id.clone().expect("an id");
    let rest = reader(&b, &id, Some(&seen)).await.rest().await;
    let whole = reader(&a, &id, None).await.rest().await;
    let mut joined = first.clone();
    joined.extend(rest);
    assert_eq!(joined, whole);
    assert_eq!(
        b.metric("ladle_job_stream_resumes_total{from=\"kept\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_replica_killed_mid_run_leaves_its_events_and_the_re_run_is_streamed_on_another() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([drip("番", Duration::from_millis(40))]);
    let url = redis.url();
    let fleet = [
        ("LADLE_REDIS_URL", url.as_str()),
        ("LADLE_REDIS_LEASE_MS", "400"),
    ];
    let mut a = LadleProcess::start(&upstream.url, &fleet).await;
    let response = submit_streamed(&a, "番茄").await;
    let id = located(&response);
    let cut = EventReader::new(response).take(6).await;
    let seen = cut[5].id.clone().expect("an id");
    assert_eq!(seen, "1.5");
    a.kill();
    upstream.push([paced_ideas(4, 20)]);
    let b = LadleProcess::start(&upstream.url, &fleet).await;
    // The cut run's events are still kept: B goes on from the cursor, through
    // what A wrote before it died, to the re-run.
    let rest = reader(&b, &id, Some(&seen)).await.rest().await;
    let rerun = rest
        .iter()
        .position(|e| e.id.as_deref() == Some("2.1"))
        .expect("the re-run's running event");
    assert!(rest[..rerun].iter().all(|e| e.event == "delta"), "{rest:?}");
    let running = rest[rerun].json();
    assert_eq!(
        (running["status"].clone(), running["runs"].clone()),
        (json!("running"), json!(2))
    );
    assert_eq!(text_of(&rest[rerun..]), IDEAS);
    assert_eq!(rest.last().expect("events").json()["status"], "succeeded");
    let all = reader(&b, &id, None).await.rest().await;
    assert!(gapless(&ids(&all)), "{:?}", ids(&all));
    assert_eq!(ids(&all)[..6], ids(&cut)[..]);
}

#[tokio::test]
async fn the_long_poll_on_another_replica_answers_when_an_event_comes() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([paced_ideas(4, 200)]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let submitted = submit(&a, "番茄").await;
    let id = crate::jobs::job_id(submitted).await;
    let page = eventually(Duration::from_secs(5), "events on B", async || {
        let response = b
            .client
            .get(b.url(&format!("/v1/jobs/{id}/events?after=0.1&wait_ms=3000")))
            .header("accept", "application/json")
            .send()
            .await
            .ok()?;
        let page = json_of(response).await;
        (!page["events"].as_array()?.is_empty()).then_some(page)
    })
    .await;
    assert_eq!(page["events"][0]["id"], "1.1", "{page}");
    assert_eq!(page["events"][0]["data"]["status"], "running");
}

#[tokio::test]
async fn while_redis_is_away_the_run_goes_on_and_its_events_come_when_it_is_back() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // Slow enough that most of the run's events come while Redis is away.
    upstream.push([paced_ideas(10, 200)]);
    // Real processes, each with its own runtimes, as a fleet runs; a lease
    // that outlives the outage, so the run stays where it is.
    let url = redis.url();
    let fleet = [
        ("LADLE_REDIS_URL", url.as_str()),
        ("LADLE_REDIS_LEASE_MS", "5000"),
    ];
    let a = LadleProcess::start(&upstream.url, &fleet).await;
    let b = LadleProcess::start(&upstream.url, &fleet).await;
    let response = submit_streamed(&a, "番茄").await;
    let id = located(&response);
    drop(response);
    let mut on_b = reader(&b, &id, None).await;
    let before = on_b.take(4).await;
    redis.pause();
    // The run goes on to its end while Redis is away.
    let ended = "ladle_upstream_attempts_total{outcome=\"ok\",upstream=\"default\"}";
    // (Whichever replica took the run.)
    eventually(Duration::from_secs(5), "the run's end", async || {
        let ran = a.metric(ended).await + b.metric(ended).await;
        (ran >= 1.0).then_some(())
    })
    .await;
    redis.resume();
    let after = on_b.rest().await;
    let mut all = before;
    all.extend(after);
    assert!(gapless(&ids(&all)), "{:?}", ids(&all));
    assert_eq!(text_of(&all), IDEAS);
    assert_eq!(all.last().expect("events").json()["status"], "succeeded");
    assert_eq!(upstream.requests().len(), 1, "the run went on, not again");
}
