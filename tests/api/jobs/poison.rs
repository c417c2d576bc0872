//! Nothing one caller sends stops the queue for everyone (contract 10's nesting
//! bound): a variable nested past the limit is refused before anything is
//! written; a model's answer nested past it fails its own job as
//! `invalid_output`; and a row an older build wrote past what can be read back
//! is ended as `failed` (`job_unreadable`), while the next job runs and its
//! webhook is delivered. On the real binary, a real SQLite file and a real
//! HTTP receiver.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{fridge, ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::receiver::Receiver;
use crate::support::*;

/// `ladle serve` on the state file `db`, delivering webhooks to `receiver`.
async fn serve_on(db: &Path, upstream: &MockUpstream, receiver: &Receiver) -> LadleProcess {
    let db = db.to_str().expect("a UTF-8 path");
    LadleProcess::start(
        &upstream.url,
        &[
            ("LADLE_STATE_DB", db),
            ("LADLE_JOB_MAX_RUNS", "1"),
            ("LADLE_JOB_WEBHOOK_URL", &receiver.url),
        ],
    )
    .await
}

/// Waits until the receiver has a delivery for job `id`; its type.
async fn delivered(receiver: &Receiver, id: &str) -> String {
    eventually(Duration::from_secs(10), "the job's delivery", async || {
        receiver
            .received()
            .iter()
            .map(|r| r.json())
            .find(|body| body["data"]["id"] == id)
            .map(|body| body["type"].as_str().unwrap_or_default().to_owned())
    })
    .await
}

#[tokio::test]
async fn a_variable_nested_past_the_limit_is_refused_and_nothing_is_written() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(ideas());
    let gateway = LadleProcess::start(&upstream.url, &[("LADLE_STATE_DB", ":memory:")]).await;
    for levels in [65, 126] {
        let mut body = fridge("x");
        body["extra"] = serde_json::from_str(&nested_json(levels)).expect("valid JSON");
        for path in ["/v1/tasks/fridge?async=true", "/v1/tasks/fridge"] {
            let refused = gateway.post(path, &body).await;
            assert_eq!(refused.status(), 400, "{levels} levels, {path}");
            let error = json_of(refused).await;
            assert_eq!(error["error"]["code"], "invalid_request", "{error}");
            assert!(
                error["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("64 levels")),
                "{error}"
            );
        }
    }
    assert!(upstream.requests().is_empty(), "nothing ran");

    let mut body = fridge("y");
    body["extra"] = serde_json::from_str(&nested_json(63)).expect("valid JSON");
    let accepted = job_id(gateway.post("/v1/tasks/fridge?async=true", &body).await).await;
    let done = job_after(&gateway, &accepted, 5_000).await;
    assert_eq!(done["status"], "succeeded", "at the limit it runs: {done}");
    let created = gateway
        .lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|l| l["message"] == "job status changed" && l["from"].is_null())
        .count();
    assert_eq!(created, 1, "only the job within the limit was written");
}

#[tokio::test]
async fn a_model_answer_nested_past_the_limit_fails_its_job_and_the_next_one_is_delivered() {
    let upstream = MockUpstream::start().await;
    let deep = format!(r#"{{"ideas": {}}}"#, nested_json(126));
    upstream.fallback(sse_answer(&[&deep]));
    let receiver = Receiver::start(&[200]).await;
    let db = temp_dir("jobs-deep-answer").join("state.db");
    let gateway = serve_on(&db, &upstream, &receiver).await;

    let deep_job = job_id(submit(&gateway, "深").await).await;
    let failed = job_after(&gateway, &deep_job, 5_000).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], "invalid_output", "{failed}");
    assert_eq!(delivered(&receiver, &deep_job).await, "job.failed");

    upstream.push([ideas()]);
    let next = job_id(submit(&gateway, "浅").await).await;
    let done = job_after(&gateway, &next, 5_000).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(delivered(&receiver, &next).await, "job.succeeded");
}

#[tokio::test]
async fn a_row_that_cannot_be_read_is_ended_and_the_queue_and_deliveries_go_on() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(ideas());
    let receiver = Receiver::start(&[200]).await;
    let db = temp_dir("jobs-poison-row").join("state.db");
    // A first process makes the file; then an older build's poison is put in
    // it: the oldest queued job, and a finished one owing its delivery, each
    // nested past what serde_json reads back.
    let mut first = serve_on(&db, &upstream, &receiver).await;
    first.kill();
    let poison_queued = "job_0000000000000000000001";
    let poison_finished = "job_0000000000000000000002";
    {
        let file = rusqlite::Connection::open(&db).expect("the state file opens");
        let request = format!(
            r#"{{"v":1,"task":"fridge","variables":{{"ingredients":["鸡蛋"],"x":{}}}}}"#,
            nested_json(127)
        );
        let plain = r#"{"v":1,"task":"fridge","variables":{}}"#;
        let result = format!(r#"{{"output":{}}}"#, nested_json(128));
        let delivery = r#"{"v":1,"id":"msg_poison","status":"pending","attempts":0,"next_at":0}"#;
        file.execute(
            "INSERT INTO jobs (id, client, status, runs, created_at, updated_at, request) \
             VALUES (?1, '', 'queued', 0, 1, 1, ?2)",
            rusqlite::params![poison_queued, request],
        )
        .expect("the poison row is written");
        file.execute(
            "INSERT INTO jobs (id, client, status, runs, created_at, updated_at, request, result, \
             delivery, delivery_due) VALUES (?1, '', 'succeeded', 1, 1, 1, ?2, ?3, ?4, 0)",
            rusqlite::params![poison_finished, plain, result, delivery],
        )
        .expect("the poison row is written");
    }

    let second = serve_on(&db, &upstream, &receiver).await;
    let next = job_id(submit(&second, "新").await).await;
    let done = job_after(&second, &next, 5_000).await;
    assert_eq!(done["status"], "succeeded", "the queue goes on: {done}");
    assert_eq!(delivered(&receiver, &next).await, "job.succeeded");

    for id in [poison_queued, poison_finished] {
        let ended = job_after(&second, id, 1).await;
        assert_eq!(ended["status"], "failed", "{ended}");
        assert_eq!(ended["task"], "fridge", "{ended}");
        assert_eq!(ended["error"]["code"], "job_unreadable", "{ended}");
        assert_eq!(ended["error"]["retryable"], false, "{ended}");
        assert_eq!(delivered(&receiver, id).await, "job.failed");
        let warned = second.lines().iter().any(|line| {
            serde_json::from_str::<Value>(line).is_ok_and(|l| {
                l["level"] == "WARN"
                    && l["job_id"] == id
                    && l["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("cannot be read"))
            })
        });
        assert!(warned, "a WARN line names {id}");
    }
    let counted = "ladle_store_errors_total{op=\"read\"}";
    assert_eq!(second.metric(counted).await, 2.0);
    let finished = "ladle_jobs_finished_total{task=\"fridge\",status=\"failed\"}";
    assert_eq!(
        second.metric(finished).await,
        1.0,
        "the queued one finished"
    );
    assert_eq!(
        json!(upstream.requests().len()),
        json!(1),
        "only the good job ran"
    );
}
