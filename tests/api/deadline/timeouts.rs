//! Contract section 6 as far as it is built: the caller's deadline
//! (`X-Request-Timeout-Ms`, 6.5) and the first-output timeout (6.4).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::scripts::{drip, only_role_deltas};
use crate::support::*;

/// A chat request the caller gives `timeout_ms` (`X-Request-Timeout-Ms`).
async fn chat_within(app: &Gateway, timeout_ms: &str) -> reqwest::Response {
    app.chat_request(false)
        .header("x-request-timeout-ms", timeout_ms)
        .send()
        .await
        .expect("gateway answers")
}

#[tokio::test]
async fn the_callers_timeout_shortens_the_deadline() {
    let app = Gateway::start().await;
    app.upstream().fallback(drip("还在写", millis(50)));
    let started = Instant::now();
    let response = chat_within(&app, "250").await;
    assert_deadline_exceeded(response).await;
    let took = started.elapsed();
    assert!(
        took >= millis(250) && took < millis(1500),
        "{took:?} (configured: 3 s)"
    );
}

#[tokio::test]
async fn the_callers_timeout_never_lengthens_the_deadline() {
    let app = Gateway::with(|config| {
        config.deadline = millis(400);
        config.retry.min_remaining = millis(100);
    })
    .await;
    app.upstream().fallback(drip("还在写", millis(50)));
    let started = Instant::now();
    let response = chat_within(&app, "100000").await;
    assert_deadline_exceeded(response).await;
    assert!(started.elapsed() < millis(1500), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_task_takes_the_callers_timeout_too() {
    let app = Gateway::start().await;
    app.upstream().fallback(drip("还在写", millis(50)));
    let response = app
        .post_request("/v1/tasks/fridge", &json!({"ingredients": ["鸡蛋"]}))
        .header("x-request-timeout-ms", "200")
        .send()
        .await
        .expect("gateway answers");
    assert_deadline_exceeded(response).await;
}

#[tokio::test]
async fn a_bad_callers_timeout_is_400_before_any_upstream_call() {
    let app = Gateway::start().await;
    for bad in ["0", "-5", "1.5", "soon", "", "12ms"] {
        let response = chat_within(&app, bad).await;
        assert_eq!(response.status(), 400, "{bad:?}");
        let body: Value = json_of(response).await;
        assert_eq!(body["error"]["code"], "invalid_request", "{bad:?}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("X-Request-Timeout-Ms")),
            "{body}"
        );
    }
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn the_first_output_timeout_fires_while_role_only_deltas_keep_arriving() {
    let app = Gateway::with(|config| config.timeouts.first_output = Some(millis(200))).await;
    app.upstream()
        .push([only_role_deltas(), sse_answer(&["终于"])]);
    let started = Instant::now();
    let response = app.chat(false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        json_of(response).await["choices"][0]["message"]["content"],
        "终于"
    );
    assert!(started.elapsed() >= millis(200));
    assert_eq!(app.upstream().requests().len(), 2);
    assert_eq!(
        app.metric("ladle_retries_total{reason=\"not_started\"}")
            .await,
        1.0,
        "a not-started failure, retried as one"
    );
    assert!(
        app.upstream().closed_at(0).await.is_some(),
        "the first attempt was dropped"
    );
}

#[tokio::test]
async fn the_first_output_timeout_stops_counting_at_the_first_output() {
    let app = Gateway::with(|config| config.timeouts.first_output = Some(millis(100))).await;
    let mut steps = vec![data(&content("先"))];
    for piece in ["慢", "慢", "写"] {
        steps.push(Step::Pause(millis(80)));
        steps.push(data(&content(piece)));
    }
    steps.extend([data(&finish()), data("[DONE]")]);
    app.upstream().push([sse(steps)]);
    let body = json_of(app.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "先慢慢写");
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn without_the_setting_role_only_deltas_wait_for_the_idle_timer_alone() {
    let app = Gateway::with(|config| config.deadline = millis(1500)).await;
    app.upstream().push([only_role_deltas()]);
    let response = app.chat(false).await;
    // Events keep coming, so only the deadline ends it.
    assert_deadline_exceeded(response).await;
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_first_output_timeout_is_logged_with_its_reason() {
    let upstream = MockUpstream::start().await;
    upstream.push([only_role_deltas(), sse_answer(&["好"])]);
    let env = [("LADLE_FIRST_OUTPUT_TIMEOUT_MS", "150")];
    let mut gateway = LadleProcess::start(&upstream.url, &env).await;
    let response = gateway.chat_as("first-output", false).await;
    assert_eq!(response.status(), 200);
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let attempts = gateway.lines_of("first-output", "attempt ended");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "not_started");
    assert_eq!(attempts[0]["reason"], "first_output_timeout");
    let ended = gateway.lines_of("first-output", "completion ended");
    assert_eq!(
        ended[0]["deadline_ms"], 4000,
        "the effective budget is logged"
    );
}
