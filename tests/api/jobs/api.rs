//! Submit, read, wait, cancel (contract 7.1).

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{fridge, ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::scripts::paced_answer;
use crate::support::*;

#[tokio::test]
async fn a_submit_is_202_with_the_queued_job_then_it_runs_and_a_wait_sees_it_succeed() {
    let upstream = MockUpstream::start().await;
    upstream.push([paced_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#], 100)]);
    let gateway = Gateway::options().mock(&upstream).start().await;
    let response = submit(&gateway, "番茄").await;
    assert_eq!(response.status(), 202);
    assert_eq!(response.headers()["preference-applied"], "respond-async");
    let location = response.headers()["location"]
        .to_str()
        .expect("text")
        .to_owned();
    let job = json_of(response).await;
    assert_eq!(
        location,
        format!("/v1/jobs/{}", job["id"].as_str().expect("an id"))
    );
    assert_eq!(
        (job["object"].as_str(), job["status"].as_str()),
        (Some("job"), Some("queued"))
    );
    assert_eq!(
        (job["task"].as_str(), job["runs"].as_u64()),
        (Some("fridge"), Some(0))
    );
    let id = job["id"].as_str().expect("an id");
    assert!(
        id.len() == 26 && id[4..].bytes().all(|b| b.is_ascii_alphanumeric()),
        "{id}"
    );
    let done = job_after(&gateway, id, 3_000).await;
    assert_eq!(
        (done["status"].as_str(), done["runs"].as_u64()),
        (Some("succeeded"), Some(1))
    );
    assert_eq!(done["result"]["task"], "fridge");
    assert_eq!(done["result"]["output"], json!({"ideas": ["番茄炒蛋"]}));
    assert!(done.get("error").is_none());
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn prefer_respond_async_among_other_preferences_submits() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([ideas()]);
    let gateway = Gateway::options().mock(&upstream).start().await;
    let response = gateway
        .post_request("/v1/tasks/fridge", &fridge("豆腐"))
        .header("prefer", "wait=10, Respond-Async")
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 202);
    assert_eq!(response.headers()["content-type"], "application/json");
    // With `Accept: text/event-stream` the answer is the job's stream (11.1).
    let streamed = gateway
        .post_request("/v1/tasks/fridge", &fridge("青椒"))
        .header("prefer", "wait=10, Respond-Async")
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("answers");
    assert_eq!(streamed.status(), 200);
    assert_eq!(streamed.headers()["content-type"], "text/event-stream");
    assert_eq!(streamed.headers()["preference-applied"], "respond-async");
    assert!(
        streamed.headers()["location"]
            .to_str()
            .is_ok_and(|l| l.starts_with("/v1/jobs/job_"))
    );
}

#[tokio::test]
async fn a_submit_that_fails_its_checks_creates_nothing() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([ideas()]);
    let gateway = Gateway::options().mock(&upstream).start().await;
    let unknown = gateway
        .post("/v1/tasks/nope?async=true", &fridge("x"))
        .await;
    assert_eq!(unknown.status(), 404);
    let missing = gateway
        .post("/v1/tasks/fridge?async=true", &json!({}))
        .await;
    assert_eq!(missing.status(), 422);
    let bad_timeout = gateway
        .post_request("/v1/tasks/fridge?async=true", &fridge("x"))
        .header("x-request-timeout-ms", "soon")
        .send()
        .await
        .expect("answers");
    assert_eq!(bad_timeout.status(), 400);
    // Had any been created, a run would have reached the upstream.
    tokio::task::yield_now().await;
    assert!(
        within(Duration::from_millis(300), async || !upstream
            .requests()
            .is_empty())
        .await
        .is_none()
    );
}

#[tokio::test]
async fn unknown_malformed_and_badly_waited_for_jobs_are_refused() {
    let gateway = Gateway::start().await;
    for path in [
        "/v1/jobs/job_00000000000000000000Zz",
        "/v1/jobs/..%2Fetc",
        "/v1/jobs/x",
    ] {
        let response = gateway.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
        let body = json_of(response).await;
        assert_eq!(
            (
                body["error"]["code"].as_str(),
                body["error"]["retryable"].as_bool()
            ),
            (Some("job_not_found"), Some(false))
        );
    }
    let id = job_id(submit(&gateway, "x").await).await;
    for wait in ["0", "60001", "soon", "1.5", "-1", ""] {
        let response = gateway.get(&format!("/v1/jobs/{id}?wait_ms={wait}")).await;
        assert_eq!(response.status(), 400, "wait_ms={wait}");
    }
}

#[tokio::test]
async fn a_wait_answers_after_wait_ms_when_the_job_is_not_done() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let gateway = Gateway::options().mock(&upstream).start().await;
    let id = job_id(submit(&gateway, "慢").await).await;
    let started = Instant::now();
    let job = job_after(&gateway, &id, 300).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(290) && waited < Duration::from_millis(600),
        "{waited:?}"
    );
    assert!(
        matches!(job["status"].as_str(), Some("running" | "queued")),
        "{job}"
    );
}

