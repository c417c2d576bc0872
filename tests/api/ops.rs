//! Operations: metrics, logs, readiness, bounded concurrency, slow clients,
//! graceful shutdown and secrets (contract section 5, issue 5).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::scripts::{drip, slow_answer};
use crate::support::*;

// === Metrics ===

#[tokio::test]
async fn metrics_render_every_contract_series_and_move_after_a_busy_retry_a_success_and_an_error() {
    // Arrange
    let app = Gateway::start().await;
    let before = app.metrics().await;
    app.upstream().push([
        status(503, "{}"),
        sse_answer(&["好"]),
        status(401, r#"{"error":{"message":"bad key"}}"#),
    ]);
    // Act
    let busy_then_ok = app.chat(false).await;
    let rejected = app.chat(false).await;
    // Assert
    assert_eq!(busy_then_ok.status(), 200);
    assert_eq!(rejected.status(), 502);
    // Series with fixed labels are there from the start; requests_total gets
    // its (route, code) series as requests end.
    for line in [
        "# TYPE ladle_upstream_attempts_total counter",
        "# TYPE ladle_retries_total counter",
        "# TYPE ladle_request_duration_seconds histogram",
        "# TYPE ladle_time_to_first_output_seconds histogram",
        "# TYPE ladle_inflight_requests gauge",
        "ladle_inflight_requests 0",
    ] {
        assert!(before.contains(line), "missing `{line}` in\n{before}");
    }
    for outcome in [
        "ok",
        "busy",
        "not_started",
        "failed",
        "rejected",
        "deadline",
        "cancelled",
    ] {
        let series =
            format!("ladle_upstream_attempts_total{{outcome=\"{outcome}\",upstream=\"default\"}}");
        assert_eq!(metric_value(&before, &series), Some(0.0), "{series}");
    }
    for reason in ["busy", "not_started", "failed"] {
        let series = format!("ladle_retries_total{{reason=\"{reason}\"}}");
        assert_eq!(metric_value(&before, &series), Some(0.0), "{series}");
    }
    let after = app.metrics().await;
    assert!(after.contains("# TYPE ladle_requests_total counter"));
    let moved = [
        ("ladle_retries_total{reason=\"busy\"}", 1.0),
        (
            "ladle_upstream_attempts_total{outcome=\"busy\",upstream=\"default\"}",
            1.0,
        ),
        (
            "ladle_upstream_attempts_total{outcome=\"ok\",upstream=\"default\"}",
            1.0,
        ),
        (
            "ladle_upstream_attempts_total{outcome=\"rejected\",upstream=\"default\"}",
            1.0,
        ),
        (
            "ladle_upstream_attempts_total{outcome=\"failed\",upstream=\"default\"}",
            0.0,
        ),
        (
            "ladle_requests_total{route=\"/v1/chat/completions\",code=\"200\"}",
            1.0,
        ),
        (
            "ladle_requests_total{route=\"/v1/chat/completions\",code=\"502\"}",
            1.0,
        ),
        ("ladle_requests_total{route=\"/metrics\",code=\"200\"}", 1.0),
        ("ladle_time_to_first_output_seconds_count", 1.0),
        // Two chat requests; never a scrape, a probe or a job read.
        (
            "ladle_request_duration_seconds_count{route=\"/v1/chat/completions\"}",
            2.0,
        ),
        (
            "ladle_request_duration_seconds_count{route=\"/v1/tasks/{name}\"}",
            0.0,
        ),
        ("ladle_inflight_requests", 0.0),
    ];
    assert!(
        !after.contains("ladle_request_duration_seconds_count{route=\"/metrics\"}"),
        "a scrape is never in the duration histogram:\n{after}"
    );
    for (series, expected) in moved {
        assert_eq!(
            metric_value(&after, series),
            Some(expected),
            "{series} in\n{after}"
        );
    }
}

#[tokio::test]
async fn a_live_stream_counts_as_in_flight_and_its_duration_covers_the_whole_stream() {
    // Arrange
    let app = Gateway::start().await;
    app.upstream()
        .push([slow_answer(&["一", "二", "三"], millis(150))]);
    // Act
    let (response, first) = app.chat_streaming().await;
    let during = app.metrics().await;
    let rest = response.text().await.expect("the rest of the stream");
    let after = app.metrics().await;
    // Assert
    assert!(!first.is_empty());
    assert!(
        rest.ends_with("data: [DONE]\n\n"),
        "stream ended with {rest:?}"
    );
    assert_eq!(metric_value(&during, "ladle_inflight_requests"), Some(1.0));
    assert_eq!(
        metric_value(
            &during,
            "ladle_requests_total{route=\"/v1/chat/completions\",code=\"200\"}"
        ),
        None,
        "a stream is counted when it ends, not when its head is sent"
    );
    assert_eq!(metric_value(&after, "ladle_inflight_requests"), Some(0.0));
    assert_eq!(
        metric_value(
            &after,
            "ladle_requests_total{route=\"/v1/chat/completions\",code=\"200\"}"
        ),
        Some(1.0)
    );
    // The head went out after the first piece; two 150 ms pauses followed.
    let series = "ladle_request_duration_seconds_sum{route=\"/v1/chat/completions\"}";
    let total = metric_value(&after, series).expect("a sum");
    assert!(total >= 0.3, "duration sum {total} s misses the stream");
}

// === Bounded concurrency ===

#[tokio::test]
async fn with_max_inflight_1_a_second_call_waits_out_the_queue_and_gets_503_overloaded() {
    // Arrange: queue timeout 200 ms, the first call takes about 750 ms.
    let app = Gateway::with(|c| c.max_inflight = 1).await;
    app.upstream().push([slow_answer(
        &["慢", "慢", "慢", "慢", "慢", "慢"],
        millis(150),
    )]);
    let endpoint = Endpoint::clone(&app);
    let first = tokio::spawn(async move { endpoint.chat(false).await });
    requests_arrive(app.upstream(), 1).await;
    // Act
    let started = Instant::now();
    let second = app.chat(false).await;
    let waited = started.elapsed();
    // Assert
    assert_eq!(second.status(), 503);
    let retry_after = second.headers()["retry-after"]
        .to_str()
        .expect("header")
        .to_owned();
    assert!(retry_after.parse::<u64>().expect("seconds") >= 1);
    let body = json_of(second).await;
    assert_eq!(body["error"]["code"], "overloaded");
    assert_eq!(body["error"]["retryable"], true);
    assert!(waited >= millis(180), "answered after {waited:?}");
    assert!(waited < millis(550), "answered after {waited:?}");
    assert_eq!(first.await.expect("first call").status(), 200);
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn time_spent_in_the_queue_counts_against_the_request_deadline() {
    // Arrange: the queue would wait 5 s, but a chat request has 400 ms in all.
    // A long task holds the only slot.
    let app = Gateway::with(|c| {
        c.max_inflight = 1;
        c.queue_timeout = Duration::from_secs(5);
        c.deadline = millis(400);
        c.retry.min_remaining = millis(100);
    })
    .await;
    app.upstream().push([drip("滴", millis(20))]);
    let endpoint = Endpoint::clone(&app);
    let holder = tokio::spawn(async move { endpoint.task("recipe", &json!({"dish": "鸭"})).await });
    requests_arrive(app.upstream(), 1).await;
    // Act
    let started = Instant::now();
    let queued = app.chat(false).await;
    let waited = started.elapsed();
    holder.abort();
    // Assert
    assert_eq!(queued.status(), 504);
    assert_eq!(json_of(queued).await["error"]["code"], "deadline_exceeded");
    assert!(waited >= millis(350), "answered after {waited:?}");
    assert!(waited < millis(1000), "answered after {waited:?}");
    assert_eq!(app.upstream().requests().len(), 1);
}

// === Slow and hostile clients ===

#[tokio::test]
async fn an_endless_upstream_line_fails_the_attempt_instead_of_growing_memory() {
    // Arrange: a data line that never ends, 64 KiB at a time; the cap is 1 MiB.
    let app = Gateway::start().await;
    let endless = sse(vec![
        Step::Send(b"data: ".to_vec()),
        Step::Drip(vec![b'a'; 64 << 10], millis(1)),
    ]);
    app.upstream().fallback(endless);
    // Act
    let started = Instant::now();
    let response = app.chat(false).await;
    // Assert: the early retry gets the same, then the request fails.
    assert_error(response, 502, "upstream_failed").await;
    assert!(started.elapsed() < millis(1500));
    assert_eq!(app.upstream().requests().len(), 2);
    for index in 0..2 {
        assert!(
            app.upstream().closed_at(index).await.is_some(),
            "upstream socket {index} left open"
        );
    }
    assert_eq!(
        app.metric("ladle_upstream_attempts_total{outcome=\"failed\",upstream=\"default\"}")
            .await,
        2.0
    );
}

// === Readiness ===

#[tokio::test]
async fn readyz_names_a_broken_prompt_while_its_last_good_version_keeps_serving() {
    // Arrange
    let app = Gateway::start().await;
    let file = app.prompts_dir.join("recipe.toml");
    let good = std::fs::read_to_string(&file).expect("the shipped recipe prompt");
    assert_eq!(app.get("/readyz").await.status(), 200);
    // Act: break the file on disk.
    std::fs::write(&file, "description = \"broken\nnot toml at all [").expect("write");
    let broken = app.eventually_readyz(503).await;
    // Assert
    let body: Value = serde_json::from_str(&broken).expect("JSON");
    assert!(body["broken"]["recipe"].is_string(), "body was {body}");
    assert!(body["broken"].get("fridge").is_none());
    let recipe = r#"{"title":"香酥鸭","ingredients":["鸭子 1只"],"steps":["炸"]}"#;
    app.upstream().push([sse_answer(&[recipe])]);
    let served = app
        .post_events("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .await;
    assert_eq!(served.status(), 200);
    let events = sse_events(&served.text().await.expect("events"));
    let (name, result) = events.last().expect("a last event");
    assert_eq!(name, "result");
    let result: Value = serde_json::from_str(result).expect("JSON result");
    assert_eq!(result["output"]["title"], "香酥鸭");
    // Act: fix it.
    std::fs::write(&file, good).expect("write");
    let ready = app.eventually_readyz(200).await;
    // Assert
    let body: Value = serde_json::from_str(&ready).expect("JSON");
    assert_eq!(body["prompts"], 2);
}
