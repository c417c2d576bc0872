//! Where a resumed stream starts (contract 11.2's table, every row), what a
//! restart, the TTL and the byte bound leave, the long-poll form, and the
//! `progress` events, on the real binary.

use std::time::Duration;

use serde_json::{Value, json};

use super::events::{
    IDEAS, ideas_in, located, open, paced_ideas, reader, submit_streamed, text_of,
};
use crate::support::events::{EventReader, SseEvent, ids};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::scripts::drip;
use crate::support::*;

/// A finished job's id and its whole stream.
async fn finished_job(gateway: &Endpoint, marker: &str) -> (String, Vec<SseEvent>) {
    let response = submit_streamed(gateway, marker).await;
    assert_eq!(response.status(), 200);
    let id = located(&response);
    (id, EventReader::new(response).rest().await)
}

/// A long-poll of job `id` with `query`.
async fn long_poll(gateway: &Endpoint, id: &str, query: &str) -> reqwest::Response {
    gateway
        .client
        .get(gateway.url(&format!("/v1/jobs/{id}/events?{query}")))
        .header("accept", "application/json")
        .send()
        .await
        .expect("the gateway answers")
}

#[tokio::test]
async fn every_row_of_the_cursor_table() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([paced_ideas(4, 10)]);
    let gateway = LadleProcess::start(&upstream.url, &[]).await;
    let (id, events) = finished_job(&gateway, "番茄").await;
    let made = ids(&events);
    let last = made.last().expect("ids").clone();
    // The finished job's final event: nothing follows, 204.
    assert_eq!(open(&gateway, &id, Some(&last)).await.status(), 204);
    // A kept event: what follows it.
    let after_third = reader(&gateway, &id, Some(&made[2])).await.rest().await;
    assert_eq!(ids(&after_third), made[3..]);
    // A seq past the last of its run, a run never made: the current run from
    // its `running` event.
    // (The last is past what an id holds: well formed, naming none.)
    for not_kept in ["1.999", "7.1", "9999999999.1"] {
        let rest = reader(&gateway, &id, Some(not_kept)).await.rest().await;
        assert_eq!(ids(&rest), made[1..], "{not_kept}");
        assert_eq!(rest[0].json()["status"], "running");
    }
    // Malformed cursors are 400, in either place; an unknown job is 404 first.
    // (A header's trailing space is not its value: `1.2 ` is tried as a query.)
    for bad in [
        "x",
        "1",
        "1.2.3",
        "-1.2",
        "1.",
        "+1.2",
        "12345678901.1",
        "1. 2",
    ] {
        let header = gateway
            .client
            .get(gateway.url(&format!("/v1/jobs/{id}/events")))
            .header("last-event-id", bad)
            .send()
            .await
            .expect("answers");
        let (status, error) = error_of(header).await;
        assert_eq!(
            (status, error["code"].clone()),
            (400, json!("invalid_request")),
            "{bad:?}"
        );
        let query = gateway
            .get(&format!("/v1/jobs/{id}/events?after={}", urlencoding(bad)))
            .await;
        assert_eq!(query.status(), 400, "{bad:?}");
    }
    let spaced = gateway
        .get(&format!("/v1/jobs/{id}/events?after=1.2%20"))
        .await;
    assert_eq!(spaced.status(), 400);
    let unknown = open(&gateway, "job_0000000000000000000000", Some("x")).await;
    let (status, error) = error_of(unknown).await;
    assert_eq!(
        (status, error["code"].clone()),
        (404, json!("job_not_found"))
    );
    assert_eq!(
        gateway
            .metric("ladle_job_stream_resumes_total{from=\"run_start\"}")
            .await,
        3.0
    );
}

fn urlencoding(text: &str) -> String {
    text.replace('+', "%2B").replace(' ', "%20")
}

#[tokio::test]
async fn past_the_ttl_or_the_byte_bound_a_finished_job_streams_its_final_event_alone() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([paced_ideas(4, 10)]);
    let env = [("LADLE_STREAM_TTL_MS", "300")];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    let (id, events) = finished_job(&gateway, "番茄").await;
    let last = events.last().expect("events").clone();
    let alone = eventually(Duration::from_secs(5), "the events expired", async || {
        let rest = reader(&gateway, &id, None).await.rest().await;
        (rest.len() == 1).then_some(rest)
    })
    .await;
    assert_eq!(alone[0].id, last.id, "the id it was made with");
    assert_eq!(alone[0].json()["result"], last.json()["result"]);
    let from_cursor = reader(&gateway, &id, Some("1.3")).await.rest().await;
    assert_eq!(ids(&from_cursor), [last.id.clone().expect("an id")]);
    assert_eq!(
        gateway
            .metric("ladle_job_stream_resumes_total{from=\"final\"}")
            .await,
        1.0
    );
    // The final event's id as the cursor still ends it.
    assert_eq!(open(&gateway, &id, last.id.as_deref()).await.status(), 204);

    // The byte bound: the job that finished first goes first.
    let bound = [("LADLE_STREAM_MAX_BYTES", "2500")];
    let gateway = LadleProcess::start(&upstream.url, &bound).await;
    let (first, _) = finished_job(&gateway, "一").await;
    for marker in ["二", "三"] {
        finished_job(&gateway, marker).await;
    }
    let (newest, newest_events) = finished_job(&gateway, "四").await;
    assert_eq!(reader(&gateway, &first, None).await.rest().await.len(), 1);
    assert_eq!(
        reader(&gateway, &newest, None).await.rest().await,
        newest_events
    );
}

