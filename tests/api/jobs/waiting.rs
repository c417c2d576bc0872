//! Long-polls (`GET /v1/jobs/{id}?wait_ms`) are bounded: thousands waiting on
//! one job share one watch of it, so they cost next to no CPU while they wait
//! and are all answered when it finishes; past `LADLE_MAX_WAITERS` a read is
//! `503 overloaded`; `SIGTERM` answers every waiting read at once with the job
//! as it is, instead of holding the shutdown for up to a minute; and reads of a
//! large finished job share one rendering. On the real binary.

use std::time::Duration;

use futures_util::future::join_all;
use tokio::time::Instant;

use super::{job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

const WAITERS: usize = 2_000;

/// A read of job `id` waiting up to a minute: its status and body.
async fn long_poll(client: &reqwest::Client, gateway: &str, id: &str) -> (u16, serde_json::Value) {
    let url = format!("{gateway}/v1/jobs/{id}?wait_ms=60000");
    let response = client.get(url).send().await.expect("the gateway answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

/// `count` reads of job `id` waiting up to a minute, each on a task of its own.
fn long_polls(
    gateway: &LadleProcess,
    id: &str,
    count: usize,
) -> Vec<tokio::task::JoinHandle<(u16, serde_json::Value)>> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("a client");
    let base = gateway.url("").trim_end_matches('/').to_owned();
    (0..count)
        .map(|_| {
            let (client, base, id) = (client.clone(), base.clone(), id.to_owned());
            tokio::spawn(async move { long_poll(&client, &base, &id).await })
        })
        .collect()
}

/// Waits until `count` reads wait (`ladle_job_waiters`).
async fn waiting(gateway: &LadleProcess, count: usize) {
    eventually(Duration::from_secs(10), "the reads waiting", async || {
        let now = gateway.metric("ladle_job_waiters").await;
        (now >= count as f64).then_some(())
    })
    .await;
}

#[tokio::test]
async fn two_thousand_long_polls_on_one_job_cost_one_watch_and_are_all_answered() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let gateway = LadleProcess::start(&upstream.url, &[("LADLE_STATE_DB", ":memory:")]).await;
    let id = job_id(submit(&gateway, "慢").await).await;
    requests_arrive(&upstream, 1).await;
    let rss_before = gateway.rss_kib();
    let polls = long_polls(&gateway, &id, WAITERS);
    waiting(&gateway, WAITERS).await;
    let (ticks, at) = (gateway.cpu_ticks(), Instant::now());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let spent = gateway.cpu_ticks() - ticks;
    let window = at.elapsed();
    assert!(
        spent <= 10,
        "{spent} ticks of CPU in {window:?} with {WAITERS} waiting"
    );
    let grown_kib = gateway.rss_kib().saturating_sub(rss_before);
    eprintln!("{WAITERS} waiting: {spent} ticks of CPU in {window:?}, RSS +{grown_kib} KiB");
    let grown_mib = grown_kib / 1024;
    assert!(grown_mib < 96, "{grown_mib} MiB more for {WAITERS} waiting");

    // The job ends (canceled): every waiter is answered with it.
    let canceled = gateway.delete(&format!("/v1/jobs/{id}")).await;
    assert_eq!(canceled.status(), 200);
    let answers = join_all(polls).await;
    assert_eq!(answers.len(), WAITERS);
    for answer in &answers {
        let (status, job) = answer.as_ref().expect("the poll ends");
        assert_eq!(
            (*status, job["status"].as_str()),
            (200, Some("canceled")),
            "{job}"
        );
    }
}

#[tokio::test]
async fn past_max_waiters_a_waiting_read_is_503_and_sigterm_answers_the_others_at_once() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let gateway = LadleProcess::start(
        &upstream.url,
        &[("LADLE_STATE_DB", ":memory:"), ("LADLE_MAX_WAITERS", "3")],
    )
    .await;
    let id = job_id(submit(&gateway, "慢").await).await;
    requests_arrive(&upstream, 1).await;
    let polls = long_polls(&gateway, &id, 3);
    waiting(&gateway, 3).await;
    // A short wait comes back by itself until the three hold every place.
    let error = eventually(
        Duration::from_secs(5),
        "a fourth read refused",
        async || {
            let probe = gateway.get(&format!("/v1/jobs/{id}?wait_ms=50")).await;
            (probe.status() == 503).then_some(probe)
        },
    )
    .await;
    let error = json_of(error).await;
    assert_eq!(error["error"]["code"], "overloaded", "{error}");
    let plain = gateway.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(
        plain.status(),
        200,
        "a read that does not wait is never refused"
    );

    let asked = Instant::now();
    gateway.terminate();
    for poll in polls {
        let (status, job) = poll.await.expect("the poll ends");
        assert_eq!(
            (status, job["status"].as_str()),
            (200, Some("running")),
            "{job}"
        );
    }
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "answered at the signal: {:?}",
        asked.elapsed()
    );
}

#[tokio::test]
async fn three_hundred_unread_reads_of_a_large_finished_job_share_one_rendering() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = MockUpstream::start().await;
    // A finished job with about 1 MB of result, written in 100 KB pieces.
    let piece = "菜".repeat(34_000);
    let mut pieces = vec![r#"{"ideas": [""#.to_owned()];
    pieces.extend((0..10).map(|_| piece.clone()));
    pieces.push(r#""]}"#.to_owned());
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    upstream.push([sse_answer(&pieces)]);
    let gateway = LadleProcess::start(&upstream.url, &[("LADLE_STATE_DB", ":memory:")]).await;
    let id = job_id(submit(&gateway, "大").await).await;
    let done = super::job_after(&gateway, &id, 5_000).await;
    assert_eq!(done["status"], "succeeded");
    let (before, ticks) = (gateway.rss_kib(), gateway.cpu_ticks());
    let request = format!("GET /v1/jobs/{id} HTTP/1.1\r\nHost: ladle\r\n\r\n");
    let mut held = Vec::new();
    for _ in 0..300 {
        let mut socket = tokio::net::TcpStream::connect(gateway.address())
            .await
            .expect("connects");
        socket.write_all(request.as_bytes()).await.expect("writes");
        // The head and a little of the body, then nothing more is read.
        let mut head = vec![0u8; 4096];
        let read = socket.read(&mut head).await.expect("reads");
        assert!(
            head[..read].starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&head[..64])
        );
        held.push(socket);
    }
    // Read and rendered once, not 300 times: well under a second of CPU on the
    // debug binary, against about 47 s for a 3 MB result (about a third of that
    // for this one) when every read decoded and wrote the result.
    let spent = gateway.cpu_ticks() - ticks;
    assert!(
        spent < 500,
        "{spent} ticks of CPU for 300 reads of one 1 MB job"
    );
    let grown_mib = gateway.rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 100,
        "{grown_mib} MiB more for 300 unread reads of 1 MB"
    );
    drop(held);
}