#[tokio::test]
async fn a_cancel_stops_the_running_run_at_once_and_a_second_cancel_is_409() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let gateway = Gateway::options().mock(&upstream).start().await;
    let id = job_id(submit(&gateway, "慢").await).await;
    eventually(
        Duration::from_secs(2),
        "the run reaching the upstream",
        async || !upstream.requests().is_empty(),
    )
    .await;
    let canceled_at = Instant::now();
    let response = gateway.delete(&format!("/v1/jobs/{id}")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(json_of(response).await["status"], "canceled");
    let closed = eventually(
        Duration::from_secs(1),
        "the upstream socket to close",
        async || upstream.requests()[0].closed,
    )
    .await;
    assert!(closed - canceled_at < Duration::from_secs(1));
    let again = gateway.delete(&format!("/v1/jobs/{id}")).await;
    assert_eq!(again.status(), 409);
    assert_eq!(json_of(again).await["error"]["code"], "job_finished");
    assert_eq!(job_after(&gateway, &id, 1).await["status"], "canceled");
}

#[tokio::test]
async fn a_canceled_job_is_counted_finished_whether_it_was_queued_or_running() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let gateway = Gateway::options()
        .mock(&upstream)
        .adjust(|config| config.jobs.runner.concurrency = 1)
        .start()
        .await;
    let running = job_id(submit(&gateway, "先").await).await;
    let queued = job_id(submit(&gateway, "后").await).await;
    requests_arrive(&upstream, 1).await;
    assert_eq!(job_after(&gateway, &queued, 1).await["status"], "queued");
    for id in [&queued, &running] {
        let response = gateway.delete(&format!("/v1/jobs/{id}")).await;
        assert_eq!(response.status(), 200);
    }
    let canceled = "ladle_jobs_finished_total{task=\"fridge\",status=\"canceled\"}";
    assert_eq!(gateway.metric(canceled).await, 2.0);
}

#[tokio::test]
async fn the_same_submit_under_a_key_gets_the_same_job_and_another_request_is_422() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([ideas()]);
    let gateway = Gateway::options().mock(&upstream).start().await;
    let keyed = |marker: &str| {
        gateway
            .post_request("/v1/tasks/fridge?async=true", &fridge(marker))
            .header("idempotency-key", "order-7")
            .send()
    };
    let first = keyed("鸡").await.expect("answers");
    assert!(first.headers().get("idempotent-replayed").is_none());
    let id = job_id(first).await;
    job_after(&gateway, &id, 3_000).await;
    let again = keyed("鸡").await.expect("answers");
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let job = json_of(again).await;
    assert_eq!(
        (job["id"].as_str(), job["status"].as_str()),
        (Some(id.as_str()), Some("succeeded"))
    );
    assert_eq!(keyed("鸭").await.expect("answers").status(), 422);
    assert_eq!(upstream.requests().len(), 1, "one job, one run");
    // A synchronous request under a submit's key is another request.
    let sync = gateway
        .post_request("/v1/tasks/fridge", &fridge("鸡"))
        .header("idempotency-key", "order-7")
        .send()
        .await
        .expect("answers");
    assert_eq!(sync.status(), 422);
}

#[tokio::test]
async fn a_malformed_path_or_query_is_a_json_error_not_plain_text() {
    let gateway = Gateway::start().await;
    for (path, status, code) in [
        (
            "/v1/jobs/job_0000000000000000000001?wait_ms=1&wait_ms=2",
            400,
            "invalid_request",
        ),
        ("/v1/jobs/%FF", 404, "job_not_found"),
        ("/v1/jobs/%FF?wait_ms=5", 404, "job_not_found"),
    ] {
        let response = gateway.get(path).await;
        assert_eq!(response.status(), status, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{path}"
        );
        let error = json_of(response).await;
        assert_eq!(error["error"]["code"], code, "{path}: {error}");
    }
    let canceled = gateway.delete("/v1/jobs/%FF").await;
    assert_eq!(json_of(canceled).await["error"]["code"], "job_not_found");
}
