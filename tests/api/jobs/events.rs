//! A job's event stream (contract 11.1, 11.2) on the real binary, its events in
//! memory: a submit streamed end to end; a reader that drops and resumes gets
//! exactly what follows, byte for byte, live events included; two readers get
//! the same; a client that goes away changes nothing; a cancel ends the
//! stream; a shutdown ends the streams of runs that are not here.

use std::time::Duration;

use serde_json::{Value, json};

use super::{fridge, submit};
use crate::support::events::{EventReader, SseEvent, gapless, ids};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::scripts::{drip, paced_answer};
use crate::support::*;

/// The fridge answer every test's upstream writes, in pieces.
pub const IDEAS: &str = r#"{"ideas": ["番茄炒蛋", "青椒土豆丝", "麻婆豆腐"]}"#;

/// `IDEAS` in `n` pieces of about the same number of characters.
pub fn ideas_in(n: usize) -> Vec<String> {
    let chars: Vec<char> = IDEAS.chars().collect();
    chars
        .chunks(chars.len().div_ceil(n))
        .map(|piece| piece.iter().collect())
        .collect()
}

/// `IDEAS` in `n` pieces, `pause_ms` apart.
pub fn paced_ideas(n: usize, pause_ms: u64) -> Script {
    let pieces = ideas_in(n);
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    paced_answer(&pieces, pause_ms)
}

/// Submits a fridge job asking for its stream.
pub async fn submit_streamed(gateway: &Endpoint, marker: &str) -> reqwest::Response {
    gateway
        .post_events("/v1/tasks/fridge?async=true", &fridge(marker))
        .await
}

/// Opens job `id`'s stream with `Last-Event-ID: cursor` (if any).
pub async fn open(gateway: &Endpoint, id: &str, cursor: Option<&str>) -> reqwest::Response {
    let mut request = gateway
        .client
        .get(gateway.url(&format!("/v1/jobs/{id}/events")));
    if let Some(cursor) = cursor {
        request = request.header("last-event-id", cursor);
    }
    request.send().await.expect("the gateway answers")
}

/// A reader of job `id`'s stream from `cursor`.
pub async fn reader(gateway: &Endpoint, id: &str, cursor: Option<&str>) -> EventReader {
    let response = open(gateway, id, cursor).await;
    assert_eq!(response.status(), 200);
    EventReader::new(response)
}

/// The job id of a submit's stream (its `Location`).
pub fn located(response: &reqwest::Response) -> String {
    let location = response.headers()["location"].to_str().expect("ASCII");
    location.trim_start_matches("/v1/jobs/").to_owned()
}

/// The content the `delta` events carry.
pub fn text_of(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter(|e| e.event == "delta")
        .filter_map(|e| e.json()["content"].as_str().map(str::to_owned))
        .collect()
}

/// The first stream-end line of job `id`, waited for.
async fn stream_end_line(gateway: &LadleProcess, id: &str) -> Value {
    eventually(Duration::from_secs(10), "the stream-end line", async || {
        gateway.lines().into_iter().find_map(|line| {
            let line: Value = serde_json::from_str(&line).ok()?;
            (line["message"] == "job stream ended" && line["job_id"] == id).then_some(line)
        })
    })
    .await
}

/// The kept events (those with an id), their raw text joined.
fn raw(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.id.is_some())
        .map(|e| e.raw.clone())
        .collect()
}

