//! A client key's share of the fleet's jobs in the Redis store, against a real
//! redis-server, two handles on it standing for two replicas: `max_queued`
//! counts a key's unfinished jobs across the fleet (a finished one leaves the
//! count, and keeps no variables), and a claim passes over the jobs of clients
//! busy on the claiming replica.

use std::time::Duration;

use ladle::fleet::Redis;
use ladle::jobs::redis::RedisJobs;
use ladle::jobs::{Job, JobRequest, JobStore, RunEnd, Submitted, record};
use ladle::ops::metrics::Metrics;
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
