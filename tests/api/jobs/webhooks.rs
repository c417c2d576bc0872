//! Webhooks (contract 7.2) to a real HTTP receiver: signed as Standard Webhooks
//! says (checked here with `ring`, not the gateway's HMAC), retried with the same
//! `webhook-id`, failed after its last attempt, never a redirect followed; on the
//! real binary, a delivery not yet made survives a SIGKILL and the secret and
//! signatures never reach a log line.

use std::time::Duration;

use ladle::config::Config;
use ladle::jobs::webhooks::WebhookSettings;
use ladle::jobs::webhooks::sign::SigningKey;
use serde_json::{Value, json};

use super::{ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::receiver::{Received, Receiver, signature_holds};
use crate::support::*;

/// A secret of 32 bytes, as `whsec_` + base64.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw8H6LzPZ8W+s=";

/// Deliveries to `receiver`, signed with `SECRET`, `attempts` in all, the
/// back-off `backoff_ms`.
fn webhooks_to(
    receiver: &Receiver,
    attempts: u32,
    backoff_ms: u64,
) -> impl FnOnce(&mut Config) + Send + 'static {
    let url = receiver.url.clone();
    move |config| {
        config.jobs.webhook = Some(WebhookSettings {
            url,
            key: Some(SigningKey::parse(SECRET).expect("a good secret")),
            backoff: Duration::from_millis(backoff_ms),
            attempts,
            concurrency: 16,
        });
    }
}

/// A gateway in front of `upstream` whose webhooks go to a receiver answering
/// `statuses` in turn, `attempts` in all, `backoff_ms` apart.
async fn with_webhooks(
    upstream: &MockUpstream,
    statuses: &[u16],
    attempts: u32,
    backoff_ms: u64,
) -> (Receiver, Gateway) {
    let receiver = Receiver::start(statuses).await;
    let gateway = Gateway::options()
        .mock(upstream)
        .adjust(webhooks_to(&receiver, attempts, backoff_ms))
        .start()
        .await;
    (receiver, gateway)
}

/// One job, answered with `ideas`, submitted to a gateway as `with_webhooks`
/// sets up; the upstream (kept alive), receiver, gateway and job id.
async fn one_job(
    statuses: &[u16],
    attempts: u32,
    backoff_ms: u64,
) -> (MockUpstream, Receiver, Gateway, String) {
    let upstream = MockUpstream::start().await;
    upstream.push([ideas()]);
    let (receiver, gateway) = with_webhooks(&upstream, statuses, attempts, backoff_ms).await;
    let id = job_id(submit(&gateway, "x").await).await;
    (upstream, receiver, gateway, id)
}

/// Waits until the receiver has `count` deliveries; they.
async fn deliveries(receiver: &Receiver, count: usize) -> Vec<Received> {
    eventually(Duration::from_secs(5), "the deliveries", async || {
        let received = receiver.received();
        (received.len() >= count).then_some(received)
    })
    .await
}

/// `ladle_webhook_deliveries_total` for `outcome`.
async fn deliveries_counted(gateway: &Gateway, outcome: &str) -> f64 {
    let series = format!("ladle_webhook_deliveries_total{{outcome=\"{outcome}\"}}");
    gateway.metric(&series).await
}

/// The job once its webhook is `delivered` or `failed` (before it finishes, a job
/// has no `webhook` at all).
async fn webhook_settled(endpoint: &Endpoint, id: &str) -> Value {
    eventually(
        Duration::from_secs(5),
        "the webhook to settle",
        async || {
            let job = job_after(endpoint, id, 1).await;
            let settled = matches!(
                job["webhook"]["status"].as_str(),
                Some("delivered" | "failed")
            );
            settled.then_some(job)
        },
    )
    .await
}

#[tokio::test]
async fn a_finished_job_is_delivered_once_signed_with_the_job_as_get_shows_it() {
    let (_upstream, receiver, gateway, id) = one_job(&[200], 8, 50).await;
    let done = job_after(&gateway, &id, 3_000).await;
    assert_eq!(done["status"], "succeeded");

    let delivery = deliveries(&receiver, 1).await.remove(0);
    assert!(signature_holds(SECRET, &delivery), "{:?}", delivery.headers);
    assert!(
        !signature_holds("whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB", &delivery),
        "the check can fail"
    );
    assert_eq!(delivery.header("content-type"), "application/json");
    let sent_at: u64 = delivery
        .header("webhook-timestamp")
        .parse()
        .expect("Unix seconds");
    let now = ladle::wall::unix_millis() / 1_000;
    assert!(now.abs_diff(sent_at) <= 5, "{sent_at} vs {now}");
    let event = delivery.json();
    assert_eq!(event["type"], "job.succeeded");
    assert_eq!(
        event["data"]["webhook"],
        json!({"status": "pending", "attempts": 0})
    );
    let mut shown = webhook_settled(&gateway, &id).await;
    assert_eq!(
        shown["webhook"],
        json!({"status": "delivered", "attempts": 1})
    );
    shown["webhook"] = event["data"]["webhook"].clone();
    assert_eq!(event["data"], shown, "the job as GET shows it");
    assert_eq!(receiver.received().len(), 1, "once");
    assert_eq!(deliveries_counted(&gateway, "delivered").await, 1.0);
}

