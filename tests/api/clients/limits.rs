//! A key's share: `max_inflight` (a stream holds its slot to its end; one more
//! is `429` with `Retry-After: 1`) and `rate_per_s` with `burst` (`429` with the
//! seconds until a token, rounded up); job submits count, job reads and cancels
//! do not, and a job's run holds no slot; refusals go nowhere upstream and are
//! counted in `ladle_limit_rejections_total{scope="client"}`.

use std::time::Duration;

use super::*;
use crate::jobs::{fridge, job_id};
use crate::support::mock_upstream::*;
use crate::support::scripts::paced_answer;
use reqwest::Method;

/// The series of the gateway's client-key refusals.
const REJECTIONS: &str = "ladle_limit_rejections_total{scope=\"client\"}";

/// The slots of key `name` in use.
fn inflight(name: &str) -> String {
    format!("ladle_inflight{{scope=\"client\",name=\"{name}\"}}")
}

/// An answer that takes about a second, its pieces 200 ms apart.
fn second_long_answer() -> Script {
    paced_answer(&["慢", "慢", "炖", "好", "了"], 200)
}

#[tokio::test]
async fn over_max_inflight_is_429_retry_after_1_until_the_holding_stream_ends() {
    let path = keys_file(&[("one-at-a-time", KEY_A, "max_inflight = 1")]);
    let gateway = keyed_gateway(&path).await;
    let upstream = gateway.upstream();
    upstream.push([second_long_answer()]);
    upstream.cycle([sse_answer(&["好"])]);
    let held = stream_as(&gateway, KEY_A).await;
    assert_eq!(held.status(), 200);
    assert_eq!(gateway.metric(&inflight("one-at-a-time")).await, 1.0);
    rate_limited(chat_as(&gateway, KEY_A).await, "1").await;
    let submit = submit_as(&gateway, KEY_A, "蛋").await;
    rate_limited(submit, "1").await;
    assert_eq!(
        upstream.requests().len(),
        1,
        "the refused ones went nowhere"
    );
    assert_eq!(gateway.metric(REJECTIONS).await, 2.0);
    // The stream still ran: the refusals did not end it.
    let body = held.text().await.expect("the stream's body");
    assert_eq!(streamed_text(&body), "慢慢炖好了");
    // Its slot comes back when it ends.
    eventually(Duration::from_secs(1), "the slot back", async || {
        gateway.metric(&inflight("one-at-a-time")).await == 0.0
    })
    .await;
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    assert_eq!(upstream.requests().len(), 2);
}

#[tokio::test]
async fn a_request_refused_for_max_inflight_takes_no_token_of_the_rate() {
    // A token every 1000 s: none comes back during the test, so the second
    // answer below can only be the burst's second token.
    let both = "max_inflight = 1\nrate_per_s = 0.001\nburst = 2";
    let path = keys_file(&[("both", KEY_A, both)]);
    let gateway = keyed_gateway(&path).await;
    let upstream = gateway.upstream();
    upstream.push([second_long_answer()]);
    upstream.cycle([sse_answer(&["好"])]);
    let held = stream_as(&gateway, KEY_A).await;
    assert_eq!(held.status(), 200, "the first token");
    for _ in 0..3 {
        rate_limited(chat_as(&gateway, KEY_A).await, "1").await;
    }
    held.text().await.expect("the stream's body");
    eventually(Duration::from_secs(1), "the slot back", async || {
        gateway.metric(&inflight("both")).await == 0.0
    })
    .await;
    assert_eq!(
        chat_as(&gateway, KEY_A).await.status(),
        200,
        "the second token"
    );
    // The burst is spent: the next token is about 1000 s off.
    rate_limited_about(chat_as(&gateway, KEY_A).await, 1000).await;
    assert_eq!(upstream.requests().len(), 2);
}

