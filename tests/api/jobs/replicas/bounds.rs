//! What no caller can do to the fleet's job store, against a real redis-server,
//! two handles on it standing for two replicas: the fleet's `LADLE_JOB_MAX_QUEUED`
//! holds across replicas, a key's `max_queued` counts its
//! unfinished jobs across the fleet (a finished one leaves the count, and keeps
//! no variables), a claim passes over the jobs of clients busy on the claiming
//! replica, and a hash an older build wrote past what can be read back is ended
//! as `failed` (`job_unreadable`) while claims and deliveries go on.

use std::time::Duration;

use ladle::engine::metrics::Metrics;
use ladle::fleet::Redis;
use ladle::jobs::redis::RedisJobs;
use ladle::jobs::{Job, JobRequest, JobStore, RunEnd, Submitted, record};
use ladle::wall::unix_millis;
use serde_json::{Map, json};

use crate::support::redis::RedisServer;
use crate::support::*;

const DAY: Duration = Duration::from_secs(86_400);
const HOUR: Duration = Duration::from_secs(3_600);

fn store(redis: &RedisServer) -> RedisJobs {
    let handle = Redis::new(&redis_settings(redis), Metrics::new()).expect("a redis handle");
    RedisJobs::new(handle, false, DAY)
}

fn job_of(client: &str, n: u64) -> Job {
    let request = JobRequest {
        v: record::VERSION,
        task: "recipe".into(),
        variables: Map::from_iter([("dish".to_owned(), json!("红烧肉".repeat(1_000)))]),
        timeout_ms: None,
        cache_control: None,
        response: None,
    };
    Job::queued(request, client, unix_millis() + n)
}

#[tokio::test]
async fn a_keys_max_queued_holds_across_the_fleet_and_busy_clients_wait_their_turn() {
    let redis = RedisServer::start().await;
    let (a, b) = (store(&redis), store(&redis));
    let submit = async |on: &RedisJobs, client: &str, n: u64| {
        on.submit(job_of(client, n), 100, Some(2))
            .await
            .expect("writes")
    };
    let Submitted::Accepted(first) = submit(&a, "alpha", 0).await else {
        panic!("accepted");
    };
    assert!(matches!(
        submit(&b, "alpha", 1).await,
        Submitted::Accepted(_)
    ));
    assert_eq!(
        submit(&a, "alpha", 2).await,
        Submitted::ClientFull,
        "the fleet's count"
    );
    assert!(matches!(
        submit(&b, "bravo", 3).await,
        Submitted::Accepted(_)
    ));

    // Alpha is busy on this replica: bravo's younger job is claimed first.
    let busy = ["alpha".to_owned()];
    let claimed = a.claim(unix_millis(), HOUR, &busy).await.expect("claims");
    assert_eq!(claimed.expect("a job").job.client, "bravo");
    let claimed = a.claim(unix_millis(), HOUR, &[]).await.expect("claims");
    let claimed = claimed.expect("a job").job;
    assert_eq!(claimed.id, first.id, "then the oldest");

    let done = RunEnd::Succeeded(json!({"task": "recipe"}));
    let ended = a
        .finish(&first.id, 1, done, unix_millis())
        .await
        .expect("writes");
    let ended = ended.expect("ended").job;
    assert!(
        ended.request.variables.is_empty(),
        "a finished job keeps no variables"
    );
    let read = b
        .get(&first.id, "alpha")
        .await
        .expect("reads")
        .expect("the job");
    assert!(read.request.variables.is_empty());
    assert!(matches!(
        submit(&b, "alpha", 4).await,
        Submitted::Accepted(_)
    ));
}

#[tokio::test]
async fn a_hash_that_cannot_be_read_is_ended_and_claims_and_deliveries_go_on() {
    let redis = RedisServer::start().await;
    let handle = Redis::new(&redis_settings(&redis), Metrics::new()).expect("a redis handle");
    let store = RedisJobs::new(handle.clone(), true, DAY);
    // An older build's poison: the oldest queued job, and a finished one owing
    // its delivery, each nested past what serde_json reads back.
    let (queued, finished) = ("job_0000000000000000000001", "job_0000000000000000000002");
    let deep_request = format!(
        r#"{{"v":1,"task":"recipe","variables":{{"x":{}}}}}"#,
        nested_json(127)
    );
    let plain = r#"{"v":1,"task":"recipe","variables":{}}"#;
    let delivery = r#"{"v":1,"id":"msg_p","status":"pending","attempts":0,"next_at":0}"#;
    let mut connection = redis.connection().await;
    let key = |id: &str| format!("{}job:{id}", redis_settings(&redis).prefix);
    let set = |name: &str| format!("{}jobs:{name}", redis_settings(&redis).prefix);
    let common = [
        "client",
        "",
        "runs",
        "0",
        "created_at",
        "1",
        "updated_at",
        "1",
    ];
    let _: () = ::redis::pipe()
        .cmd("HSET")
        .arg(key(queued))
        .arg(&common[..])
        .arg(&["status", "queued", "request", deep_request.as_str()][..])
        .ignore()
        .cmd("ZADD")
        .arg(set("queued"))
        .arg(1)
        .arg(queued)
        .ignore()
        .cmd("HSET")
        .arg(key(finished))
        .arg(&common[..])
        .arg(
            &[
                "status",
                "succeeded",
                "request",
                plain,
                "result",
                &nested_json(128),
                "delivery",
                delivery,
            ][..],
        )
        .ignore()
        .cmd("ZADD")
        .arg(set("deliveries"))
        .arg(0)
        .arg(finished)
        .ignore()
        .query_async(&mut connection)
        .await
        .expect("the poison is written");
    let good = store
        .submit(job_of("", 5), 100, None)
        .await
        .expect("writes");
    let Submitted::Accepted(good) = good else {
        panic!("accepted");
    };

    assert!(
        store
            .claim(unix_millis(), HOUR, &[])
            .await
            .expect("claims")
            .is_none(),
        "the poison is ended"
    );
    let claimed = store.claim(unix_millis(), HOUR, &[]).await.expect("claims");
    assert_eq!(claimed.expect("the good job").job.id, good.id);
    // A delivery that cannot be read is ended where it is met; its job.failed
    // is due at once, and taken by the next call.
    let mut ids = Vec::new();
    for later in 0..2 {
        let due = store.due_deliveries(unix_millis() + later, HOUR, 16);
        let due = due.await.expect("reads");
        assert!(due.iter().all(|job| job.status.name() == "failed"));
        ids.extend(due.into_iter().map(|job| job.id));
    }
    ids.sort_unstable();
    assert_eq!(ids, [queued, finished], "each owes its job.failed");
    for id in [queued, finished] {
        let job = store.get(id, "").await.expect("reads").expect("the job");
        assert_eq!(job.status.name(), "failed");
        assert_eq!(
            job.error.as_ref().expect("an error")["code"],
            "job_unreadable"
        );
        assert_eq!(job.request.task, "recipe");
    }
    let reported = store.sweep(unix_millis(), 3).await.expect("sweeps");
    assert_eq!(reported.len(), 2, "the next sweep tells of both");
    let counted = handle.metrics().render();
    assert!(
        counted.contains("ladle_store_errors_total{op=\"read\"} 2"),
        "{counted}"
    );
}