#[tokio::test]
async fn a_500_then_a_200_is_one_delivery_under_one_webhook_id_after_its_back_off() {
    let (_upstream, receiver, gateway, id) = one_job(&[500, 200], 8, 200).await;
    let job = webhook_settled(&gateway, &id).await;
    assert_eq!(
        job["webhook"],
        json!({"status": "delivered", "attempts": 2})
    );
    let [first, second] = <[Received; 2]>::try_from(receiver.received()).expect("two attempts");
    assert_eq!(first.header("webhook-id"), second.header("webhook-id"));
    assert!(
        second.at - first.at >= Duration::from_millis(200),
        "{:?}",
        second.at - first.at
    );
    assert!(first.header("webhook-id").starts_with("msg_"));
    assert_eq!(second.json()["data"]["webhook"]["attempts"], 1);
    assert!(signature_holds(SECRET, &second));
    assert_eq!(deliveries_counted(&gateway, "retry").await, 1.0);
    assert_eq!(deliveries_counted(&gateway, "delivered").await, 1.0);
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_last_attempt_fails_the_delivery_not_the_job() {
    let (_upstream, receiver, gateway, id) = one_job(&[302], 3, 20).await;
    let job = webhook_settled(&gateway, &id).await;
    assert_eq!(job["webhook"], json!({"status": "failed", "attempts": 3}));
    assert_eq!(job["status"], "succeeded", "the job keeps its own status");
    assert_eq!(
        receiver.received().len(),
        3,
        "three attempts, each answered 302 and not followed"
    );
    assert_eq!(deliveries_counted(&gateway, "failed").await, 1.0);
}

#[tokio::test]
async fn failed_and_canceled_jobs_are_delivered_as_such() {
    let upstream = MockUpstream::start().await;
    upstream.push([
        status(400, r#"{"error":{"message":"no"}}"#),
        sse(vec![Step::Stall]),
    ]);
    let (receiver, gateway) = with_webhooks(&upstream, &[200], 8, 50).await;
    let failed = job_id(submit(&gateway, "a").await).await;
    assert_eq!(
        job_after(&gateway, &failed, 3_000).await["status"],
        "failed"
    );
    let canceled = job_id(submit(&gateway, "b").await).await;
    eventually(
        Duration::from_secs(3),
        "the second job to run",
        async || (upstream.requests().len() == 2).then_some(()),
    )
    .await;
    assert_eq!(
        gateway
            .delete(&format!("/v1/jobs/{canceled}"))
            .await
            .status(),
        200
    );

    let received = deliveries(&receiver, 2).await;
    let types: Vec<(Value, Value)> = received
        .iter()
        .map(|d| d.json())
        .map(|e| (e["type"].clone(), e["data"]["id"].clone()))
        .collect();
    assert_eq!(
        types,
        [
            (json!("job.failed"), json!(failed)),
            (json!("job.canceled"), json!(canceled))
        ]
    );
    assert_eq!(
        received[0].json()["data"]["error"]["code"],
        "upstream_rejected"
    );
}

#[tokio::test]
async fn a_delivery_not_yet_made_survives_a_sigkill_and_no_secret_is_logged() {
    use crate::support::process::LadleProcess;
    let upstream = MockUpstream::start().await;
    upstream.push([ideas()]);
    // The first attempt hangs: the process dies before the delivery is made.
    let receiver = Receiver::start(&[0, 200]).await;
    let db = temp_dir("webhook-restart").join("state.db");
    let env = [
        ("LADLE_STATE_DB", db.to_str().expect("a UTF-8 path")),
        ("LADLE_JOB_WEBHOOK_URL", receiver.url.as_str()),
        ("LADLE_JOB_WEBHOOK_SECRET", SECRET),
        ("LADLE_JOB_WEBHOOK_BACKOFF_MS", "50"),
    ];
    let mut first = LadleProcess::start(&upstream.url, &env).await;
    let id = job_id(submit(&first, "x").await).await;
    deliveries(&receiver, 1).await;
    first.kill();

    let mut second = LadleProcess::start(&upstream.url, &env).await;
    let job = webhook_settled(&second, &id).await;
    assert_eq!(
        job["webhook"],
        json!({"status": "delivered", "attempts": 1})
    );
    let [cut, made] = <[Received; 2]>::try_from(receiver.received()).expect("two attempts");
    assert_eq!(
        cut.header("webhook-id"),
        made.header("webhook-id"),
        "the same delivery"
    );
    assert!(signature_holds(SECRET, &made));
    second.terminate();
    second.exited(Duration::from_secs(5)).await;

    let mut lines = first.all_lines();
    lines.extend(second.all_lines());
    let attempt = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "webhook attempt")
        .expect("a line per attempt");
    assert_eq!(attempt["job_id"], id.as_str());
    assert_eq!(attempt["webhook_id"], made.header("webhook-id").as_str());
    assert_eq!(
        (attempt["status"].as_str(), attempt["attempt"].as_u64()),
        (Some("200"), Some(1))
    );
    let secret_part = SECRET.trim_start_matches("whsec_");
    let signatures = [
        cut.header("webhook-signature"),
        made.header("webhook-signature"),
    ];
    for line in &lines {
        assert!(!line.contains(secret_part), "the secret in: {line}");
        for signature in &signatures {
            assert!(
                !line.contains(signature.trim_start_matches("v1,")),
                "a signature in: {line}"
            );
        }
    }
}
