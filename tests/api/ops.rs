//! Operations: metrics, logs, readiness, bounded concurrency, slow clients,
//! graceful shutdown and secrets (contract section 5, issue 5).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::helpers::*;
use crate::mock_upstream::*;
use crate::process::Gateway;

// === Metrics ===

#[tokio::test]
async fn metrics_render_every_contract_series_and_move_after_a_busy_retry_a_success_and_an_error() {
    // Arrange
    let app = spawn_app().await;
    let before = scrape(&app).await;
    app.upstream.push([
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
        let series = format!("ladle_upstream_attempts_total{{outcome=\"{outcome}\"}}");
        assert_eq!(value(&before, &series), Some(0.0), "{series}");
    }
    for reason in ["busy", "not_started", "failed"] {
        let series = format!("ladle_retries_total{{reason=\"{reason}\"}}");
        assert_eq!(value(&before, &series), Some(0.0), "{series}");
    }
    let after = scrape(&app).await;
    assert!(after.contains("# TYPE ladle_requests_total counter"));
    let moved = [
        ("ladle_retries_total{reason=\"busy\"}", 1.0),
        ("ladle_upstream_attempts_total{outcome=\"busy\"}", 1.0),
        ("ladle_upstream_attempts_total{outcome=\"ok\"}", 1.0),
        ("ladle_upstream_attempts_total{outcome=\"rejected\"}", 1.0),
        ("ladle_upstream_attempts_total{outcome=\"failed\"}", 0.0),
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
        // Two chat requests and the first scrape.
        ("ladle_request_duration_seconds_count", 3.0),
        ("ladle_inflight_requests", 0.0),
    ];
    for (series, expected) in moved {
        assert_eq!(
            value(&after, series),
            Some(expected),
            "{series} in\n{after}"
        );
    }
}

#[tokio::test]
async fn a_live_stream_counts_as_in_flight_and_its_duration_covers_the_whole_stream() {
    // Arrange
    let app = spawn_app().await;
    app.upstream
        .push([slow_answer(&["一", "二", "三"], millis(150))]);
    // Act
    let mut response = app.chat(true).await;
    let first = response
        .chunk()
        .await
        .expect("read")
        .expect("a first chunk");
    let during = scrape(&app).await;
    let rest = response.text().await.expect("the rest of the stream");
    let after = scrape(&app).await;
    // Assert
    assert!(!first.is_empty());
    assert!(
        rest.ends_with("data: [DONE]\n\n"),
        "stream ended with {rest:?}"
    );
    assert_eq!(value(&during, "ladle_inflight_requests"), Some(1.0));
    assert_eq!(
        value(
            &during,
            "ladle_requests_total{route=\"/v1/chat/completions\",code=\"200\"}"
        ),
        None,
        "a stream is counted when it ends, not when its head is sent"
    );
    assert_eq!(value(&after, "ladle_inflight_requests"), Some(0.0));
    assert_eq!(
        value(
            &after,
            "ladle_requests_total{route=\"/v1/chat/completions\",code=\"200\"}"
        ),
        Some(1.0)
    );
    // The head went out after the first piece; two 150 ms pauses followed.
    let total = value(&after, "ladle_request_duration_seconds_sum").expect("a sum");
    assert!(total >= 0.3, "duration sum {total} s misses the stream");
}

// === Bounded concurrency ===

#[tokio::test]
async fn with_max_inflight_1_a_second_call_waits_out_the_queue_and_gets_503_overloaded() {
    // Arrange: queue timeout 200 ms, the first call takes about 750 ms.
    let app = spawn_app_with(|c| c.max_inflight = 1).await;
    app.upstream.push([slow_answer(
        &["慢", "慢", "慢", "慢", "慢", "慢"],
        millis(150),
    )]);
    let client = app.client.clone();
    let url = format!("{}/v1/chat/completions", app.base);
    let first = tokio::spawn(async move {
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        client.post(url).json(&body).send().await.expect("answer")
    });
    wait_for_requests(&app, 1).await;
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
    assert_eq!(app.upstream.requests().len(), 1);
}

#[tokio::test]
async fn time_spent_in_the_queue_counts_against_the_request_deadline() {
    // Arrange: the queue would wait 5 s, but a chat request has 400 ms in all.
    // A long task holds the only slot.
    let app = spawn_app_with(|c| {
        c.max_inflight = 1;
        c.queue_timeout = Duration::from_secs(5);
        c.deadline = millis(400);
        c.min_remaining = millis(100);
    })
    .await;
    let drip = format!("data: {}\n\n", content("滴"));
    app.upstream
        .push([sse(vec![Step::Drip(drip.into_bytes(), millis(20))])]);
    let client = app.client.clone();
    let url = format!("{}/v1/tasks/recipe", app.base);
    let holder = tokio::spawn(async move {
        client
            .post(url)
            .json(&json!({"dish": "鸭"}))
            .send()
            .await
            .expect("answer")
    });
    wait_for_requests(&app, 1).await;
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
    assert_eq!(app.upstream.requests().len(), 1);
}

// === Slow and hostile clients ===

#[tokio::test]
async fn a_client_that_never_finishes_its_request_head_is_disconnected() {
    // Arrange
    let app = spawn_app_with(|c| c.header_read_timeout = millis(200)).await;
    let mut socket = TcpStream::connect(address(&app)).await.expect("connect");
    // Act
    socket
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: ladle\r\n")
        .await
        .expect("write half a head");
    let started = Instant::now();
    let answer = read_until_closed(&mut socket, Duration::from_secs(3)).await;
    // Assert
    let waited = started.elapsed();
    assert!(answer.is_some(), "the connection was left open");
    assert!(waited >= millis(150), "closed after {waited:?}");
    assert!(waited < millis(1500), "closed after {waited:?}");
    assert!(app.upstream.requests().is_empty());
}

#[tokio::test]
async fn a_body_that_stops_arriving_gets_400_invalid_request_in_time() {
    // Arrange
    let app = spawn_app_with(|c| c.body_read_timeout = millis(200)).await;
    let mut socket = TcpStream::connect(address(&app)).await.expect("connect");
    // Act: promise 100 bytes, send 8, then nothing.
    socket
        .write_all(
            b"POST /v1/tasks/recipe HTTP/1.1\r\nhost: ladle\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"dish\":",
        )
        .await
        .expect("write part of a request");
    let started = Instant::now();
    let answer = read_response(&mut socket, Duration::from_secs(3)).await;
    // Assert
    let waited = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 400"), "answer was {answer:?}");
    let body: Value = serde_json::from_str(&answer[answer.find("\r\n\r\n").expect("head") + 4..])
        .expect("JSON error body");
    assert_eq!(body["error"]["code"], "invalid_request");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("request body not received in time")
    );
    assert!(waited >= millis(150), "answered after {waited:?}");
    assert!(waited < millis(1500), "answered after {waited:?}");
    assert!(app.upstream.requests().is_empty());
}

