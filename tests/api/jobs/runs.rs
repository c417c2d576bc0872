//! A job's runs (contract 7.1): retried after a retryable failure, failed for good
//! after its last run or a final error, at most `LADLE_JOB_CONCURRENCY` at once,
//! at most `LADLE_JOB_MAX_QUEUED` unfinished; with their metrics.

use std::time::Duration;

use ladle::config::Config;
use serde_json::json;

use super::{ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::scripts::paced_answer;
use crate::support::*;

/// One upstream attempt per run, and a quick next run.
fn one_attempt_quick_retry(config: &mut Config) {
    config.retry.max_attempts = 1;
    config.jobs.runner.retry = Duration::from_millis(200);
}

/// A gateway in front of `upstream`, one upstream attempt a run and a quick next run.
async fn quick_retrying(upstream: &MockUpstream) -> Gateway {
    Gateway::options()
        .mock(upstream)
        .adjust(one_attempt_quick_retry)
        .start()
        .await
}

/// A gateway, its config changed by `adjust`, in front of a mock that stalls
/// every request; the mock and the gateway.
async fn stalling(adjust: impl FnOnce(&mut Config) + Send + 'static) -> (MockUpstream, Gateway) {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let gateway = Gateway::options()
        .mock(&upstream)
        .adjust(adjust)
        .start()
        .await;
    (upstream, gateway)
}

/// Waits up to 2 s for job `id` to wait for its next run (`retry_wait`); the job.
async fn waiting_for_its_next_run(gateway: &Gateway, id: &str) -> serde_json::Value {
    eventually(
        Duration::from_secs(2),
        "the job to wait for its next run",
        async || {
            let job = job_after(gateway, id, 1).await;
            (job["status"] == "retry_wait").then_some(job)
        },
    )
    .await
}

#[tokio::test]
async fn a_busy_run_waits_then_runs_again_and_succeeds_on_its_second_run() {
    let upstream = MockUpstream::start().await;
    upstream.push([status(503, r#"{"error":{"message":"busy"}}"#), ideas()]);
    let gateway = quick_retrying(&upstream).await;
    let id = job_id(submit(&gateway, "x").await).await;
    let waiting = waiting_for_its_next_run(&gateway, &id).await;
    assert!(waiting["next_run_at"].is_string(), "{waiting}");
    assert!(waiting.get("error").is_none(), "not shown while waiting");
    let done = job_after(&gateway, &id, 3_000).await;
    assert_eq!(
        (done["status"].as_str(), done["runs"].as_u64()),
        (Some("succeeded"), Some(2))
    );
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].arrived - requests[0].arrived >= Duration::from_millis(200));
    let runs =
        |outcome: &str| format!("ladle_job_runs_total{{task=\"fridge\",outcome=\"{outcome}\"}}");
    assert_eq!(gateway.metric(&runs("5xx")).await, 1.0);
    assert_eq!(gateway.metric(&runs("2xx")).await, 1.0);
    let finished = "ladle_jobs_finished_total{task=\"fridge\",status=\"succeeded\"}";
    assert_eq!(gateway.metric(finished).await, 1.0);
}

#[tokio::test]
async fn a_job_out_of_runs_or_with_a_final_error_fails_with_that_error() {
    let upstream = MockUpstream::start().await;
    upstream.push([status(503, "{}"), status(503, "{}"), status(503, "{}")]);
    let gateway = quick_retrying(&upstream).await;
    let id = job_id(submit(&gateway, "x").await).await;
    let failed = eventually(Duration::from_secs(4), "the job to fail", async || {
        let job = job_after(&gateway, &id, 500).await;
        (job["status"] == "failed").then_some(job)
    })
    .await;
    assert_eq!(failed["runs"], 3, "LADLE_JOB_MAX_RUNS");
    assert_eq!(failed["error"]["code"], "upstream_busy");
    assert!(failed["error"]["request_id"].is_string());
    assert!(failed.get("result").is_none());

    upstream.push([status(
        400,
        r#"{"error":{"message":"bad","code":"content_filter"}}"#,
    )]);
    let id = job_id(submit(&gateway, "y").await).await;
    let rejected = job_after(&gateway, &id, 3_000).await;
    assert_eq!(
        (rejected["status"].as_str(), rejected["runs"].as_u64()),
        (Some("failed"), Some(1))
    );
    assert_eq!(rejected["error"]["code"], "upstream_rejected");
}

#[tokio::test]
async fn no_more_than_job_concurrency_runs_at_once() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([paced_answer(&[r#"{"ideas": ["慢"]}"#], 150)]);
    let gateway = Gateway::options()
        .mock(&upstream)
        .adjust(|c| c.jobs.runner.concurrency = 2)
        .start()
        .await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(job_id(submit(&gateway, &format!("第{n}")).await).await);
    }
    let mut most = 0;
    eventually(Duration::from_secs(5), "every job to finish", async || {
        most = most.max(upstream.open_sockets());
        let mut done = true;
        for id in &ids {
            done &= job_after(&gateway, id, 1).await["status"] == "succeeded";
        }
        done
    })
    .await;
    assert_eq!(most, 2, "two at once, never more");
    assert_eq!(upstream.requests().len(), 5, "each job once");
}

#[tokio::test]
async fn a_submit_past_job_max_queued_is_503_overloaded_and_writes_nothing() {
    let (_upstream, gateway) = stalling(|c| {
        c.jobs.max_queued = 2;
        c.jobs.runner.concurrency = 1;
    })
    .await;
    job_id(submit(&gateway, "a").await).await;
    job_id(submit(&gateway, "b").await).await;
    let third = submit(&gateway, "c").await;
    assert_eq!(third.status(), 503);
    assert!(third.headers().contains_key("retry-after"));
    assert_eq!(json_of(third).await["error"]["code"], "overloaded");
    // The gauges are counted about once a second: they settle on one running, one queued.
    eventually(
        Duration::from_secs(3),
        "one running and one queued",
        async || {
            let metrics = gateway.metrics().await;
            let value = |status: &str| {
                metric_value(&metrics, &format!("ladle_jobs{{status=\"{status}\"}}"))
            };
            (value("running") == Some(1.0) && value("queued") == Some(1.0)).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_run_keeps_the_submits_timeout_and_its_request_id_is_its_own() {
    let (upstream, gateway) = stalling(|c| {
        c.retry.max_attempts = 1;
        c.jobs.runner.retry = Duration::from_secs(60);
    })
    .await;
    let response = gateway
        .post_request(
            "/v1/tasks/fridge?async=true",
            &json!({"ingredients": ["蛋"]}),
        )
        .header("x-request-timeout-ms", "200")
        .header("x-request-id", "the-submit")
        .send()
        .await
        .expect("answers");
    let id = job_id(response).await;
    let waiting = waiting_for_its_next_run(&gateway, &id).await;
    assert_eq!(waiting["runs"], 1);
    let closed = upstream.requests()[0]
        .closed
        .expect("closed at the deadline");
    let took = closed - upstream.requests()[0].arrived;
    assert!(took < Duration::from_millis(600), "{took:?}");
}
