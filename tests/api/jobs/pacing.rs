//! A backlog of deliveries is worked off, never sent whole: 2,000 finished jobs
//! owing their webhook, against a receiver that takes its time, are delivered
//! with at most `LADLE_JOB_WEBHOOK_CONCURRENCY` attempts in flight and memory
//! bounded by that batch, not by the backlog. On the real binary, a real SQLite
//! file and a real HTTP receiver. And the default attempts outlast ten refusals
//! (the contract's old 8 did not).

use std::time::Duration;

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::receiver::Receiver;
use crate::support::*;

const BACKLOG: usize = 2_000;
const AT_ONCE: usize = 16;

#[tokio::test]
async fn two_thousand_due_deliveries_go_out_a_batch_at_a_time() {
    let upstream = MockUpstream::start().await;
    let receiver = Receiver::slow(&[200], Duration::from_millis(5)).await;
    let db = temp_dir("jobs-delivery-backlog").join("state.db");
    let env = |db: &str, url: &str| {
        [
            ("LADLE_STATE_DB", db.to_owned()),
            ("LADLE_JOB_WEBHOOK_URL", url.to_owned()),
            ("LADLE_JOB_WEBHOOK_CONCURRENCY", AT_ONCE.to_string()),
        ]
    };
    let db_text = db.to_str().expect("a UTF-8 path");
    // A first process makes the file (its sender finds nothing due); the backlog
    // is then written as a process that died with it owing would have left it.
    let owing = env(db_text, &receiver.url);
    let owing: Vec<(&str, &str)> = owing.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut first = LadleProcess::start(&upstream.url, &owing).await;
    first.kill();
    let output = format!(r#"{{"ideas": ["{}"]}}"#, "番茄炒蛋".repeat(1_400));
    {
        let mut file = rusqlite::Connection::open(&db).expect("the state file opens");
        let tx = file.transaction().expect("a transaction");
        for n in 0..BACKLOG {
            let id = format!("job_{n:022}");
            let result = format!(r#"{{"task":"fridge","output":{output},"meta":{{}}}}"#);
            let delivery = format!(
                r#"{{"v":1,"id":"msg_{n:022}","status":"pending","attempts":0,"next_at":0}}"#
            );
            tx.execute(
                "INSERT INTO jobs (id, client, status, runs, created_at, updated_at, request, \
                 result, delivery, delivery_due) VALUES (?1, '', 'succeeded', 1, 1, 1, \
                 '{\"v\":1,\"task\":\"fridge\",\"variables\":{}}', ?2, ?3, 0)",
                rusqlite::params![id, result, delivery],
            )
            .expect("a finished job is written");
        }
        tx.commit().expect("the backlog is written");
    }

    let second = LadleProcess::start(&upstream.url, &owing).await;
    eventually(Duration::from_secs(60), "every delivery", async || {
        (receiver.received().len() >= BACKLOG).then_some(())
    })
    .await;
    let received = receiver.received();
    assert_eq!(received.len(), BACKLOG, "no delivery made twice");
    let mut ids: Vec<String> = received.iter().map(|r| r.header("webhook-id")).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), BACKLOG, "each delivered once");
    let most = receiver.most_at_once();
    assert!(
        (2..=AT_ONCE).contains(&most),
        "{most} attempts at once: in batches of at most {AT_ONCE}, not one by one"
    );
    // Each result is about 16 KiB: the whole backlog loaded at once is 32 MiB of
    // text and several times that as parsed values (a peak of about 300 MiB at
    // twice the size, measured with every due row sent at once); a batch is
    // 256 KiB.
    let peak_mib = second.peak_rss_kib() / 1024;
    assert!(peak_mib < 80, "peak RSS {peak_mib} MiB");
}

#[tokio::test]
async fn with_the_default_attempts_a_delivery_outlasts_ten_refusals() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(crate::jobs::ideas());
    // Ten refusals: past the contract's old 8 attempts, within the default 16.
    let mut script = vec![500u16; 10];
    script.push(200);
    let receiver = Receiver::start(&script).await;
    let env = [
        ("LADLE_STATE_DB", ":memory:"),
        ("LADLE_JOB_WEBHOOK_URL", receiver.url.as_str()),
        ("LADLE_JOB_WEBHOOK_BACKOFF_MS", "1"),
    ];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    let submitted = crate::jobs::submit(&gateway, "久").await;
    let id = crate::jobs::job_id(submitted).await;
    let delivered = eventually(Duration::from_secs(10), "the delivery", async || {
        let job = crate::jobs::job_after(&gateway, &id, 1).await;
        (job["webhook"]["status"] == "delivered").then_some(job)
    })
    .await;
    assert_eq!(delivered["webhook"]["attempts"], 11, "{delivered}");
    let ids: std::collections::HashSet<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(ids.len(), 1, "one webhook-id for every attempt");
}

#[tokio::test]
async fn an_operator_redrives_a_failed_delivery_under_the_same_webhook_id() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(crate::jobs::ideas());
    let receiver = Receiver::start(&[500, 500, 200]).await;
    let env = [
        ("LADLE_STATE_DB", ":memory:"),
        ("LADLE_JOB_WEBHOOK_URL", receiver.url.as_str()),
        ("LADLE_JOB_WEBHOOK_BACKOFF_MS", "1"),
        ("LADLE_JOB_WEBHOOK_ATTEMPTS", "2"),
        ("LADLE_ADMIN_TOKEN", crate::support::ADMIN_TOKEN),
    ];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    let submitted = crate::jobs::submit(&gateway, "再").await;
    let id = crate::jobs::job_id(submitted).await;
    let webhook = async |status: &str| {
        eventually(
            Duration::from_secs(10),
            "the delivery's status",
            async || {
                let job = crate::jobs::job_after(&gateway, &id, 1).await;
                (job["webhook"]["status"] == status).then_some(job)
            },
        )
        .await
    };
    assert_eq!(webhook("failed").await["webhook"]["attempts"], 2);
    // The Status tab lists it, with what redrives it.
    let listed = async || {
        let status = gateway
            .admin(reqwest::Method::GET, "/admin/status")
            .send()
            .await;
        json_of(status.expect("the gateway answers")).await["webhooks"]["failed"].clone()
    };
    let failed = listed().await;
    assert_eq!(failed[0]["job_id"], id.as_str(), "{failed}");
    assert_eq!(failed[0]["attempts"], 2, "{failed}");
    let path = format!("/admin/jobs/{id}/redeliver");
    let redrive = async || {
        let sent = gateway.admin(reqwest::Method::POST, &path).send().await;
        sent.expect("the gateway answers")
    };
    let redriven = redrive().await;
    assert_eq!(redriven.status(), 200);
    let job = json_of(redriven).await;
    assert_eq!(
        job["webhook"],
        serde_json::json!({"status": "pending", "attempts": 0})
    );
    assert_eq!(webhook("delivered").await["webhook"]["attempts"], 1);
    assert_eq!(listed().await, serde_json::json!([]), "no longer failed");
    let ids: std::collections::HashSet<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(
        (receiver.received().len(), ids.len()),
        (3, 1),
        "one webhook-id"
    );

    let again = redrive().await;
    assert_eq!(again.status(), 409);
    assert_eq!(json_of(again).await["error"]["code"], "delivery_not_failed");
    let unknown = gateway
        .admin(
            reqwest::Method::POST,
            "/admin/jobs/job_0000000000000000000001/redeliver",
        )
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(unknown.status(), 404);
    let no_token = gateway.post(&path, &serde_json::json!({})).await;
    assert_eq!(no_token.status(), 401);
}
