//! The SQLite store against real files: durability across a reopen, the lock,
//! every transition, recovery of cut runs, deliveries and expiry.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, json};

use super::SqliteJobs;
use crate::jobs::{
    Canceled, DeliveryStatus, Job, JobRequest, JobStatus, JobStore, RunEnd, Submitted, record,
};

const LEASE: Duration = Duration::from_secs(10);

/// Now, on the wall clock the store reads for expiry, plus `ms`.
fn at(ms: u64) -> u64 {
    crate::wall::unix_millis() + ms
}
const DAY: Duration = Duration::from_secs(86_400);

/// The jobs of a state file opened at `path`.
fn open(
    path: &std::path::Path,
    webhooks: bool,
    ttl: Duration,
    max_runs: u32,
) -> Result<SqliteJobs, crate::config::ConfigError> {
    SqliteJobs::in_file(
        crate::state_file::StateFile::open(path)?,
        webhooks,
        ttl,
        max_runs,
        1 << 30,
        crate::engine::metrics::Metrics::new(),
    )
}

fn file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ladle-jobs-{name}-{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn job(task: &str, now: u64) -> Job {
    let request = JobRequest {
        v: record::VERSION,
        task: task.into(),
        variables: Map::from_iter([("dish".to_owned(), json!("鱼香肉丝"))]),
        timeout_ms: None,
        cache_control: None,
        response: None,
    };
    Job::queued(request, "", now)
}

async fn submitted(store: &SqliteJobs, job: Job) -> Job {
    match store.submit(job, 1_000, None).await.expect("written") {
        Submitted::Accepted(job) => job,
        Submitted::Full | Submitted::FileFull | Submitted::ClientFull => panic!("not full"),
    }
}

#[tokio::test]
async fn a_submitted_job_is_in_the_file_when_the_call_returns() {
    let path = file("durable");
    let id = {
        let store = open(&path, false, DAY, 3).expect("opens");
        submitted(&store, job("recipe", at(0))).await.id
    };
    // The first store is gone (its thread ends with its last sender); a new one
    // on the same file finds the job.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let reopened = open(&path, false, DAY, 3).expect("reopens");
    let found = reopened
        .get(&id, "")
        .await
        .expect("reads")
        .expect("the job");
    assert_eq!(
        (found.status, found.request.task.as_str()),
        (JobStatus::Queued, "recipe")
    );
}

#[tokio::test]
async fn a_second_store_on_a_file_in_use_is_refused_naming_the_key() {
    let path = file("locked");
    let _first = open(&path, false, DAY, 3).expect("opens");
    let error = open(&path, false, DAY, 3)
        .err()
        .expect("refused")
        .to_string();
    assert!(error.starts_with("LADLE_STATE_DB"), "{error}");
    assert!(error.contains("in use"), "{error}");
}

#[tokio::test]
async fn jobs_run_oldest_first_and_their_ends_are_written_once() {
    let store = open(&PathBuf::from(":memory:"), true, DAY, 3).expect("opens");
    let (first, second) = (
        submitted(&store, job("a", at(0))).await,
        submitted(&store, job("b", at(1))).await,
    );
    let claimed = store
        .claim(at(10), LEASE, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(
        (claimed.job.id.as_str(), claimed.job.runs),
        (first.id.as_str(), 1)
    );
    assert_eq!(claimed.from, Some(JobStatus::Queued));
    assert!(claimed.job.run_id.is_some());
    let counts = store.counts().await.expect("counts");
    assert_eq!(
        (counts.queued, counts.running, counts.oldest_queued),
        (1, 1, Some(second.created_at)),
        "the oldest queued is the second now"
    );
    let waiting = RunEnd::Waiting {
        error: json!({"code": "upstream_busy"}),
        until: at(500),
    };
    let moved = store
        .finish(&first.id, 1, waiting, at(20))
        .await
        .expect("writes")
        .expect("held");
    assert_eq!(moved.job.status, JobStatus::RetryWait);
    assert_eq!(
        store
            .finish(&first.id, 1, RunEnd::Failed(json!({})), at(21))
            .await
            .expect("writes"),
        None,
        "not running any more"
    );
    // Not due yet: the newer job goes first.
    let next = store
        .claim(at(30), LEASE, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(next.job.id, second.id);
    let promoted = store.sweep(at(600), 3).await.expect("sweeps");
    assert_eq!(
        promoted.iter().map(|m| m.job.status).collect::<Vec<_>>(),
        [JobStatus::Queued]
    );
    let again = store
        .claim(at(700), LEASE, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(
        (again.job.id.as_str(), again.job.runs),
        (first.id.as_str(), 2)
    );
    let done = RunEnd::Succeeded(json!({"task": "a"}));
    let finished = store
        .finish(&first.id, 2, done, at(800))
        .await
        .expect("writes")
        .expect("held");
    assert_eq!(finished.job.view()["result"], json!({"task": "a"}));
    assert_eq!(
        finished.job.delivery.as_ref().map(|d| d.status.name()),
        Some("pending")
    );
}

#[tokio::test]
async fn a_run_cut_by_the_process_ending_is_run_again_or_fails_interrupted() {
    let path = file("cut");
    let (again, out_of_runs) = {
        let store = open(&path, false, DAY, 3).expect("opens");
        let (a, b) = (
            submitted(&store, job("a", at(0))).await,
            submitted(&store, job("b", at(1))).await,
        );
        for _ in 0..2 {
            store.claim(at(10), LEASE, &[]).await.expect("claims");
        }
        // `b`'s run was its third and last.
        let mut b = store.get(&b.id, "").await.expect("reads").expect("b");
        b.runs = 3;
        let _ = store.submit(b.clone(), 100, None).await;
        (a.id, b.id)
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let store = open(&path, false, DAY, 3).expect("reopens");
    let cut = store.sweep(at(1_000), 3).await.expect("sweeps");
    let statuses: Vec<(String, JobStatus)> =
        cut.into_iter().map(|m| (m.job.id, m.job.status)).collect();
    assert!(
        statuses.contains(&(again.clone(), JobStatus::Queued)),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&(out_of_runs.clone(), JobStatus::Failed)),
        "{statuses:?}"
    );
    let failed = store
        .get(&out_of_runs, "")
        .await
        .expect("reads")
        .expect("b");
    assert_eq!(failed.view()["error"]["code"], "job_interrupted");
    assert_eq!(failed.view()["error"]["retryable"], false);
    assert!(
        store.sweep(at(2_000), 3).await.expect("sweeps").is_empty(),
        "recovered once"
    );
}

#[tokio::test]
async fn a_cancel_ends_an_unfinished_job_and_leaves_a_finished_one() {
    let store = open(&PathBuf::from(":memory:"), false, DAY, 3).expect("opens");
    let job = submitted(&store, job("a", at(0))).await;
    let Canceled::Now(moved) = store.cancel(&job.id, "", at(5)).await.expect("writes") else {
        panic!("canceled now");
    };
    assert_eq!(
        (moved.from, moved.job.status),
        (Some(JobStatus::Queued), JobStatus::Canceled)
    );
    assert!(matches!(
        store.cancel(&job.id, "", at(6)).await.expect("reads"),
        Canceled::Finished(_)
    ));
    assert!(matches!(
        store.cancel(&job.id, "other", at(6)).await.expect("reads"),
        Canceled::Unknown
    ));
    assert_eq!(store.claim(at(7), LEASE, &[]).await.expect("claims"), None);
}

#[tokio::test]
async fn the_store_holds_at_most_max_queued_unfinished_jobs_and_forgets_old_finished_ones() {
    let store = open(
        &PathBuf::from(":memory:"),
        false,
        Duration::from_millis(100),
        3,
    )
    .expect("opens");
    let first = submitted(&store, job("a", at(0))).await;
    assert_eq!(
        store
            .submit(job("b", at(2)), 1, None)
            .await
            .expect("writes"),
        Submitted::Full
    );
    store.cancel(&first.id, "", at(3)).await.expect("writes");
    assert!(matches!(
        store
            .submit(job("c", at(4)), 1, None)
            .await
            .expect("writes"),
        Submitted::Accepted(_)
    ));
    assert_eq!(
        store
            .expire(at(200), Duration::from_millis(100))
            .await
            .expect("expires"),
        1
    );
    assert_eq!(store.get(&first.id, "").await.expect("reads"), None);
}

#[tokio::test]
async fn a_due_delivery_is_held_while_one_sender_makes_it() {
    let store = open(&PathBuf::from(":memory:"), true, DAY, 3).expect("opens");
    let job = submitted(&store, job("a", at(0))).await;
    store.cancel(&job.id, "", at(5)).await.expect("writes");
    let due = store
        .due_deliveries(at(10), LEASE, 100)
        .await
        .expect("reads");
    assert_eq!(due.len(), 1);
    assert!(
        store
            .due_deliveries(at(11), LEASE, 100)
            .await
            .expect("reads")
            .is_empty(),
        "held"
    );
    let mut delivery = due[0].delivery.clone().expect("a delivery");
    delivery.status = DeliveryStatus::Delivered;
    delivery.attempts = 1;
    store.delivered(&job.id, delivery).await.expect("writes");
    assert!(
        store
            .due_deliveries(at(20_000), LEASE, 100)
            .await
            .expect("reads")
            .is_empty()
    );
    let view = store
        .get(&job.id, "")
        .await
        .expect("reads")
        .expect("job")
        .view();
    assert_eq!(
        view["webhook"],
        json!({"status": "delivered", "attempts": 1})
    );
}

#[tokio::test]
async fn many_submits_at_once_share_commits_and_all_are_kept() {
    let path = file("group");
    let store = std::sync::Arc::new(open(&path, false, DAY, 3).expect("opens"));
    let submits = (0..200).map(|n| {
        let store = store.clone();
        tokio::spawn(async move { submitted(&store, job("g", at(n))).await.id })
    });
    let ids: Vec<String> = futures_util::future::join_all(submits)
        .await
        .into_iter()
        .map(|id| id.expect("submitted"))
        .collect();
    let counts = store.counts().await.expect("counts");
    assert_eq!(counts.queued, 200);
    assert_eq!(
        ids.iter().collect::<std::collections::HashSet<_>>().len(),
        200
    );
}

#[tokio::test]
async fn a_keys_max_queued_counts_its_unfinished_jobs_and_busy_clients_wait_their_turn() {
    let store = open(&PathBuf::from(":memory:"), false, DAY, 3).expect("opens");
    let of = |client: &str, n: u64| {
        let mut job = job("a", at(n));
        job.client = client.to_owned();
        job
    };
    let submit = async |job: Job| store.submit(job, 100, Some(2)).await.expect("writes");
    let Submitted::Accepted(first) = submit(of("alpha", 0)).await else {
        panic!("accepted");
    };
    assert!(matches!(
        submit(of("alpha", 1)).await,
        Submitted::Accepted(_)
    ));
    assert_eq!(submit(of("alpha", 2)).await, Submitted::ClientFull);
    assert!(matches!(
        submit(of("bravo", 3)).await,
        Submitted::Accepted(_)
    ));

    let busy = ["alpha".to_owned()];
    let claimed = store.claim(at(4), LEASE, &busy).await.expect("claims");
    assert_eq!(claimed.expect("a job").job.client, "bravo");
    store
        .cancel(&first.id, "alpha", at(5))
        .await
        .expect("writes");
    assert!(matches!(
        submit(of("alpha", 6)).await,
        Submitted::Accepted(_)
    ));
}
