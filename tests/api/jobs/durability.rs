//! Nothing accepted is lost (contract 7.1), on the real binary and a real SQLite
//! file: a job answered `202` survives a SIGKILL straight after; a run cut by a
//! SIGKILL runs again on the next start on the same file, the cut run counted;
//! a job whose every run is cut fails `job_interrupted`; SIGTERM lets the
//! running run finish and leaves queued jobs for the next start; a second `serve`
//! on a file in use stops naming `LADLE_STATE_DB`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};

use super::{fridge, ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::process::{
    LadleProcess, finished, ladle_command, serve_before_a_closed_port, text_of,
};
use crate::support::scripts::paced_answer;
use crate::support::*;

/// `ladle serve` in front of `upstream` on the state file `db`, with `env` on top.
async fn serve_on(db: &Path, upstream: &MockUpstream, env: &[(&str, &str)]) -> LadleProcess {
    let db = db.to_str().expect("a UTF-8 path");
    let mut all = vec![("LADLE_STATE_DB", db), ("LADLE_JOB_RETRY_MS", "100")];
    all.extend_from_slice(env);
    LadleProcess::start(&upstream.url, &all).await
}

/// Submits the fridge job named `marker` to a process.
async fn submit_to(gateway: &LadleProcess, marker: &str) -> String {
    job_id(submit(gateway, marker).await).await
}

/// Waits until the mock has `count` requests.
async fn upstream_has(upstream: &MockUpstream, count: usize) {
    eventually(
        Duration::from_secs(5),
        "the upstream's requests",
        async || (upstream.requests().len() >= count).then_some(()),
    )
    .await;
}

/// A job's status changes in a process's log: `(from, to, runs)`, in order.
fn status_changes(lines: &[String], id: &str) -> Vec<(Value, Value, u64)> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "job status changed" && l["job_id"] == id)
        .inspect(|l| assert_eq!(l["task"], "fridge", "{l}"))
        .map(|l| {
            assert!(l.get("from").is_some(), "`from` is there, null or not: {l}");
            (
                l["from"].clone(),
                l["to"].clone(),
                l["runs"].as_u64().unwrap_or(99),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_job_answered_202_is_there_after_a_sigkill_straight_after() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let db = temp_dir("jobs-kill-after-202").join("state.db");
    let mut first = serve_on(&db, &upstream, &[("LADLE_JOB_CONCURRENCY", "1")]).await;
    let markers: Vec<String> = (0..20).map(|n| format!("第{n}")).collect();
    let ids = join_all(markers.iter().map(|m| submit_to(&first, m))).await;
    first.kill();

    let second = serve_on(&db, &upstream, &[("LADLE_JOB_CONCURRENCY", "1")]).await;
    for id in &ids {
        let job = job_after(&second, id, 1).await;
        assert_eq!(job["id"].as_str(), Some(id.as_ref()), "{job}");
    }
}

#[tokio::test]
async fn a_run_cut_by_sigkill_runs_again_on_the_next_start_and_counts() {
    let upstream = MockUpstream::start().await;
    upstream.push([sse(vec![Step::Stall]), ideas()]);
    let db = temp_dir("jobs-kill-mid-run").join("state.db");
    let mut first = serve_on(&db, &upstream, &[]).await;
    let id = submit_to(&first, "x").await;
    upstream_has(&upstream, 1).await;
    assert_eq!(job_after(&first, &id, 1).await["status"], "running");
    first.kill();

    let second = serve_on(&db, &upstream, &[]).await;
    let done = job_after(&second, &id, 3_000).await;
    assert_eq!(
        (done["status"].as_str(), done["runs"].as_u64()),
        (Some("succeeded"), Some(2)),
        "{done}"
    );
    assert_eq!(done["result"]["output"]["ideas"][0], "番茄炒蛋");
    let interrupted = "ladle_job_runs_total{task=\"fridge\",outcome=\"interrupted\"}";
    assert_eq!(
        second.metric(interrupted).await,
        1.0,
        "counted by the start that found it"
    );
}

#[tokio::test]
async fn a_job_whose_every_run_is_cut_fails_job_interrupted() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let db = temp_dir("jobs-all-runs-cut").join("state.db");
    let runs = [("LADLE_JOB_MAX_RUNS", "2")];
    let mut first = serve_on(&db, &upstream, &runs).await;
    let id = submit_to(&first, "x").await;
    upstream_has(&upstream, 1).await;
    first.kill();
    let mut second = serve_on(&db, &upstream, &runs).await;
    upstream_has(&upstream, 2).await;
    second.kill();

    let third = serve_on(&db, &upstream, &runs).await;
    let failed = job_after(&third, &id, 1).await;
    assert_eq!(
        (failed["status"].as_str(), failed["runs"].as_u64()),
        (Some("failed"), Some(2)),
        "{failed}"
    );
    assert_eq!(failed["error"]["code"], "job_interrupted");
    assert_eq!(failed["error"]["retryable"], false);
    assert_eq!(upstream.requests().len(), 2, "no third run");
}

#[tokio::test]
async fn sigterm_finishes_the_running_run_and_leaves_queued_jobs_for_the_next_start() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([paced_answer(&[r#"{"ideas": ["慢"]}"#], 300)]);
    let db = temp_dir("jobs-sigterm").join("state.db");
    let one = [("LADLE_JOB_CONCURRENCY", "1")];
    let mut first = serve_on(&db, &upstream, &one).await;
    let running = submit_to(&first, "first").await;
    let queued = submit_to(&first, "second").await;
    upstream_has(&upstream, 1).await;
    first.terminate();
    first.exited(Duration::from_secs(5)).await;
    assert_eq!(upstream.requests().len(), 1, "no new run after SIGTERM");
    assert_eq!(
        status_changes(&first.all_lines(), &running),
        [
            (Value::Null, json!("queued"), 0),
            (json!("queued"), json!("running"), 1),
            (json!("running"), json!("succeeded"), 1),
        ]
    );
    let run_line = first
        .lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "completion ended" && l["job_id"] == running.as_str())
        .expect("the run's request line names its job");
    assert_eq!(run_line["outcome"], "ok");

    let second = serve_on(&db, &upstream, &one).await;
    let finished = job_after(&second, &running, 1).await;
    assert_eq!(
        (finished["status"].as_str(), finished["runs"].as_u64()),
        (Some("succeeded"), Some(1)),
        "{finished}"
    );
    let later = job_after(&second, &queued, 3_000).await;
    assert_eq!(
        (later["status"].as_str(), later["runs"].as_u64()),
        (Some("succeeded"), Some(1)),
        "{later}"
    );
}

#[tokio::test]
async fn a_second_serve_on_a_file_in_use_stops_naming_ladle_state_db() {
    let upstream = MockUpstream::start().await;
    let db = temp_dir("jobs-locked").join("state.db");
    let _first = serve_on(&db, &upstream, &[]).await;
    let mut command: Command = ladle_command();
    command
        .arg("serve")
        .env("LADLE_LISTEN", "127.0.0.1:0")
        .env("LADLE_UPSTREAM_URL", &upstream.url)
        .env("LADLE_PROMPTS_DIR", prompts_copy())
        .env("LADLE_STATE_DB", &db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the ladle binary starts");
    let ended = within(millis(10_000), async || child.try_wait().expect("try_wait")).await;
    let Some(status) = ended else {
        let _ = child.kill();
        panic!("a second serve on the same file kept running");
    };
    let output = child.wait_with_output().expect("its output");
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success());
    assert!(text.contains("LADLE_STATE_DB"), "{text}");
}

#[tokio::test]
async fn a_state_file_that_cannot_be_opened_stops_start_up_without_quoting_its_path() {
    let missing = temp_dir("jobs-no-folder").join("folder-9f3c-absent/state.db");
    let mut command = serve_before_a_closed_port();
    command.env("LADLE_STATE_DB", &missing);
    let output = finished(command).await;
    let text = text_of(&output);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("LADLE_STATE_DB"), "{text}");
    assert!(!text.contains("folder-9f3c-absent"), "{text}");
}

#[tokio::test]
async fn no_run_starts_after_sigterm_while_a_stream_still_drains() {
    let upstream = MockUpstream::start().await;
    // The job's run (300 ms), then a chat stream that outlasts it (about 1 s);
    // a run started after the signal would get the fallback.
    upstream.push([
        paced_answer(&[r#"{"ideas": ["慢"]}"#], 300),
        paced_answer(&["慢", "慢", "慢", "炖", "好"], 250),
    ]);
    upstream.fallback(paced_answer(&[r#"{"ideas": ["晚"]}"#], 10));
    let db = temp_dir("jobs-sigterm-drain").join("state.db");
    // One worker thread: the stream's connection is the one the drain waits for.
    let one = [("LADLE_JOB_CONCURRENCY", "1"), ("LADLE_WORKERS", "1")];
    let mut gateway = serve_on(&db, &upstream, &one).await;
    let running = submit_to(&gateway, "first").await;
    let queued = submit_to(&gateway, "second").await;
    upstream_has(&upstream, 1).await;
    let stream = gateway.chat(true).await;
    assert_eq!(stream.status(), 200);
    upstream_has(&upstream, 2).await;
    gateway.terminate();
    // The stream is read to its end while the process drains; the run ends first.
    assert_eq!(
        streamed_text(&stream.text().await.expect("body")),
        "慢慢慢炖好"
    );
    gateway.exited(Duration::from_secs(5)).await;
    assert_eq!(upstream.requests().len(), 2, "no run after the signal");
    let lines = gateway.all_lines();
    assert_eq!(
        status_changes(&lines, &queued),
        [(Value::Null, json!("queued"), 0)]
    );
    assert_eq!(
        status_changes(&lines, &running).len(),
        3,
        "queued, running, succeeded"
    );
}

#[tokio::test]
async fn a_keyed_submit_survives_a_sigkill_and_its_resubmit_finds_the_same_job() {
    let upstream = MockUpstream::start().await;
    // Every attempt of the first process stalls: the one run it starts holds its
    // only slot, and the keyed job stays queued in the file until the kill.
    upstream.fallback(sse(vec![Step::Stall]));
    let db = temp_dir("jobs-keyed-kill").join("state.db");
    let none = [("LADLE_JOB_CONCURRENCY", "1"), ("LADLE_JOB_MAX_RUNS", "1")];
    let mut first = serve_on(&db, &upstream, &none).await;
    let keyed = |gateway: &LadleProcess, marker: &str| {
        gateway
            .post_request("/v1/tasks/fridge?async=true", &fridge(marker))
            .header("idempotency-key", "order-42")
            .send()
    };
    let blocker = submit_to(&first, "先").await;
    let submitted = keyed(&first, "榴莲").await.expect("answers");
    assert_eq!(submitted.status(), 202);
    let id = job_id(submitted).await;
    first.kill();
    upstream.fallback(ideas());

    let second = serve_on(&db, &upstream, &none).await;
    let again = keyed(&second, "榴莲").await.expect("answers");
    assert_eq!(again.status(), 202);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(job_id(again).await, id, "the same job, not a second one");
    let other = keyed(&second, "山竹").await.expect("answers");
    assert_eq!(other.status(), 422, "another request under the key");
    let done = job_after(&second, &id, 5_000).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let marked: usize = upstream
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains("榴莲"))
        .count();
    assert_eq!(marked, 1, "it ran once (the other job: {blocker})");
}
