//! Each phase of an attempt shows up in its own field and histogram: an
//! upstream slow to send its head, its first event, its first output, or (on
//! TLS) to finish connecting; a pooled connection reports no connect time.

use std::time::Duration;

use super::*;
use crate::support::metric_value;
use crate::support::mock_upstream::*;
use crate::support::tls::{TlsUpstream, tls_fixture};

/// The delay each slow phase is given; every other phase takes a few ms.
const SLOW: Duration = Duration::from_millis(300);
/// Below it, and above any phase that is not slowed on loopback.
const FAST_MS: u64 = 200;

/// `ladle_upstream_phase_seconds` of the single upstream: the bucket `le` of `phase`.
fn bucket(text: &str, phase: &str, le: &str) -> f64 {
    let series = format!(
        "ladle_upstream_phase_seconds_bucket{{upstream=\"default\",phase=\"{phase}\",le=\"{le}\"}}"
    );
    metric_value(text, &series).unwrap_or_else(|| panic!("{series} in\n{text}"))
}

#[tokio::test]
async fn a_slow_head_first_event_or_first_output_shows_in_its_own_field_and_histogram() {
    let upstream = MockUpstream::start().await;
    let pause = Step::Pause(SLOW);
    upstream.push([
        // The upstream's queue: the head comes late.
        Script(vec![
            pause.clone(),
            head(200, "text/event-stream", ""),
            data(&role()),
            data(&content("好")),
            data(&finish()),
            data("[DONE]"),
        ]),
        // The head at once, then silence before the first event.
        sse(vec![
            pause.clone(),
            data(&role()),
            data(&content("好")),
            data(&finish()),
            data("[DONE]"),
        ]),
        // Events at once, but the model thinks before its first word.
        sse(vec![
            data(&role()),
            pause,
            data(&content("好")),
            data(&finish()),
            data("[DONE]"),
        ]),
    ]);
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    for request_id in ["slow-head", "slow-event", "slow-output"] {
        answered(&gateway, request_id).await;
    }
    let text = gateway.metrics().await;
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let slow = SLOW.as_millis() as u64;
    // [head, first event, first output] of each: which are slow.
    for (request_id, slowed) in [
        ("slow-head", [true, true, true]),
        ("slow-event", [false, true, true]),
        ("slow-output", [false, false, true]),
    ] {
        let line = attempt_line(&mut gateway, request_id);
        let phases = ["head_ms", "first_event_ms", "first_output_ms"];
        for (field, slowed) in phases.into_iter().zip(slowed) {
            let took = ms(&line, field);
            match slowed {
                true => assert!(took >= slow, "{request_id}: {field} {took}: {line}"),
                false => assert!(took < FAST_MS, "{request_id}: {field} {took}: {line}"),
            }
        }
        // The mock closes every connection: each attempt made its own.
        assert_eq!(line["reused"], false, "{line}");
        assert!(ms(&line, "connect_ms") < FAST_MS, "{line}");
        assert!(ms(&line, "head_ms") >= ms(&line, "connect_ms"), "{line}");
    }
    // The histograms count the same: 3 attempts, slow in 1, 2 and 3 of them.
    for (phase, fast) in [
        ("connect", 3.0),
        ("head", 2.0),
        ("first_event", 1.0),
        ("first_output", 0.0),
        ("end", 0.0),
    ] {
        assert_eq!(bucket(&text, phase, "0.25"), fast, "{phase} under 250 ms");
        assert_eq!(bucket(&text, phase, "+Inf"), 3.0, "{phase} in all");
    }
}

#[tokio::test]
async fn a_slow_tls_handshake_is_connect_time_and_a_pooled_connection_reports_none() {
    let upstream = TlsUpstream::with_handshake_delay(SLOW).await;
    let ca = tls_fixture("ca.pem");
    let env = [("LADLE_UPSTREAM_CA_FILE", ca.as_str())];
    let mut gateway = LadleProcess::start(&upstream.url, &env).await;
    answered(&gateway, "new-connection").await;
    answered(&gateway, "pooled-connection").await;
    assert_eq!(
        upstream.handshakes(),
        1,
        "the second went on the first's connection"
    );
    let text = gateway.metrics().await;
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let first = attempt_line(&mut gateway, "new-connection");
    let connect = ms(&first, "connect_ms");
    assert!(connect >= SLOW.as_millis() as u64, "{first}");
    assert!(ms(&first, "head_ms") >= connect, "{first}");
    assert_eq!(first["reused"], false, "{first}");
    let second = attempt_line(&mut gateway, "pooled-connection");
    assert_eq!(second.get("connect_ms"), None, "{second}");
    assert_eq!(second["reused"], true, "{second}");
    assert!(ms(&second, "head_ms") < FAST_MS, "{second}");
    // One connect observed, slow; two heads.
    assert_eq!(bucket(&text, "connect", "+Inf"), 1.0);
    assert_eq!(bucket(&text, "connect", "0.25"), 0.0);
    assert_eq!(bucket(&text, "head", "+Inf"), 2.0);
    assert_eq!(bucket(&text, "head", "0.25"), 1.0);
}

#[tokio::test]
async fn an_attempt_that_fails_at_its_head_logs_how_far_it_got() {
    let upstream = MockUpstream::start().await;
    upstream.push([status(400, r#"{"error": {"message": "bad request"}}"#)]);
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    let response = gateway.chat_as("refused", false).await;
    assert_eq!(response.status(), 400, "on chat the upstream's 400 is kept");
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let line = attempt_line(&mut gateway, "refused");
    assert!(ms(&line, "head_ms") < FAST_MS, "{line}");
    assert_eq!(line["reused"], false, "{line}");
    for absent in ["first_event_ms", "first_output_ms"] {
        assert_eq!(line.get(absent), None, "{line}");
    }
}
