//! `GET /admin/status`, the status panel's data: under the admin token only;
//! per upstream its breaker, attempts in flight, the last outcomes and times to
//! first output; the job queue by status; each caching task's kept answers.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mock_upstream::*;
use crate::support::scripts::{paced_answer, recipe_answer};
use crate::support::*;

/// The status, which must be answered.
async fn status_of(gateway: &Gateway) -> Value {
    let response = gateway.admin(Method::GET, "/admin/status").send().await;
    let response = response.expect("the gateway answers");
    assert_eq!(response.status(), 200);
    json_of(response).await
}

#[tokio::test]
async fn the_status_needs_the_admin_token() {
    let gateway = Gateway::options().admin().start().await;
    let response = gateway.get("/admin/status").await;
    assert_eq!(error_of(response).await.0, 401);
}

#[tokio::test]
async fn an_open_breaker_the_last_outcomes_an_attempt_in_flight_jobs_and_kept_answers() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.fallback(status_busy());
    let gateway = Gateway::options()
        .admin()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(|c| c.breaker_settings = breaker(2, 60_000))
        .start()
        .await;
    // Two busy attempts on a (each request then falls back to b): a opens.
    b.push([sse_answer(&["好"]), recipe_answer()]);
    assert_eq!(gateway.chat(false).await.status(), 200);
    let kept = gateway.task("recipe", &json!({"dish": "香酥鸭"})).await;
    assert_eq!(kept.status(), 200);
    // A stream in flight on b while the status is read.
    b.push([paced_answer(&["慢", "慢"], 200)]);
    let streaming = gateway.chat(true).await;
    assert_eq!(
        streaming.status(),
        200,
        "a: {:?}, b: {:?}",
        a.requests().len(),
        b.requests().len()
    );
    let seen = status_of(&gateway).await;
    let [first, second] = seen["upstreams"].as_array().expect("upstreams").as_slice() else {
        panic!("two upstreams: {seen}");
    };
    assert_eq!(first["name"], "a");
    assert_eq!(first["breaker"], "open", "{seen}");
    assert_eq!(first["inflight"], 0);
    assert_eq!(first["recent"]["outcomes"], json!({"busy": 2}), "{seen}");
    assert_eq!(first["recent"]["last"], json!(["busy", "busy"]));
    assert_eq!(first["first_output_ms"], json!({"p50": null, "p95": null}));
    assert_eq!(second["name"], "b");
    assert_eq!(second["breaker"], "closed");
    assert_eq!(second["inflight"], 1, "the stream: {seen}");
    assert_eq!(second["recent"]["outcomes"], json!({"ok": 2}), "{seen}");
    assert!(
        second["first_output_ms"]["p95"].as_u64().is_some(),
        "{seen}"
    );
    assert_eq!(seen["kept_attempts"], 100);
    assert_eq!(
        seen["jobs"],
        json!({"queued": 0, "running": 0, "retry_wait": 0, "oldest_queued_age_ms": null})
    );
    let tasks = seen["cache"]["tasks"].as_array().expect("tasks");
    assert!(
        tasks.contains(&json!({"task": "recipe", "entries": 1})),
        "{seen}"
    );
    streaming.text().await.expect("the stream's body");
    eventually(Duration::from_secs(1), "b's stream ended", async || {
        status_of(&gateway).await["upstreams"][1]["inflight"] == 0
    })
    .await;
}

/// A busy refusal, as the flaky upstreams say it.
fn status_busy() -> Script {
    status(
        503,
        r#"{"error": {"message": "当前模型访问量较大，请稍后重试"}}"#,
    )
}