#[tokio::test]
async fn a_submit_streamed_has_every_event_with_gapless_ids_and_the_whole_answer() {
    let upstream = MockUpstream::start().await;
    upstream.push([paced_ideas(6, 20)]);
    let gateway = LadleProcess::start(&upstream.url, &[]).await;
    let response = submit_streamed(&gateway, "番茄").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["preference-applied"], "respond-async");
    let id = located(&response);
    let events = EventReader::new(response).rest().await;
    let made = ids(&events);
    assert!(gapless(&made), "{made:?}");
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names[..3], ["job", "job", "attempt"], "{names:?}");
    assert_eq!(made[..3], ["0.1", "1.1", "1.2"]);
    assert_eq!(events[0].json()["status"], "queued");
    assert_eq!(events[1].json()["status"], "running");
    assert_eq!(names[names.len() - 2..], ["result", "job"]);
    assert_eq!(text_of(&events), IDEAS);
    let last = events.last().expect("events").json();
    assert_eq!(last["status"], "succeeded");
    let result = events[events.len() - 2].json();
    assert_eq!(last["result"], result, "the final job event has the result");
    assert_eq!(result["output"]["ideas"][0], "番茄炒蛋");
    // The job as GET shows it is the final event's.
    let job = json_of(gateway.get(&format!("/v1/jobs/{id}")).await).await;
    assert_eq!(job["result"], result);
    let ended = stream_end_line(&gateway, &id).await;
    assert_eq!(ended["reason"], "final");
    // No kept event's text reaches a log line.
    assert!(
        !gateway
            .lines()
            .iter()
            .any(|line| line.contains("青椒土豆丝"))
    );
    assert_eq!(ended["events"], events.len() as u64);
    assert_eq!(
        (ended["cursor"].clone(), ended["resumed_from"].clone()),
        (json!(null), json!(null))
    );
}

#[tokio::test]
async fn a_reader_that_drops_resumes_with_exactly_what_follows_and_two_readers_agree() {
    let upstream = MockUpstream::start().await;
    upstream.push([paced_ideas(12, 80)]);
    let gateway = LadleProcess::start(&upstream.url, &[]).await;
    let response = submit_streamed(&gateway, "青椒").await;
    let id = located(&response);
    let mut whole = EventReader::new(response);
    let mut other = reader(&gateway, &id, None).await;
    let mut dropped = reader(&gateway, &id, None).await;
    let first = dropped.take(5).await;
    drop(dropped);
    let seen = first.last().and_then(|e| e.id.clone()).expect("an id");
    let job = json_of(gateway.get(&format!("/v1/jobs/{id}")).await).await;
    assert_eq!(job["status"], "running", "what follows is partly live");
    let mut resumed = reader(&gateway, &id, Some(&seen)).await;
    let rest = resumed.rest().await;
    let (whole, other) = (whole.rest().await, other.rest().await);
    assert_eq!(raw(&whole), raw(&other), "two readers, the same events");
    let mut joined = raw(&first);
    joined.extend(raw(&rest));
    assert_eq!(
        joined,
        raw(&whole),
        "byte for byte, nothing lost or repeated"
    );
    // `?after=` names a cursor as the header does.
    let after = gateway
        .get(&format!("/v1/jobs/{id}/events?after={seen}"))
        .await;
    assert_eq!(raw(&EventReader::new(after).rest().await), raw(&rest));
    assert_eq!(
        gateway
            .metric("ladle_job_stream_resumes_total{from=\"kept\"}")
            .await,
        2.0
    );
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_client_that_goes_away_changes_nothing() {
    let upstream = MockUpstream::start().await;
    upstream.push([paced_ideas(10, 50)]);
    let gateway = LadleProcess::start(&upstream.url, &[]).await;
    let response = submit_streamed(&gateway, "豆腐").await;
    let id = located(&response);
    let mut reader = EventReader::new(response);
    reader.take(3).await;
    assert_eq!(
        gateway.metric("ladle_job_streams").await,
        1.0,
        "a submit's own stream counts"
    );
    drop(reader);
    eventually(
        Duration::from_secs(2),
        "the stream counted as closed",
        async || (gateway.metric("ladle_job_streams").await == 0.0).then_some(()),
    )
    .await;
    let job = super::job_after(&gateway, &id, 5_000).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(
        job["result"]["output"]["ideas"][2], "麻婆豆腐",
        "read to its end"
    );
    assert_eq!(upstream.requests().len(), 1);
    let gone = gateway.lines().into_iter().any(|line| {
        let line: Value = serde_json::from_str(&line).unwrap_or_default();
        line["message"] == "job stream ended"
            && line["job_id"] == id.as_str()
            && line["reason"] == "client_gone"
    });
    assert!(gone, "the stream-end line says the client went");
    // The whole stream is still there for the next reader.
    let events = reader_rest(&gateway, &id).await;
    assert_eq!(text_of(&events), IDEAS);
}

async fn reader_rest(gateway: &Endpoint, id: &str) -> Vec<SseEvent> {
    reader(gateway, id, None).await.rest().await
}

#[tokio::test]
async fn a_job_canceled_while_read_ends_its_stream_with_the_final_event() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(drip("番", Duration::from_millis(50)));
    let gateway = LadleProcess::start(&upstream.url, &[]).await;
    let response = submit_streamed(&gateway, "鸡蛋").await;
    let id = located(&response);
    let mut stream = EventReader::new(response);
    let until_delta = stream.take(4).await;
    assert_eq!(until_delta[3].event, "delta");
    let canceled = gateway.delete(&format!("/v1/jobs/{id}")).await;
    assert_eq!(canceled.status(), 200);
    let rest = stream.rest().await;
    let last = rest.last().expect("the final event");
    assert_eq!(
        (last.event.as_str(), last.json()["status"].clone()),
        ("job", json!("canceled"))
    );
    assert!(
        rest.iter().all(|e| e.event == "delta" || e.event == "job"),
        "{rest:?}"
    );
}

