//! The waits operators watch: a completion's wait for its in-flight slot
//! (`ladle_queue_wait_seconds`, every request counted, waiting or not) and the age
//! of the oldest queued job (`ladle_job_queue_age_seconds`, 0 with none queued).

use std::time::Duration;

use crate::jobs::{ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::scripts::paced_answer;
use crate::support::*;

#[tokio::test]
async fn a_request_that_waits_for_the_only_slot_is_seen_in_the_queue_wait_histogram() {
    let gateway = Gateway::with(|config| {
        config.max_inflight = 1;
        config.queue_timeout = Duration::from_secs(2);
    })
    .await;
    let upstream = gateway.upstream();
    // About 400 ms of stream holding the slot, then an answer at once.
    upstream.push([paced_answer(&["慢", "慢", "炖"], 200), sse_answer(&["好"])]);
    let holding = gateway.chat(true);
    let waiting = async {
        requests_arrive(upstream, 1).await;
        gateway.chat(false).await
    };
    let (held, waited) = tokio::join!(holding, waiting);
    assert_eq!(held.status(), 200);
    held.text().await.expect("the stream's body");
    assert_eq!(waited.status(), 200);
    let text = gateway.metrics().await;
    let series = |suffix: &str| format!("ladle_queue_wait_seconds{suffix}");
    assert_eq!(metric_value(&text, &series("_count")), Some(2.0), "{text}");
    let bucket = metric_value(&text, &series("_bucket{le=\"0.005\"}"));
    assert_eq!(bucket, Some(1.0), "the first did not wait: {text}");
    let sum = metric_value(&text, &series("_sum")).expect("a sum");
    assert!(sum >= 0.2, "the second waited for the stream: {sum}");
}

#[tokio::test]
async fn the_oldest_queued_jobs_age_grows_while_it_waits_and_is_0_with_none_queued() {
    let gateway = Gateway::with(|config| {
        config.jobs.runner.concurrency = 1;
        config.jobs.runner.account_every = Duration::from_millis(50);
    })
    .await;
    let upstream = gateway.upstream();
    let slow = paced_answer(&[r#"{"ideas": "#, r#"["番茄"#, r#"炒蛋"]}"#, " "], 200);
    upstream.push([slow, ideas()]);
    let age = "ladle_job_queue_age_seconds";
    assert_eq!(gateway.metric(age).await, 0.0);
    let first = job_id(submit(&gateway, "一").await).await;
    requests_arrive(upstream, 1).await;
    let second = job_id(submit(&gateway, "二").await).await;
    eventually(Duration::from_secs(2), "the queued job's age", async || {
        gateway.metric(age).await >= 0.3
    })
    .await;
    for id in [first, second] {
        assert_eq!(job_after(&gateway, &id, 5000).await["status"], "succeeded");
    }
    eventually(Duration::from_secs(2), "no job queued: age 0", async || {
        gateway.metric(age).await == 0.0
    })
    .await;
}