#[tokio::test]
async fn a_body_over_the_limit_on_the_task_route_is_413_body_too_large() {
    // Arrange
    let app = spawn_app_with(|c| c.max_body_bytes = 1024).await;
    // Act
    let response = app
        .post("/v1/tasks/recipe", &json!({"dish": "鸭".repeat(2000)}))
        .await;
    // Assert
    assert_eq!(response.status(), 413);
    assert_eq!(json_of(response).await["error"]["code"], "body_too_large");
    assert!(app.upstream.requests().is_empty());
}

#[tokio::test]
async fn an_endless_upstream_line_fails_the_attempt_instead_of_growing_memory() {
    // Arrange: a data line that never ends, 64 KiB at a time; the cap is 1 MiB.
    let app = spawn_app().await;
    let endless = sse(vec![
        Step::Send(b"data: ".to_vec()),
        Step::Drip(vec![b'a'; 64 << 10], millis(1)),
    ]);
    app.upstream.fallback(endless);
    // Act
    let started = Instant::now();
    let response = app.chat(false).await;
    // Assert: the early retry gets the same, then the request fails.
    assert_eq!(response.status(), 502);
    assert_eq!(json_of(response).await["error"]["code"], "upstream_failed");
    assert!(started.elapsed() < millis(1500));
    assert_eq!(app.upstream.requests().len(), 2);
    for index in 0..2 {
        assert!(
            app.upstream.closed_at(index).await.is_some(),
            "upstream socket {index} left open"
        );
    }
    assert_eq!(
        app.metric("ladle_upstream_attempts_total{outcome=\"failed\"}")
            .await,
        2.0
    );
}

