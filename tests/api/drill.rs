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

use tokio::time::Instant;

use crate::support::drill::{Ending, call, open_fds, rss_kib};
use crate::support::mock_upstream::*;
use crate::support::scripts::failure_rows;
use crate::support::*;

const CHILD: &str = "LADLE_DRILL_CHILD";
const NAME: &str = "drill::the_gateway_holds_steady_under_a_fault_drill_with_200_clients";
const CLIENTS: usize = 200;
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

async fn drill() {
    // Arrange
    let app = Gateway::with(|c| {
        c.max_inflight = 64;
        c.queue_timeout = millis(1500);
    })
    .await;
    app.upstream().push([sse_answer(&["热身"])]);
    assert!(matches!(
        call(&app.client, &app.base, false).await,
        Ending::Answer
    ));
    let fds_before = open_fds();
    let rss_before = rss_kib();
    app.upstream().cycle(failure_rows());
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
    let text = app.metrics().await;
    let counted: f64 = text
        .lines()
        .filter(|l| l.starts_with("ladle_requests_total{route=\"/v1/chat/completions\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted, (CLIENTS + 1) as f64);
    assert!(text.contains("\nladle_inflight_requests 0\n"), "{text}");
    // No upstream socket outlives its client.
    let settle = Duration::from_secs(3);
    let closed = within(settle, async || app.upstream().open_sockets() == 0).await;
    assert!(
        closed.is_some(),
        "{} upstream sockets still open",
        app.upstream().open_sockets()
    );
    // Descriptors and memory come back.
    let back = within(settle, async || open_fds() <= fds_before + 10).await;
    assert!(back.is_some(), "open fds {} → {}", fds_before, open_fds());
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
