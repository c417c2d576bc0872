//! The Redis job store itself against a real redis-server, two handles on it
//! standing for two replicas: every transition, leases that run out, a run
//! failed `job_interrupted`, the fleet's unfinished bound, cancels seen through
//! renewals, deliveries held, and keys that expire (Redis stopped is in `runs`). Times are arguments, so
//! nothing here waits, but for leases: they run by Redis's own clock (a
//! replica's time never moves them), so their end is waited for.

use std::sync::Arc;
use std::time::Duration;

use ladle::engine::metrics::Metrics;
use ladle::fleet::Redis;
use ladle::jobs::redis::RedisJobs;
use ladle::jobs::{Canceled, Job, JobRequest, JobStatus, JobStore, RunEnd, Submitted, record};
use ladle::wall::unix_millis;
use serde_json::{Map, Value, json};

use crate::support::redis::RedisServer;
use crate::support::*;

const DAY: Duration = Duration::from_secs(86_400);
const LEASE: Duration = Duration::from_millis(100);
const HOUR: Duration = Duration::from_secs(3_600);

/// Now on the wall clock, plus `ms`.
fn at(ms: u64) -> u64 {
    unix_millis() + ms
}

/// A store on `redis`, as one replica has it.
fn store(redis: &RedisServer, webhooks: bool, ttl: Duration) -> RedisJobs {
    let handle = Redis::new(&redis_settings(redis), Metrics::new()).expect("a redis handle");
    RedisJobs::new(handle, webhooks, ttl)
}

fn job(dish: &str, now: u64) -> Job {
    let request = JobRequest {
        v: record::VERSION,
        task: "recipe".into(),
        variables: Map::from_iter([("dish".to_owned(), json!(dish))]),
        timeout_ms: None,
        cache_control: None,
        response: None,
    };
    Job::queued(request, "", now)
}

async fn submitted(store: &RedisJobs, job: Job) -> Job {
    match store.submit(job, 1_000, None).await.expect("written") {
        Submitted::Accepted(job) => job,
        Submitted::Full | Submitted::FileFull | Submitted::ClientFull => panic!("not full"),
    }
}

/// What Redis holds for `key`: its fields, and its TTL in ms (-1: none).
async fn raw(redis: &RedisServer, key: &str) -> (Vec<(String, String)>, i64) {
    let mut connection = redis.connection().await;
    let fields: Vec<(String, String)> = ::redis::cmd("HGETALL")
        .arg(key)
        .query_async(&mut connection)
        .await
        .expect("HGETALL");
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut connection)
        .await
        .expect("PTTL");
    (fields, ttl)
}