#[tokio::test]
async fn after_a_sigkill_the_re_run_streams_from_its_running_event() {
    let upstream = MockUpstream::start().await;
    upstream.push([drip("番", Duration::from_millis(40))]);
    let db = temp_dir("job-events-kill").join("state.db");
    let db = db.to_str().expect("UTF-8");
    let env = [("LADLE_STATE_DB", db)];
    let mut first = LadleProcess::start(&upstream.url, &env).await;
    let response = submit_streamed(&first, "番茄").await;
    let id = located(&response);
    let cut = EventReader::new(response).take(5).await;
    let seen = cut.last().and_then(|e| e.id.clone()).expect("an id");
    assert_eq!(seen, "1.4");
    first.kill();

    upstream.push([paced_ideas(4, 10)]);
    let second = LadleProcess::start(&upstream.url, &env).await;
    let rest = reader(&second, &id, Some(&seen)).await.rest().await;
    assert_eq!(rest[0].id.as_deref(), Some("2.1"), "{rest:?}");
    let running = rest[0].json();
    assert_eq!(
        (running["status"].clone(), running["runs"].clone()),
        (json!("running"), json!(2))
    );
    assert_eq!(
        text_of(&rest),
        IDEAS,
        "the re-run's text, rebuilt from its start"
    );
    assert_eq!(rest.last().expect("events").json()["status"], "succeeded");
}

#[tokio::test]
async fn the_long_poll_form_answers_events_after_a_cursor() {
    let upstream = MockUpstream::start().await;
    // More events than one answer holds.
    let many: Vec<String> = (0..300)
        .map(|_| " ".to_owned())
        .chain([IDEAS.to_owned()])
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    upstream.push([sse_answer(&many)]);
    let gateway = LadleProcess::start(&upstream.url, &[]).await;
    let (id, events) = finished_job(&gateway, "番茄").await;
    let made = ids(&events);
    let page = json_of(long_poll(&gateway, &id, "after=1.2").await).await;
    let listed: Vec<&str> = page["events"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(listed.len(), 256);
    assert_eq!(listed, made[3..259]);
    assert_eq!(page["next"], listed[255]);
    assert_eq!(page["done"], false);
    assert_eq!(page["events"][0]["event"], "delta");
    assert_eq!(
        page["events"][0]["data"],
        json!({"content": " "}),
        "data is the object"
    );
    let tail = json_of(long_poll(&gateway, &id, &format!("after={}", listed[255])).await).await;
    assert_eq!(tail["done"], true);
    assert_eq!(tail["next"], json!(made.last()));
    let over = json_of(
        long_poll(
            &gateway,
            &id,
            &format!("after={}", made.last().expect("ids")),
        )
        .await,
    )
    .await;
    assert_eq!(
        over,
        json!({"events": [], "next": made.last(), "done": true})
    );
    let from_start = json_of(long_poll(&gateway, &id, "").await).await;
    assert_eq!(from_start["events"][0]["id"], "0.1");
    for bad in ["wait_ms=0", "wait_ms=60001", "wait_ms=abc", "after=x"] {
        assert_eq!(long_poll(&gateway, &id, bad).await.status(), 400, "{bad}");
    }
    // On a running job: answered as soon as an event comes, with what follows.
    upstream.push([paced_ideas(4, 300)]);
    let response = submit_streamed(&gateway, "青椒").await;
    let live = located(&response);
    drop(response);
    let mut next = json!("0.1");
    let mut seen = vec!["0.1".to_owned()];
    while seen.len() < 8 {
        let query = format!("after={}&wait_ms=5000", next.as_str().expect("an id"));
        let page = json_of(long_poll(&gateway, &live, &query).await).await;
        let events = page["events"].as_array().expect("a list");
        assert!(
            !events.is_empty(),
            "answered with an event, not after 5 s: {page}"
        );
        seen.extend(
            events
                .iter()
                .filter_map(|e| e["id"].as_str().map(str::to_owned)),
        );
        assert_eq!(
            page["done"],
            events.iter().any(|e| e["data"]["status"] == "succeeded")
        );
        next = page["next"].clone();
    }
    assert!(crate::support::events::gapless(&seen), "{seen:?}");
}

#[tokio::test]
async fn progress_comes_live_at_its_interval_with_the_tasks_usual_length() {
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&[IDEAS])]);
    let env = [("LADLE_STREAM_PROGRESS_MS", "100")];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    // One answer of the task, made synchronously: the usual length is its.
    let answered = gateway.post("/v1/tasks/fridge", &super::fridge("先")).await;
    assert_eq!(answered.status(), 200);
    upstream.push([paced_ideas(8, 120)]);
    let (id, events) = finished_job(&gateway, "番茄").await;
    let progress: Vec<Value> = events
        .iter()
        .filter(|e| e.event == "progress")
        .map(SseEvent::json)
        .collect();
    assert!(progress.len() >= 4, "{} progress events", progress.len());
    assert!(
        events
            .iter()
            .filter(|e| e.event == "progress")
            .all(|e| e.id.is_none())
    );
    let expected = IDEAS.chars().count() as u64;
    let piece = ideas_in(8)[0].chars().count() as u64;
    let mut last = 0;
    for seen in &progress {
        assert_eq!(
            (seen["run"].clone(), seen["expected_chars"].clone()),
            (json!(1), json!(expected))
        );
        let chars = seen["chars"].as_u64().expect("chars");
        assert!(chars >= last.max(piece) && chars <= expected, "{seen}");
        last = chars;
    }
    // Never kept, never replayed.
    let again = reader(&gateway, &id, None).await.rest().await;
    assert!(again.iter().all(|e| e.event != "progress"));
    let page = json_of(long_poll(&gateway, &id, "").await).await;
    assert!(
        page["events"]
            .as_array()
            .expect("a list")
            .iter()
            .all(|e| e["event"] != "progress")
    );
}