// === Graceful shutdown ===

#[tokio::test]
async fn shutdown_lets_a_live_stream_finish_and_refuses_new_connections() {
    // Arrange
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (app, server) = spawn_app_until(|_| {}, async move {
        let _ = stopped.await;
    })
    .await;
    app.upstream
        .push([slow_answer(&["一", "二", "三"], millis(200))]);
    let mut response = app.chat(true).await;
    let first = response
        .chunk()
        .await
        .expect("read")
        .expect("a first chunk");
    // Act
    stop.send(()).expect("the server is listening for shutdown");
    let asked = Instant::now();
    let refused = refused_within(&address(&app), Duration::from_secs(1)).await;
    let rest = response.text().await.expect("the rest of the stream");
    let finished = asked.elapsed();
    // Assert
    assert!(refused, "new connections were still accepted");
    let whole = format!("{}{rest}", String::from_utf8_lossy(&first));
    assert_eq!(streamed_text(&whole), "一二三");
    assert!(whole.ends_with("data: [DONE]\n\n"), "stream was {whole:?}");
    assert!(finished >= millis(200), "the stream was over too soon");
    let served = tokio::time::timeout(Duration::from_secs(2), server)
        .await
        .expect("the server stops once the stream is done")
        .expect("the server task");
    assert!(served.is_ok());
}