#[tokio::test]
async fn jobs_run_oldest_first_and_a_late_report_changes_nothing() {
    let redis = RedisServer::start().await;
    let (a, b) = (store(&redis, true, DAY), store(&redis, true, DAY));
    let first = submitted(&a, job("红烧肉", at(0))).await;
    let second = submitted(&b, job("宫保鸡丁", at(1))).await;
    // The hash holds the versioned request as the state file does.
    let (fields, ttl) = raw(&redis, &format!("ladle:job:{}", first.id)).await;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field("status").as_deref(), Some("queued"));
    let request: Value = serde_json::from_str(&field("request").expect("request")).expect("JSON");
    assert_eq!(
        (request["v"].clone(), request["task"].clone()),
        (json!(1), json!("recipe"))
    );
    assert_eq!(ttl, -1, "an unfinished job never expires");
    let claimed = b
        .claim(at(10), HOUR, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(
        (claimed.job.id.as_str(), claimed.job.runs),
        (first.id.as_str(), 1)
    );
    assert_eq!(
        (claimed.from, claimed.job.status),
        (Some(JobStatus::Queued), JobStatus::Running)
    );
    assert!(claimed.job.run_id.is_some());
    let waiting = RunEnd::Waiting {
        error: json!({"code": "upstream_busy"}),
        until: at(500),
    };
    let moved = b
        .finish(&first.id, 1, waiting, at(20))
        .await
        .expect("writes")
        .expect("held");
    assert_eq!(moved.job.status, JobStatus::RetryWait);
    assert_eq!(moved.job.view()["status"], "retry_wait");
    assert!(moved.job.view()["next_run_at"].is_string());
    let late = a
        .finish(&first.id, 1, RunEnd::Failed(json!({})), at(21))
        .await;
    assert_eq!(late.expect("writes"), None, "not running any more");
    // Not due yet: the newer job goes first, on the other replica.
    let next = a
        .claim(at(30), HOUR, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(next.job.id, second.id);
    assert_eq!(
        a.claim(at(31), HOUR, &[]).await.expect("claims"),
        None,
        "nothing queued"
    );
    let promoted = b.sweep(at(600), 3).await.expect("sweeps");
    let promoted: Vec<_> = promoted.iter().map(|m| (m.from, m.job.status)).collect();
    assert_eq!(promoted, [(Some(JobStatus::RetryWait), JobStatus::Queued)]);
    let again = b
        .claim(at(700), HOUR, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(
        (again.job.id.as_str(), again.job.runs),
        (first.id.as_str(), 2)
    );
    assert_ne!(again.job.run_id, claimed.job.run_id, "each run its own id");
    let done = RunEnd::Succeeded(json!({"task": "recipe", "output": {"菜": [1, 2]}}));
    let finished = b
        .finish(&first.id, 2, done, at(800))
        .await
        .expect("writes")
        .expect("held");
    assert_eq!(
        finished.job.view()["result"],
        json!({"task": "recipe", "output": {"菜": [1, 2]}})
    );
    let delivery = finished.job.delivery.as_ref().map(|d| d.status.name());
    assert_eq!(delivery, Some("pending"));
    let read = a.get(&first.id, "").await.expect("reads").expect("the job");
    assert_eq!(
        read, finished.job,
        "the other replica reads what was written"
    );
    assert_eq!(
        a.get(&first.id, "another client").await.expect("reads"),
        None
    );
}

#[tokio::test]
async fn a_run_whose_lease_ran_out_runs_again_and_fails_interrupted_when_out_of_runs() {
    let redis = RedisServer::start().await;
    let (a, b) = (store(&redis, false, DAY), store(&redis, false, DAY));
    let job = submitted(&a, job("鱼香肉丝", at(0))).await;
    let start = at(0);
    let first = a
        .claim(start, LEASE, &[])
        .await
        .expect("claims")
        .expect("a job");
    // Leases run by Redis's clock: B's own time (even far ahead) changes nothing.
    assert!(
        b.sweep(start + 60_000, 2).await.expect("sweeps").is_empty(),
        "held"
    );
    let held = [(job.id.clone(), 1)];
    assert!(
        a.renew(&held, start + 50, LEASE)
            .await
            .expect("renews")
            .is_empty()
    );
    assert!(
        b.sweep(start + 120, 2).await.expect("sweeps").is_empty(),
        "renewed"
    );
    let cut = eventually(Duration::from_secs(2), "the lease to run out", async || {
        Some(b.sweep(at(0), 2).await.expect("sweeps")).filter(|cut| !cut.is_empty())
    })
    .await;
    let cut: Vec<_> = cut
        .iter()
        .map(|m| (m.from, m.job.status, m.job.runs))
        .collect();
    assert_eq!(cut, [(Some(JobStatus::Running), JobStatus::Queued, 1)]);
    let second = b
        .claim(start + 220, LEASE, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(second.job.runs, 2);
    // Once another run has the job, A's report of the cut run, and its renewal,
    // come too late (a report before the job runs again would be kept).
    let late = a
        .finish(&job.id, 1, RunEnd::Succeeded(json!({})), start + 210)
        .await;
    assert_eq!(late.expect("writes"), None);
    assert_eq!(
        a.renew(&held, start + 230, LEASE).await.expect("renews"),
        vec![job.id.clone()]
    );
    // B dies too: both replicas sweep at once, one of them fails the job.
    let changes = eventually(Duration::from_secs(2), "B's lease to run out", async || {
        let (from_a, from_b) = tokio::join!(a.sweep(at(0), 2), b.sweep(at(0), 2));
        let changes: Vec<_> = [from_a, from_b]
            .into_iter()
            .flat_map(|c| c.expect("sweeps"))
            .collect();
        (!changes.is_empty()).then_some(changes)
    })
    .await;
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(
        (changes[0].from, changes[0].job.status),
        (Some(JobStatus::Running), JobStatus::Failed)
    );
    let failed = a
        .get(&job.id, "")
        .await
        .expect("reads")
        .expect("the job")
        .view();
    assert_eq!(failed["error"]["code"], "job_interrupted");
    assert_eq!(failed["error"]["retryable"], false);
    assert_eq!(
        failed["error"]["request_id"].as_str(),
        second.job.run_id.as_deref()
    );
    assert_ne!(first.job.run_id, second.job.run_id);
    assert_eq!(a.counts().await.expect("counts").running, 0);
}

#[tokio::test]
async fn a_cancel_on_one_replica_reaches_the_run_on_the_other_through_its_renewal() {
    let redis = RedisServer::start().await;
    let (a, b) = (store(&redis, false, DAY), store(&redis, false, DAY));
    let job = submitted(&a, job("麻婆豆腐", at(0))).await;
    a.claim(at(1), LEASE, &[])
        .await
        .expect("claims")
        .expect("a job");
    let Canceled::Now(moved) = b.cancel(&job.id, "", at(5)).await.expect("writes") else {
        panic!("canceled now");
    };
    assert_eq!(
        (moved.from, moved.job.status),
        (Some(JobStatus::Running), JobStatus::Canceled)
    );
    let held = [(job.id.clone(), 1)];
    assert_eq!(
        a.renew(&held, at(6), LEASE).await.expect("renews"),
        vec![job.id.clone()]
    );
    let late = a
        .finish(&job.id, 1, RunEnd::Succeeded(json!({})), at(7))
        .await;
    assert_eq!(late.expect("writes"), None, "the cancel stands");
    assert!(matches!(
        a.cancel(&job.id, "", at(8)).await.expect("reads"),
        Canceled::Finished(_)
    ));
    let other = a.cancel(&job.id, "other", at(8)).await.expect("reads");
    assert!(matches!(other, Canceled::Unknown));
    let unknown = a
        .cancel("job_0000000000000000000000", "", at(8))
        .await
        .expect("reads");
    assert!(matches!(unknown, Canceled::Unknown));
    assert_eq!(a.counts().await.expect("counts"), Default::default());
}

#[tokio::test]
async fn a_finished_job_expires_after_its_ttl_but_not_before_its_delivery_is_made() {
    let redis = RedisServer::start().await;
    let ttl = Duration::from_secs(60);
    let (a, b) = (store(&redis, true, ttl), store(&redis, true, ttl));
    let job = submitted(&a, job("回锅肉", at(0))).await;
    let key = format!("ladle:job:{}", job.id);
    a.cancel(&job.id, "", at(0)).await.expect("writes");
    assert_eq!(
        raw(&redis, &key).await.1,
        -1,
        "kept while its delivery is pending"
    );
    let due = b
        .due_deliveries(at(10), Duration::from_secs(15), 100)
        .await
        .expect("reads");
    assert_eq!(
        due.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [job.id.as_str()]
    );
    let again = a
        .due_deliveries(at(11), Duration::from_secs(15), 100)
        .await
        .expect("reads");
    assert!(again.is_empty(), "held by the other sender");
    let mut delivery = due[0].delivery.clone().expect("a delivery");
    delivery.attempts = 1;
    delivery.next_at = at(1_000);
    b.delivered(&job.id, delivery.clone())
        .await
        .expect("writes");
    assert_eq!(raw(&redis, &key).await.1, -1, "still pending");
    assert!(
        a.due_deliveries(at(500), LEASE, 100)
            .await
            .expect("reads")
            .is_empty(),
        "not due yet"
    );
    assert_eq!(
        a.due_deliveries(at(1_000), LEASE, 100)
            .await
            .expect("reads")
            .len(),
        1
    );
    delivery.status = ladle::jobs::DeliveryStatus::Delivered;
    delivery.attempts = 2;
    a.delivered(&job.id, delivery).await.expect("writes");
    let (_, left) = raw(&redis, &key).await;
    assert!(
        left > 50_000 && left <= 60_000,
        "expires a TTL after it finished: {left}"
    );
    assert!(
        a.due_deliveries(at(100_000), LEASE, 100)
            .await
            .expect("reads")
            .is_empty()
    );
    let view = a
        .get(&job.id, "")
        .await
        .expect("reads")
        .expect("the job")
        .view();
    assert_eq!(
        view["webhook"],
        json!({"status": "delivered", "attempts": 2})
    );
    // Without webhooks the TTL starts at once; a job past it is not shown.
    let quiet = Arc::new(store(&redis, false, Duration::from_secs(5)));
    let old = submitted(&quiet, self::job("凉拌黄瓜", at(0))).await;
    quiet
        .cancel(&old.id, "", at(0) - 6_000)
        .await
        .expect("writes");
    let (fields, left) = raw(&redis, &format!("ladle:job:{}", old.id)).await;
    assert!(!fields.is_empty() && left > 0 && left <= 5_000, "{left}");
    assert_eq!(
        quiet.get(&old.id, "").await.expect("reads"),
        None,
        "past its TTL"
    );
    assert!(matches!(
        quiet.cancel(&old.id, "", at(0)).await.expect("reads"),
        Canceled::Unknown
    ));
    assert_eq!(
        quiet
            .expire(at(0), Duration::from_secs(5))
            .await
            .expect("a no-op"),
        0
    );
}
