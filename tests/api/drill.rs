//! The fault drill: one gateway, a mock upstream cycling through every failure row
//! of the contract's table, 200 clients at once. Every request must end with an
//! answer or one of the expected error codes, no upstream socket may outlive its
//! client, and open file descriptors and resident memory must come back to about
//! where they started.
//!
//! Descriptors and memory are counted for the whole process, and the other tests
//! of this binary run in parallel threads. So the test runs itself again, alone,
//! in a child process (this test binary, filtered to this one test, with
//! `LADLE_DRILL_CHILD` set), and passes when the child passes.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::*;

const CHILD: &str = "LADLE_DRILL_CHILD";
const NAME: &str = "drill::the_gateway_holds_steady_under_a_fault_drill_with_200_clients";
const CLIENTS: usize = 200;
const BUSY_CHUNK: &str = r#"{"error":{"code":"1305","message":"当前模型访问量较大，请稍后重试"}}"#;
/// Error codes a chat request may end with in the drill, with their status.
const EXPECTED: [(&str, u16); 6] = [
    ("upstream_busy", 503),
    ("overloaded", 503),
    ("upstream_timeout", 504),
    ("deadline_exceeded", 504),
    ("upstream_failed", 502),
    ("upstream_rejected", 502),
];

#[test]
fn the_gateway_holds_steady_under_a_fault_drill_with_200_clients() {
    if std::env::var_os(CHILD).is_some() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(drill());
        return;
    }
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([NAME, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .expect("the drill runs alone");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the drill failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// How one client's request ended.
#[derive(Debug)]
enum Ending {
    /// A whole answer: a `chat.completion`, or a stream ending with `[DONE]`.
    Answer,
    /// A plain error response.
    Error(u16, String),
    /// A committed stream that ended with an `error` event.
    StreamError(String),
}

async fn drill() {
    // Arrange
    let app = spawn_app_with(|c| {
        c.max_inflight = 64;
        c.queue_timeout = millis(1500);
    })
    .await;
    app.upstream.push([sse_answer(&["热身"])]);
    assert!(matches!(
        call(&app.client, &app.base, false).await,
        Ending::Answer
    ));
    let fds_before = open_fds();
    let rss_before = rss_kib();
    app.upstream.cycle(failure_rows());
    // Act
    let client = reqwest::Client::new();
    let started = Instant::now();
    let calls = (0..CLIENTS).map(|n| call(&client, &app.base, n % 2 == 0));
    let endings = futures_util::future::join_all(calls).await;
    let took = started.elapsed();
    drop(client);
    let mut tally = std::collections::BTreeMap::<String, usize>::new();
    for ending in &endings {
        *tally.entry(format!("{ending:?}")).or_default() += 1;
    }
    eprintln!("drill: {CLIENTS} clients in {took:?}: {tally:?}");
    // Assert: every request ended as the contract allows.
    assert!(took < Duration::from_secs(10), "the drill took {took:?}");
    for ending in &endings {
        match ending {
            Ending::Answer => {}
            Ending::Error(status, code) => assert!(
                EXPECTED.contains(&(code.as_str(), *status)),
                "unexpected {status} {code}"
            ),
            Ending::StreamError(code) => assert!(
                ["upstream_failed", "deadline_exceeded"].contains(&code.as_str()),
                "unexpected stream error {code}"
            ),
        }
    }
    let answers = endings
        .iter()
        .filter(|e| matches!(e, Ending::Answer))
        .count();
    assert!(
        answers > 0 && answers < CLIENTS,
        "{answers} answers: {endings:?}"
    );
    // Every request was counted once, and none is still in flight.
    let text = app.get("/metrics").await.text().await.expect("metrics");
    let counted: f64 = text
        .lines()
        .filter(|l| l.starts_with("ladle_requests_total{route=\"/v1/chat/completions\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted, (CLIENTS + 1) as f64);
    assert!(text.contains("\nladle_inflight_requests 0\n"), "{text}");
    // No upstream socket outlives its client.
    assert!(
        settles(|| app.upstream.open_sockets() == 0).await,
        "{} upstream sockets still open",
        app.upstream.open_sockets()
    );
    // Descriptors and memory come back.
    assert!(
        settles(|| open_fds() <= fds_before + 10).await,
        "open fds {} → {}",
        fds_before,
        open_fds()
    );
    let rss_after = rss_kib();
    eprintln!(
        "drill: fds {fds_before} → {}, VmRSS {rss_before} kB → {rss_after} kB",
        open_fds()
    );
    assert!(
        rss_after <= rss_before + 30 * 1024,
        "VmRSS {rss_before} kB → {rss_after} kB"
    );
}

/// Every failure row of the contract's table, and two good answers.
fn failure_rows() -> Vec<Script> {
    let whole = r#"{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"整段"},"finish_reason":"stop"}]}"#;
    vec![
        status(503, r#"{"error":{"message":"overloaded"}}"#),
        Script(vec![
            head(429, "application/json", "retry-after: 1\r\n"),
            Step::Send(b"{}".to_vec()),
        ]),
        sse(vec![data(&role()), data(BUSY_CHUNK)]),
        // Stall before output.
        sse(vec![data(&role()), Step::Stall]),
        sse(vec![data(&role()), Step::Pause(millis(10)), Step::Reset]),
        // EOF after output, without [DONE] or finish_reason.
        sse(vec![data(&role()), data(&content("半"))]),
        status(500, r#"{"error":{"message":"internal"}}"#),
        status(401, r#"{"error":{"message":"bad key"}}"#),
        sse(vec![data(&content("半")), Step::Stall]),
        // An upstream that ignores `stream`.
        status(200, whole),
        sse_answer(&["好"]),
    ]
}

/// One client's chat request, streaming or not, read to its end.
async fn call(client: &reqwest::Client, base: &str, stream: bool) -> Ending {
    let body = json!({"stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("the gateway answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a whole body");
    if status != 200 {
        let error: Value = serde_json::from_str(&text).expect("a JSON error");
        let code = error["error"]["code"].as_str().expect("a code").to_owned();
        return Ending::Error(status, code);
    }
    if !stream {
        let answer: Value = serde_json::from_str(&text).expect("a chat.completion");
        let content = answer["choices"][0]["message"]["content"].as_str();
        assert!(content.is_some_and(|c| !c.is_empty()), "answer {answer}");
        return Ending::Answer;
    }
    let events = sse_events(&text);
    let last = &events.last().expect("at least one event").1;
    if last == "[DONE]" {
        return Ending::Answer;
    }
    let error: Value = serde_json::from_str(last).expect("an error event");
    Ending::StreamError(error["error"]["code"].as_str().expect("a code").to_owned())
}

/// Waits (up to three seconds) for `done` to hold.
async fn settles(done: impl Fn() -> bool) -> bool {
    let give_up = Instant::now() + Duration::from_secs(3);
    while Instant::now() < give_up {
        if done() {
            return true;
        }
        tokio::time::sleep(millis(20)).await;
    }
    done()
}

/// File descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// This process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}
