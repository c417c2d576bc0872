//! The state file is bounded (`LADLE_STATE_MAX_BYTES`): a finished job keeps
//! no variables, so a submit-and-cancel loop with large variables reuses the same
//! pages; submits that would pass the bound are `503 overloaded` and are
//! accepted again once room is made; pages freed are given back to the disk; and
//! `ladle_state_file_bytes` reports the size. On the real binary and a real
//! SQLite file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::fridge;
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

/// A fridge job's variables with about 200 KB more that its prompt never uses.
fn heavy(marker: &str) -> Value {
    let mut body = fridge(marker);
    body["notes"] = "笔记".repeat(33_000).into();
    body
}

/// The file's size on disk with its write-ahead log.
fn on_disk(db: &Path) -> u64 {
    let size = |path: PathBuf| std::fs::metadata(path).map_or(0, |m| m.len());
    size(db.to_path_buf()) + size(PathBuf::from(format!("{}-wal", db.display())))
}

async fn serve_on(db: &Path, upstream: &MockUpstream, max_bytes: &str) -> LadleProcess {
    let db = db.to_str().expect("a UTF-8 path");
    let env = [
        ("LADLE_STATE_DB", db),
        ("LADLE_STATE_MAX_BYTES", max_bytes),
        ("LADLE_JOB_CONCURRENCY", "1"),
    ];
    LadleProcess::start(&upstream.url, &env).await
}

/// Submits `body` as a fridge job: the status, and the job's id if accepted.
async fn submit(gateway: &LadleProcess, body: &Value) -> (u16, Option<String>) {
    let response = gateway.post("/v1/tasks/fridge?async=true", body).await;
    let status = response.status().as_u16();
    let id = json_of(response).await["id"].as_str().map(str::to_owned);
    (status, id)
}

async fn cancel(gateway: &LadleProcess, id: &str) {
    let canceled = gateway.delete(&format!("/v1/jobs/{id}")).await;
    assert_eq!(canceled.status(), 200);
}

#[tokio::test]
async fn a_submit_and_cancel_loop_with_large_variables_stays_under_the_bound() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let db = temp_dir("jobs-submit-cancel").join("state.db");
    let gateway = serve_on(&db, &upstream, "8388608").await;
    // 100 × 200 KB: 20 MB of variables through an 8 MiB file.
    for n in 0..100 {
        let (status, id) = submit(&gateway, &heavy(&n.to_string())).await;
        assert_eq!(status, 202, "submit {n} is never refused");
        cancel(&gateway, &id.expect("an id")).await;
    }
    let size = on_disk(&db);
    assert!(size < 12 << 20, "{size} bytes on disk");
    // The log is folded into the file and cut, not left to SQLite's 4 MiB
    // auto-checkpoint, which a small volume may not have room for.
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    eventually(
        Duration::from_secs(5),
        "the log cut to nothing",
        async || {
            let len = std::fs::metadata(&wal).map_or(0, |m| m.len());
            (len == 0).then_some(())
        },
    )
    .await;
    let reported = "ladle_state_file_bytes";
    let gauge = eventually(Duration::from_secs(3), "the size reported", async || {
        Some(gateway.metric(reported).await).filter(|bytes| *bytes > 0.0)
    })
    .await;
    assert!(gauge < (12 << 20) as f64, "{gauge}");
    let free = gateway.metric("ladle_state_free_bytes").await;
    assert!(free > 0.0, "the folder's free space is reported: {free}");
}

#[tokio::test]
async fn past_the_bound_submits_are_503_and_freed_room_is_given_back() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let db = temp_dir("jobs-state-bound").join("state.db");
    let gateway = serve_on(&db, &upstream, "16777216").await;
    let mut ids = Vec::new();
    let refused = loop {
        let (status, id) = submit(&gateway, &heavy(&ids.len().to_string())).await;
        match id {
            Some(id) => ids.push(id),
            None => break status,
        }
        assert!(ids.len() < 200, "a submit is refused before 40 MB");
    };
    assert_eq!(refused, 503);
    let response = gateway
        .post("/v1/tasks/fridge?async=true", &heavy("x"))
        .await;
    assert_eq!(response.headers()["retry-after"], "5");
    let error = json_of(response).await;
    assert_eq!(error["error"]["code"], "overloaded", "{error}");
    assert!(
        (60..=90).contains(&ids.len()),
        "{} accepted under 16 MiB",
        ids.len()
    );
    let full = on_disk(&db);

    for id in &ids {
        cancel(&gateway, id).await;
    }
    let (status, _) = submit(&gateway, &heavy("again")).await;
    assert_eq!(status, 202, "canceled jobs' variables made room");
    let given_back = eventually(
        Duration::from_secs(5),
        "free pages given back",
        async || Some(on_disk(&db)).filter(|size| *size < full / 2),
    )
    .await;
    assert!(given_back < 8 << 20, "{given_back} of {full} bytes");
}