#[tokio::test]
async fn job_reads_and_cancels_pass_while_the_only_slot_is_held_and_a_run_holds_none() {
    let path = keys_file(&[("one-at-a-time", KEY_A, "max_inflight = 1")]);
    let gateway = keyed_gateway(&path).await;
    let upstream = gateway.upstream();
    // The job's run (a slow JSON answer), then the stream.
    upstream.push([
        paced_answer(&[r#"{"ideas": "#, r#"["番茄"#, r#"炒蛋"]}"#, " "], 250),
        second_long_answer(),
    ]);
    let submitted = submit_as(&gateway, KEY_A, "番茄").await;
    let id = job_id(submitted).await;
    requests_arrive(upstream, 1).await;
    // The job runs, and the key's one slot is free for a stream.
    let held = stream_as(&gateway, KEY_A).await;
    assert_eq!(held.status(), 200);
    assert_eq!(gateway.metric(&inflight("one-at-a-time")).await, 1.0);
    let job_path = format!("/v1/jobs/{id}");
    let read = call_as(&gateway, KEY_A, Method::GET, &job_path).await;
    assert_eq!(read.status(), 200);
    assert_eq!(json_of(read).await["status"], "running");
    let cancel = call_as(&gateway, KEY_A, Method::DELETE, &job_path).await;
    assert_eq!(cancel.status(), 200);
    assert_eq!(json_of(cancel).await["status"], "canceled");
    // A submit counts, and is refused meanwhile.
    let submit = submit_as(&gateway, KEY_A, "蛋").await;
    rate_limited(submit, "1").await;
    assert_eq!(gateway.metric(REJECTIONS).await, 1.0);
    assert_eq!(
        streamed_text(&held.text().await.expect("body")),
        "慢慢炖好了"
    );
}

#[tokio::test]
async fn over_its_rate_a_key_is_429_for_the_seconds_until_a_token_and_nothing_goes_upstream() {
    let path = keys_file(&[
        ("steady", KEY_A, "rate_per_s = 1\nburst = 2"),
        (
            "slow",
            KEY_B,
            "rate_per_s = 0.25\nburst = 1\nmax_inflight = 1",
        ),
    ]);
    let gateway = keyed_gateway(&path).await;
    let upstream = gateway.upstream();
    upstream.cycle([sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])]);
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    // Less than a second to the next token.
    rate_limited(chat_as(&gateway, KEY_A).await, "1").await;
    assert_eq!(upstream.requests().len(), 2);
    assert_eq!(gateway.metric(REJECTIONS).await, 1.0);
    // A job submit takes a token; the next token of 0.25 per second is 4 s off.
    let submitted = submit_as(&gateway, KEY_B, "蛋").await;
    let id = job_id(submitted).await;
    rate_limited(chat_as(&gateway, KEY_B).await, "4").await;
    assert_eq!(gateway.metric(REJECTIONS).await, 2.0);
    assert_eq!(
        gateway.metric(&inflight("slow")).await,
        0.0,
        "a request refused by the rate holds no slot"
    );
    // The job is the key's, and runs.
    let job_path = format!("/v1/jobs/{id}?wait_ms=3000");
    let done = call_as(&gateway, KEY_B, Method::GET, &job_path).await;
    assert_eq!(json_of(done).await["status"], "succeeded");
    assert_eq!(upstream.requests().len(), 3, "two chats and the job's run");
}

#[tokio::test]
async fn a_submit_answered_with_its_stream_holds_its_slot_until_the_job_exists_only() {
    let path = keys_file(&[("one-at-a-time", KEY_A, "max_inflight = 1")]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([second_long_answer()]);
    let streamed = gateway
        .post_request("/v1/tasks/fridge?async=true", &fridge("番茄"))
        .bearer_auth(KEY_A)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("answers");
    assert_eq!(streamed.status(), 200);
    // The stream is open, and its job runs: the key's one slot is free.
    assert_eq!(gateway.metric(&inflight("one-at-a-time")).await, 0.0);
    let next = submit_as(&gateway, KEY_A, "青椒").await;
    assert_eq!(next.status(), 202);
    drop(streamed);
}