#[tokio::test]
async fn the_fleet_holds_at_most_max_queued_unfinished_jobs() {
    let redis = RedisServer::start().await;
    let (a, b) = (store(&redis), store(&redis));
    let queued = a.submit(job_of("", 0), 2, None).await.expect("writes");
    let Submitted::Accepted(queued) = queued else {
        panic!("accepted");
    };
    let second = job_of("", 1);
    let second_at = second.created_at;
    assert!(matches!(
        b.submit(second, 2, None).await.expect("writes"),
        Submitted::Accepted(_)
    ));
    b.claim(unix_millis() + 2, HOUR, &[])
        .await
        .expect("claims")
        .expect("a job");
    assert_eq!(
        a.submit(job_of("", 3), 2, None).await.expect("writes"),
        Submitted::Full
    );
    let counts = b.counts().await.expect("counts");
    assert_eq!(
        (counts.queued, counts.running, counts.retry_wait),
        (1, 1, 0)
    );
    assert_eq!(
        counts.oldest_queued,
        Some(second_at),
        "b's job waits, a's runs"
    );
    b.cancel(&queued.id, "", unix_millis() + 4)
        .await
        .expect("writes");
    assert!(matches!(
        b.submit(job_of("", 5), 2, None).await.expect("writes"),
        Submitted::Accepted(_)
    ));
}

#[tokio::test]
async fn a_submits_idempotency_key_is_written_with_its_job_for_every_replica() {
    let redis = RedisServer::start().await;
    let (a, b) = (store(&redis), store(&redis));
    let mut job = job_of("alpha", 0);
    job.key = Some(ladle::jobs::SubmitKey {
        key: "alpha:order-7".into(),
        fingerprint: 42,
        until: unix_millis() + 60_000,
    });
    let Submitted::Accepted(job) = a.submit(job, 100, None).await.expect("writes") else {
        panic!("accepted");
    };
    let kept = b.keyed("alpha:order-7").await.expect("reads");
    assert_eq!(kept, Some((42, job.id)));
    assert_eq!(b.keyed("alpha:other").await.expect("reads"), None);
}

#[tokio::test]
async fn a_failed_delivery_redriven_on_one_replica_is_due_again_for_every_replica() {
    let redis = RedisServer::start().await;
    let handle = Redis::new(&redis_settings(&redis), Metrics::new()).expect("a redis handle");
    let (a, b) = (RedisJobs::new(handle.clone(), true, DAY), store(&redis));
    let Submitted::Accepted(job) = a.submit(job_of("", 0), 100, None).await.expect("writes") else {
        panic!("accepted");
    };
    let now = unix_millis();
    a.claim(now, HOUR, &[])
        .await
        .expect("claims")
        .expect("the job");
    let done = RunEnd::Succeeded(json!({"task": "recipe"}));
    a.finish(&job.id, 1, done, now).await.expect("writes");
    assert_eq!(
        a.redeliver(&job.id, now).await.expect("writes"),
        ladle::jobs::Redelivered::NotFailed,
        "pending is not failed"
    );
    let due = a.due_deliveries(now + 1, HOUR, 16).await.expect("reads");
    let mut delivery = due[0].delivery.clone().expect("a delivery");
    delivery.status = ladle::jobs::DeliveryStatus::Failed;
    a.delivered(&job.id, delivery.clone())
        .await
        .expect("writes");
    let failed = b.failed_deliveries(20).await.expect("reads");
    let listed: Vec<&str> = failed.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(listed, [job.id.as_str()]);

    let ladle::jobs::Redelivered::Now(redriven) =
        b.redeliver(&job.id, now + 2).await.expect("writes")
    else {
        panic!("redriven");
    };
    let again = redriven.delivery.expect("a delivery");
    assert_eq!((again.id, again.attempts), (delivery.id, 0));
    let due = a.due_deliveries(now + 3, HOUR, 16).await.expect("reads");
    assert_eq!(due.len(), 1, "due again, on any replica");
    let failed = b.failed_deliveries(20).await.expect("reads");
    assert!(failed.is_empty(), "no longer listed");
}
