//! A retry stays on an upstream while it has attempts in a row left (6.1).

use std::time::Duration;

use ladle::config::UpstreamSettings;
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::process::ladle_command;
use crate::support::*;

use super::{a_then_b, assert_answer, calls, gateway_over, two_mocks};

/// Upstream `a` (priority 0, `attempts` in a row) with `b` behind it.
fn primary_with_attempts(a: &str, b: &str, attempts: u32) -> Vec<UpstreamSettings> {
    let mut list = primary_and_backup(a, b);
    list[0].attempts = attempts;
    list
}

/// A 429 asking for `seconds` before a retry.
fn busy_for(seconds: u64) -> Script {
    Script(vec![
        head(
            429,
            "application/json",
            &format!("retry-after: {seconds}\r\n"),
        ),
        Step::Send(br#"{"error":{"message":"slow down"}}"#.to_vec()),
    ])
}

#[tokio::test]
async fn a_primary_with_two_attempts_is_asked_again_after_its_retry_after_then_the_fallback() {
    let (a, b) = two_mocks().await;
    a.push([busy_for(1), busy_for(1)]);
    b.push([sse_answer(&["备用"])]);
    let gateway = Gateway::options()
        .upstreams(primary_with_attempts(&a.url, &b.url, 2))
        .adjust(back_offs(20))
        .adjust(|c| {
            c.deadline = Duration::from_secs(10);
            c.retry.min_remaining = Duration::from_millis(500);
        })
        .start()
        .await;
    let started = Instant::now();
    assert_answer(&gateway, "备用").await;
    let (to_a, to_b) = (a.requests(), b.requests());
    assert_eq!((to_a.len(), to_b.len()), (2, 1));
    // The second call to `a` waited its Retry-After (1 s), not the 20 ms back-off;
    // the fallback after its two attempts went out at once.
    let waited = to_a[1].arrived - to_a[0].arrived;
    assert!(waited >= Duration::from_millis(990), "{waited:?}");
    assert!(to_b[0].arrived - to_a[1].arrived < Duration::from_millis(200));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_one_off_500_is_retried_on_a_primary_with_attempts_left() {
    let (a, b) = two_mocks().await;
    a.push([
        status(500, r#"{"error":{"message":"boom"}}"#),
        sse_answer(&["主"]),
    ]);
    let gateway = gateway_over(primary_with_attempts(&a.url, &b.url, 2)).await;
    let body = assert_answer(&gateway, "主").await;
    assert_eq!(calls(&a, &b), (2, 0));
    assert_eq!(body["choices"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn by_default_a_retry_moves_to_the_fallback_at_once() {
    let (a, b) = two_mocks().await;
    a.push([busy_for(2)]);
    b.push([sse_answer(&["备用"])]);
    let gateway = a_then_b(&a, &b).await;
    let started = Instant::now();
    assert_answer(&gateway, "备用").await;
    assert_eq!(calls(&a, &b), (1, 1));
    assert!(started.elapsed() < Duration::from_millis(250), "no wait");
}

#[tokio::test]
async fn attempts_in_a_row_must_be_a_whole_number_of_at_least_one() {
    let env = [(
        "LADLE_UPSTREAMS",
        r#"[{"name":"a","url":"http://127.0.0.1:9/v1","attempts":0}]"#,
    )];
    let output = ladle_command()
        .arg("check")
        .envs(env)
        .output()
        .expect("ladle runs");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("LADLE_UPSTREAMS") && said.contains("`attempts`"),
        "{said}"
    );
}

#[tokio::test]
async fn a_timeout_moves_on_to_an_untried_fallback_whatever_the_attempts_left() {
    let (a, b) = two_mocks().await;
    a.fallback(sse(vec![data(&role()), Step::Stall]));
    b.push([sse_answer(&["备用"])]);
    let gateway = gateway_over(primary_with_attempts(&a.url, &b.url, 2)).await;
    let started = Instant::now();
    assert_answer(&gateway, "备用").await;
    assert_eq!(calls(&a, &b), (1, 1));
    // One idle timeout (300 ms), not two and a back-off.
    assert!(
        started.elapsed() < Duration::from_millis(550),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_repeated_other_failure_on_a_primary_with_attempts_still_reaches_the_fallback() {
    let (a, b) = two_mocks().await;
    let broken = || sse(vec![data(&role()), data(&content("半"))]);
    a.push([broken(), broken()]);
    b.push([sse_answer(&["备用"])]);
    let gateway = gateway_over(primary_with_attempts(&a.url, &b.url, 2)).await;
    assert_answer(&gateway, "备用").await;
    assert_eq!(calls(&a, &b), (2, 1));
}
