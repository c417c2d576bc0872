//! Jobs are shared fairly between keys: a key's `max_queued` bounds its
//! unfinished jobs (`429 rate_limited` past it) and its `max_running` its runs at
//! once on a replica (more wait their turn while other keys' jobs run), so one
//! key can neither fill the queue nor hold every run slot. A lower-case `bearer`
//! scheme is a bearer (RFC 7235). On the real binary.

use super::*;
use crate::jobs::{fridge, ideas, job_id};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;

/// A job submit under `key`.
async fn submit_as(gateway: &LadleProcess, key: &str, marker: &str) -> Response {
    post_as(gateway, key, "/v1/tasks/fridge?async=true", &fridge(marker)).await
}

/// A job of `key`, waited for up to `wait_ms`.
async fn job_as(gateway: &LadleProcess, key: &str, id: &str, wait_ms: u64) -> Value {
    let path = format!("/v1/jobs/{id}?wait_ms={wait_ms}");
    json_of(call_as(gateway, key, reqwest::Method::GET, &path).await).await
}

#[tokio::test]
async fn a_key_at_its_max_queued_and_max_running_leaves_room_for_another() {
    let upstream = MockUpstream::start().await;
    // The first run (alpha's) hangs; every later one answers.
    upstream.push([sse(vec![Step::Stall])]);
    upstream.fallback(ideas());
    let keys = keys_file(&[
        ("alpha", KEY_A, "max_queued = 3\nmax_running = 1"),
        ("bravo", KEY_B, ""),
    ]);
    let env = [
        (
            "LADLE_CLIENT_KEYS_FILE",
            keys.to_str().expect("a UTF-8 path"),
        ),
        ("LADLE_JOB_CONCURRENCY", "2"),
        ("LADLE_STATE_DB", ":memory:"),
    ];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    let hanging = job_id(submit_as(&gateway, KEY_A, "a1").await).await;
    requests_arrive(&upstream, 1).await;
    let mut waiting = Vec::new();
    for marker in ["a2", "a3"] {
        waiting.push(job_id(submit_as(&gateway, KEY_A, marker).await).await);
    }
    let over = submit_as(&gateway, KEY_A, "a4").await;
    assert_eq!(over.headers()["retry-after"], "5");
    refused(over, 429, "rate_limited").await;

    // Bravo submits and runs on the free slot, ahead of alpha's older jobs.
    let theirs = job_id(submit_as(&gateway, KEY_B, "b1").await).await;
    let done = job_as(&gateway, KEY_B, &theirs, 5_000).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    for id in &waiting {
        let job = job_as(&gateway, KEY_A, id, 1).await;
        assert_eq!(job["status"], "queued", "alpha's own turn: {job}");
    }
    assert_eq!(
        job_as(&gateway, KEY_A, &hanging, 1).await["status"],
        "running"
    );

    // Once alpha's run ends, its next job runs.
    let canceled = call_as(
        &gateway,
        KEY_A,
        reqwest::Method::DELETE,
        &format!("/v1/jobs/{hanging}"),
    )
    .await;
    assert_eq!(canceled.status(), 200);
    for id in &waiting {
        let job = job_as(&gateway, KEY_A, id, 5_000).await;
        assert_eq!(job["status"], "succeeded", "{job}");
    }
    let again = submit_as(&gateway, KEY_A, "a5").await;
    assert_eq!(again.status(), 202, "its finished jobs no longer count");
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let path = keys_file(&[("alpha", KEY_A, "")]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().push([sse_answer(&["好"])]);
    let response = gateway
        .chat_request(false)
        .header("authorization", format!("bearer {KEY_A}"))
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200);
    let other = gateway
        .chat_request(false)
        .header("authorization", format!("Basic {KEY_A}"))
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(other.status(), 401, "another scheme is no key");
}