#[tokio::test]
async fn at_sigterm_a_stream_whose_run_is_not_here_ends_at_once() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(drip("番", Duration::from_millis(50)));
    let gateway = LadleProcess::start(&upstream.url, &[("LADLE_JOB_CONCURRENCY", "1")]).await;
    let running = submit_streamed(&gateway, "第一").await;
    let mut running = EventReader::new(running);
    running.take(4).await;
    let queued = submit_streamed(&gateway, "第二").await;
    let id = located(&queued);
    let mut queued = EventReader::new(queued);
    let first = queued.take(1).await;
    assert_eq!(first[0].json()["status"], "queued");
    gateway.terminate();
    let ended = queued.next_within(Duration::from_secs(2)).await;
    assert_eq!(ended, Ok(None), "the stream ends at once");
    let line = stream_end_line(&gateway, &id).await;
    assert_eq!(line["reason"], "shutdown");
}

#[tokio::test]
async fn a_reader_that_never_reads_is_cut_at_its_stall_limit_and_the_job_goes_on() {
    let upstream = MockUpstream::start().await;
    // Megabytes of events: more than the sockets' buffers hold.
    let pad = "豆".repeat(1_000);
    let mut pieces = vec![r#"{"ideas": ["番茄炒蛋"], "pad": ""#.to_owned()];
    pieces.extend((0..3_000).map(|_| pad.clone()));
    pieces.push(r#""}"#.to_owned());
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    upstream.push([sse_answer(&pieces)]);
    let env = [
        ("LADLE_STREAM_STALL_MS", "300"),
        ("LADLE_MAX_ANSWER_BYTES", "33554432"),
    ];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    let submitted = submit(&gateway, "豆").await;
    let id = super::job_id(submitted).await;
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4_096).expect("a small buffer");
    let address = gateway.address().parse().expect("an address");
    let mut stream = socket.connect(address).await.expect("connects");
    let head = format!("GET /v1/jobs/{id}/events HTTP/1.1\r\nHost: ladle\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut stream, head.as_bytes())
        .await
        .expect("sent");
    // Never read: the stream is cut once it has waited past its stall limit.
    let line = stream_end_line(&gateway, &id).await;
    assert_eq!(line["reason"], "client_gone");
    let job = super::job_after(&gateway, &id, 10_000).await;
    assert_eq!(
        job["status"], "succeeded",
        "the job never waited for its reader"
    );
    drop(stream);
}
