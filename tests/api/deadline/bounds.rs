//! The deadline ends every request within 100 ms of passing, even while the
//! upstream floods ladle with chunks, and however slowly the client reads: its
//! in-flight slot and its upstream connection are freed then.
//!
//! The floods run against the real binary: a mock in this process, on its own
//! threads, writes faster than ladle reads, so ladle's upstream socket always has
//! bytes ready (in one runtime with the gateway, the mock would yield to it).

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::support::flood::{Drained, drain, flood};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::raw::read_until_closed;
use crate::support::*;

/// The caller's deadline of the flooded streams, in ms.
const DEADLINE_MS: u128 = 800;

/// How far past its deadline a request may end, by ladle's own clock (its
/// request line's `elapsed_ms`).
const LATE_MS: u128 = 100;

/// How much later than ladle the client may see the end: reading a flood, with
/// the whole suite on two cores, it can lag the writes by this much.
const CLIENT_LAG_MS: u128 = 250;

/// The flooded request `request_id` ended in time: by ladle's clock within
/// `LATE_MS` of its deadline, and as the client saw it (`took`) within
/// `CLIENT_LAG_MS` more.
async fn ended_in_time(app: &LadleProcess, request_id: &str, took: u128) {
    let line = eventually(millis(2000), "the request's line", async || {
        app.logged(request_id, "completion ended").pop()
    })
    .await;
    let elapsed = u128::from(line["elapsed_ms"].as_u64().expect("elapsed_ms"));
    assert!(
        (DEADLINE_MS..=DEADLINE_MS + LATE_MS).contains(&elapsed),
        "ended {elapsed} ms after the request by ladle's clock (deadline {DEADLINE_MS} ms)"
    );
    assert!(
        (DEADLINE_MS..=DEADLINE_MS + LATE_MS + CLIENT_LAG_MS).contains(&took),
        "the client saw the end {took} ms after the request (deadline {DEADLINE_MS} ms)"
    );
}