#[tokio::test]
async fn sigterm_lets_live_streams_on_every_worker_finish_and_the_process_exits_0() {
    // Arrange: three workers, and more streams than workers, so that whichever
    // threads accepted them, every worker has its listener to close and its
    // streams to drain.
    let upstream = MockUpstream::start().await;
    let streams = 5;
    upstream.push((0..streams).map(|_| slow_answer(&["一", "二", "三"], millis(200))));
    let mut gateway = Gateway::start(&upstream.url, &[("LADLE_WORKERS", "3")]).await;
    let mut responses = Vec::new();
    for _ in 0..streams {
        // A client each, so each stream has a connection of its own.
        let mut response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", gateway.base))
            .json(&json!({"stream": true, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .expect("answer");
        let first = response
            .chunk()
            .await
            .expect("read")
            .expect("a first chunk");
        responses.push((first, response));
    }
    // Act
    gateway.terminate();
    let asked = Instant::now();
    let refused = refused_within(&gateway.address, Duration::from_secs(1)).await;
    let mut wholes = Vec::new();
    for (first, response) in responses {
        let rest = response.text().await.expect("the rest of the stream");
        wholes.push(format!("{}{rest}", String::from_utf8_lossy(&first)));
    }
    let finished = asked.elapsed();
    let status = gateway.exited(Duration::from_secs(5)).await;
    // Assert
    assert!(refused, "new connections were still accepted");
    for whole in &wholes {
        assert_eq!(streamed_text(whole), "一二三");
        assert!(whole.ends_with("data: [DONE]\n\n"), "stream was {whole:?}");
    }
    assert!(finished >= millis(200), "the streams were over too soon");
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
    let started = gateway.lines();
    assert!(
        started.iter().any(|l| l.contains("\"workers\":3")),
        "no log line says three workers: {started:?}"
    );
}

// === Logs ===

#[tokio::test]
async fn json_logs_have_one_line_per_attempt_and_per_request_with_the_contract_fields() {
    // Arrange
    let upstream = MockUpstream::start().await;
    upstream.push([status(503, "{}"), sse_answer(&["好"])]);
    let mut gateway = Gateway::start(&upstream.url, &[]).await;
    // Act
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .header("x-request-id", "log-fields-1")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    // Assert
    let lines: Vec<Value> = gateway
        .all_lines()
        .iter()
        .map(|line| serde_json::from_str(line).expect("every line is one JSON object"))
        .collect();
    let ours: Vec<&Value> = lines
        .iter()
        .filter(|l| l["request_id"] == "log-fields-1")
        .collect();
    let with_message = |message: &str| -> Vec<&Value> {
        ours.iter()
            .copied()
            .filter(|l| l["message"] == message)
            .collect()
    };
    let attempts = with_message("attempt ended");
    assert_eq!(attempts.len(), 2, "attempt lines: {attempts:?}");
    assert_eq!(
        (
            &attempts[0]["attempt"],
            &attempts[0]["outcome"],
            &attempts[0]["decision"]
        ),
        (&json!(1), &json!("busy"), &json!("retry"))
    );
    assert!(attempts[0]["wait_ms"].as_u64().expect("wait_ms") >= 20);
    assert_eq!(
        (
            &attempts[1]["attempt"],
            &attempts[1]["outcome"],
            &attempts[1]["decision"]
        ),
        (&json!(2), &json!("ok"), &json!("stop"))
    );
    let summary = with_message("completion ended");
    assert_eq!(summary.len(), 1, "summary lines: {summary:?}");
    assert_eq!(summary[0]["attempt"], 2);
    assert_eq!(summary[0]["outcome"], "ok");
    assert!(summary[0]["wait_ms"].as_u64().expect("wait_ms") >= 20);
    let request = with_message("request answered");
    assert_eq!(request.len(), 1, "request lines: {request:?}");
    assert_eq!(request[0]["status"], 200);
    assert_eq!(request[0]["outcome"], "ok");
    for line in attempts.iter().chain(&summary) {
        for field in ["route", "attempt", "elapsed_ms", "outcome", "wait_ms"] {
            assert!(!line[field].is_null(), "`{field}` missing in {line}");
        }
        assert_eq!(line["route"], "/v1/chat/completions");
    }
    for field in ["route", "elapsed_ms", "outcome", "status"] {
        assert!(!request[0][field].is_null(), "`{field}` missing");
    }
}

#[tokio::test]
async fn logs_of_a_failing_run_never_contain_the_api_key_or_the_admin_token() {
    // Arrange: the upstream rejects the key and echoes it back.
    const KEY: &str = "sk-live-9f8e7d6c5b4a3210";
    const TOKEN: &str = "tok-admin-0a1b2c3d4e5f";
    let upstream = MockUpstream::start().await;
    let echo = format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#);
    upstream.fallback(status(401, &echo));
    let mut gateway = Gateway::start(
        &upstream.url,
        &[
            ("LADLE_UPSTREAM_API_KEY", KEY),
            ("LADLE_ADMIN_TOKEN", TOKEN),
            ("RUST_LOG", "debug"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    // Act
    let chat = client
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("answer");
    let chat_status = chat.status();
    let chat_body = chat.text().await.expect("body");
    let wrong = client
        .get(format!("{}/admin/prompts", gateway.base))
        .bearer_auth("not-the-token")
        .send()
        .await
        .expect("answer");
    let right = client
        .get(format!("{}/admin/prompts", gateway.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("answer");
    let (wrong_status, right_status) = (wrong.status().as_u16(), right.status().as_u16());
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let lines = gateway.all_lines();
    // Assert: the key was really in play, and refused.
    let sent = &upstream.requests()[0].head.to_ascii_lowercase();
    assert!(sent.contains(&format!("bearer {KEY}")), "head was {sent}");
    assert_eq!(chat_status, 502);
    assert!(!chat_body.contains(KEY));
    assert_eq!(wrong_status, 401, "wrong token");
    assert_eq!(right_status, 200, "right token");
    assert!(
        lines.iter().any(|l| l.contains("\"outcome\":\"rejected\"")),
        "the rejected attempt is logged"
    );
    for line in &lines {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        for secret in [KEY, TOKEN] {
            assert!(!line.contains(secret), "secret in log line: {line}");
        }
        assert!(
            !line.to_ascii_lowercase().contains("bearer sk-")
                && !line.to_ascii_lowercase().contains("bearer tok-"),
            "authorization in log line: {line}"
        );
    }
}

// === Readiness ===

#[tokio::test]
async fn readyz_names_a_broken_prompt_while_its_last_good_version_keeps_serving() {
    // Arrange
    let app = spawn_app().await;
    let file = app.prompts_dir.join("recipe.toml");
    let good = std::fs::read_to_string(&file).expect("the shipped recipe prompt");
    assert_eq!(app.get("/readyz").await.status(), 200);
    // Act: break the file on disk.
    std::fs::write(&file, "description = \"broken\nnot toml at all [").expect("write");
    let broken = ready_status(&app, 503).await;
    // Assert
    let body: Value = serde_json::from_str(&broken).expect("JSON");
    assert!(body["broken"]["recipe"].is_string(), "body was {body}");
    assert!(body["broken"].get("fridge").is_none());
    let recipe = r#"{"title":"香酥鸭","ingredients":["鸭子 1只"],"steps":["炸"]}"#;
    app.upstream.push([sse_answer(&[recipe])]);
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
    let ready = ready_status(&app, 200).await;
    // Assert
    let body: Value = serde_json::from_str(&ready).expect("JSON");
    assert_eq!(body["prompts"], 2);
}

// === Helpers ===

/// An SSE answer whose first piece comes at once and each later one after `gap`.
fn slow_answer(pieces: &[&str], gap: Duration) -> Script {
    let mut steps = vec![data(&role())];
    for (n, piece) in pieces.iter().enumerate() {
        if n > 0 {
            steps.push(Step::Pause(gap));
        }
        steps.push(data(&content(piece)));
    }
    steps.push(data(&finish()));
    steps.push(data("[DONE]"));
    sse(steps)
}

/// The `/metrics` text.
async fn scrape(app: &TestApp) -> String {
    app.get("/metrics")
        .await
        .text()
        .await
        .expect("metrics text")
}

/// The value of one series in a scrape.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

/// Waits (up to two seconds) until the mock has received `n` requests.
async fn wait_for_requests(app: &TestApp, n: usize) {
    let give_up = Instant::now() + Duration::from_secs(2);
    while app.upstream.requests().len() < n {
        assert!(Instant::now() < give_up, "the upstream got no request");
        tokio::time::sleep(millis(5)).await;
    }
}

/// Polls `/readyz` (up to two seconds) until it answers `status`; its body.
async fn ready_status(app: &TestApp, status: u16) -> String {
    let give_up = Instant::now() + Duration::from_secs(2);
    loop {
        let response = app.get("/readyz").await;
        if response.status() == status {
            return response.text().await.expect("body");
        }
        assert!(Instant::now() < give_up, "/readyz never answered {status}");
        tokio::time::sleep(millis(20)).await;
    }
}

/// `127.0.0.1:PORT` of a test app.
fn address(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_owned()
}

/// Whether connecting to `address` is refused within `limit`.
async fn refused_within(address: &str, limit: Duration) -> bool {
    let give_up = Instant::now() + limit;
    while Instant::now() < give_up {
        if TcpStream::connect(address).await.is_err() {
            return true;
        }
        tokio::time::sleep(millis(10)).await;
    }
    false
}

/// The content of an OpenAI chunk stream.
fn streamed_text(body: &str) -> String {
    sse_events(body)
        .iter()
        .filter_map(|(_, data)| serde_json::from_str::<Value>(data).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// Everything the server sends until it closes the socket; `None` if it is still
/// open after `limit`.
async fn read_until_closed(socket: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    let read = tokio::time::timeout(limit, socket.read_to_end(&mut all)).await;
    match read {
        Ok(_) => Some(all),
        Err(_) => None,
    }
}

/// One whole HTTP response with a `content-length`, as text.
async fn read_response(socket: &mut TcpStream, limit: Duration) -> String {
    let give_up = Instant::now() + limit;
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = content_length(&text[..end]);
            if all.len() >= end + 4 + length {
                return text;
            }
        }
        let left = give_up.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, socket.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => all.extend_from_slice(&buf[..n]),
            _ => return text,
        }
    }
}