/// The real binary in front of a mock that floods every request, with `env`.
async fn flooded(env: &[(&str, &str)]) -> (MockUpstream, LadleProcess) {
    let upstream = MockUpstream::start().await;
    upstream.fallback(flood());
    let gateway = LadleProcess::start(&upstream.url, env).await;
    (upstream, gateway)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_chat_stream_ends_with_one_deadline_error_event_within_100_ms_of_its_deadline() {
    let (_upstream, app) = flooded(&[]).await;
    let started = Instant::now();
    let response = app
        .chat_request(true)
        .header("x-request-timeout-ms", DEADLINE_MS.to_string())
        .header("x-request-id", "flooded-chat")
        .send()
        .await
        .expect("gateway answers");
    let (drained, took) = drained_flood(response, "flooded chat stream", started).await;
    let data = last_events(&drained.tail);
    assert!(!data.iter().any(|d| d == "[DONE]"), "no [DONE]");
    let errors: Vec<&String> = data.iter().filter(|d| d.contains(r#""error""#)).collect();
    assert_eq!(errors.len(), 1, "one error event: {errors:?}");
    let error: Value = serde_json::from_str(errors[0]).expect("the error event is JSON");
    assert_eq!(data.last(), Some(errors[0]), "the error event is the last");
    assert_eq!(error["error"]["code"], "deadline_exceeded", "{error}");
    ended_in_time(&app, "flooded-chat", took).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_task_stream_ends_with_its_error_event_within_100_ms_of_its_deadline() {
    // No answer cap in reach: only the deadline can end it.
    let (_upstream, app) = flooded(&[("LADLE_MAX_ANSWER_BYTES", "1073741824")]).await;
    let started = Instant::now();
    let response = app
        .post_request("/v1/tasks/fridge", &json!({"ingredients": ["鸡蛋"]}))
        .header("accept", "text/event-stream")
        .header("x-request-timeout-ms", DEADLINE_MS.to_string())
        .header("x-request-id", "flooded-task")
        .send()
        .await
        .expect("gateway answers");
    let (drained, took) = drained_flood(response, "flooded task stream", started).await;
    let mut events = sse_events(&drained.tail);
    events.remove(0); // cut by the tail
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    let ends = names
        .iter()
        .filter(|n| ["error", "result"].contains(n))
        .count();
    assert_eq!(
        ends,
        1,
        "one closing event: {:?}",
        &names[names.len().saturating_sub(3)..]
    );
    let (name, data) = events.last().expect("a last event");
    assert_eq!(name, "error");
    let error: Value = serde_json::from_str(data).expect("the error event is JSON");
    assert_eq!(error["error"]["code"], "deadline_exceeded", "{error}");
    ended_in_time(&app, "flooded-task", took).await;
}

/// Reads a flooded `what` to its end, asserting it was a whole `200` stream of
/// over 1 MiB; with the ms after `started` at which the client saw it end.
async fn drained_flood(
    response: reqwest::Response,
    what: &str,
    started: Instant,
) -> (Drained, u128) {
    assert_eq!(response.status(), 200);
    let drained = drained(response).await;
    let took = ms(started, drained.ended);
    eprintln!("{what}: {} bytes, ended after {took} ms", drained.bytes);
    assert!(drained.whole, "the stream ends, not the connection");
    assert!(drained.bytes > 1 << 20, "flooded: {} bytes", drained.bytes);
    (drained, took)
}

/// The stream read to its end; a stream still going 3 s on fails the test.
async fn drained(response: reqwest::Response) -> Drained {
    tokio::time::timeout(millis(3000), drain(response))
        .await
        .expect("the flooded stream ends")
}

/// The data of the events in a stream's tail, its first (cut) event left out.
fn last_events(tail: &str) -> Vec<String> {
    sse_events(tail)
        .into_iter()
        .skip(1)
        .map(|(_, data)| data)
        .collect()
}

/// The slow readers' deadline, in ms.
const SLOW_DEADLINE_MS: u128 = 500;

/// A gateway with one in-flight slot, whose queue would wait long enough for it,
/// in front of a mock that floods the first request and answers the second.
async fn one_slot() -> Gateway {
    let app = Gateway::with(|config| {
        config.max_inflight = 1;
        config.queue_timeout = millis(2000);
    })
    .await;
    app.upstream().push([flood(), sse_answer(&["轮到我"])]);
    app
}

/// Sends a streaming chat request with a `SLOW_DEADLINE_MS` deadline on a raw
/// socket, and waits until it reached the upstream.
async fn stream_on_a_raw_socket(app: &Gateway) -> TcpStream {
    let mut socket = TcpStream::connect(app.address()).await.expect("connect");
    let body = chat_body(true).to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         x-request-timeout-ms: {SLOW_DEADLINE_MS}\r\ncontent-length: {}\r\n\r\n{body}",
        app.address(),
        body.len()
    );
    socket
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    requests_arrive(app.upstream(), 1).await;
    socket
}

/// Asks for the one slot while the slow reader holds it: the answer must come,
/// soon after the slow reader's deadline; then the slow reader's upstream socket
/// must have closed within 200 ms of that deadline.
async fn the_slot_and_the_upstream_are_freed(app: &Gateway, started: Instant) {
    let second = app.chat(false).await;
    let answered = Instant::now();
    assert_eq!(second.status(), 200, "the slot was freed");
    let body = json_of(second).await;
    assert_eq!(body["choices"][0]["message"]["content"], "轮到我");
    let closed = app
        .upstream()
        .closed_at(0)
        .await
        .expect("the slow reader's upstream socket closes");
    let (closed, answered) = (ms(started, closed), ms(started, answered));
    eprintln!("slow reader: upstream closed after {closed} ms, next answered after {answered} ms");
    assert!(
        (SLOW_DEADLINE_MS..=SLOW_DEADLINE_MS + 200).contains(&closed),
        "upstream closed {closed} ms after the request (deadline {SLOW_DEADLINE_MS} ms)"
    );
    assert!(
        (SLOW_DEADLINE_MS..=SLOW_DEADLINE_MS + 300).contains(&answered),
        "the next request answered {answered} ms after the first began"
    );
}

#[tokio::test]
async fn a_client_that_never_reads_loses_its_slot_and_upstream_at_its_deadline() {
    let app = one_slot().await;
    let started = Instant::now();
    let mut socket = stream_on_a_raw_socket(&app).await;
    the_slot_and_the_upstream_are_freed(&app, started).await;
    // What the gateway had written before it gave up is still there to read;
    // then the connection is closed, and the stream never said it was whole.
    let rest = read_until_closed(&mut socket, millis(2000))
        .await
        .expect("the gateway closed the connection");
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.starts_with("HTTP/1.1 200"),
        "{}",
        &rest[..rest.len().min(200)]
    );
    assert!(!rest.contains("[DONE]"));
}

#[tokio::test]
async fn a_client_that_reads_a_few_bytes_at_a_time_loses_its_slot_and_upstream_at_its_deadline() {
    let app = one_slot().await;
    let started = Instant::now();
    let mut socket = stream_on_a_raw_socket(&app).await;
    // 64 bytes every 20 ms, for as long as the test lasts.
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 64];
        while socket.read(&mut buf).await.is_ok_and(|n| n > 0) {
            tokio::time::sleep(millis(20)).await;
        }
    });
    the_slot_and_the_upstream_are_freed(&app, started).await;
    reader.abort();
}
