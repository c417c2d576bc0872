//! The sender: every tick, the deliveries that are due, a batch of
//! `LADLE_JOB_WEBHOOK_CONCURRENCY` at a time (each held meanwhile, so no other
//! sender makes it too), each `POST`ed once: a `2xx` within 10 s is delivered,
//! anything else is tried again after its back-off. Sockets and memory are
//! bounded by the batch: a backlog of thousands is worked off, never loaded or
//! sent whole. Its client is reqwest, as the upstream's is, with no redirects
//! and no retries of its own.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderValue};

use super::{WebhookSettings, body};
use crate::background::{Background, Continue};
use crate::engine::metrics::Metrics;
use crate::jobs::{DeliveryStatus, Job, JobStore};
use crate::wall::unix_millis;

/// How long an attempt may take before it counts as failed.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a sender holds a delivery it took: longer than any attempt.
const HOLD: Duration = Duration::from_secs(15);

/// Sends due deliveries every `tick` until shutdown.
pub fn start(
    store: Arc<dyn JobStore>,
    settings: WebhookSettings,
    metrics: Metrics,
    tick: Duration,
    background: &Background,
) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .timeout(ATTEMPT_TIMEOUT)
        .build()
        .map_err(|_| "the webhook client cannot be built".to_owned())?;
    let settings = Arc::new(settings);
    let stopping = background.stopping();
    background.every(tick, None, move || {
        let (store, settings, metrics, client, stopping) = (
            store.clone(),
            settings.clone(),
            metrics.clone(),
            client.clone(),
            stopping.clone(),
        );
        async move {
            // A batch at once, not one after another: each was held for `HOLD`
            // when it was taken, and ten slow receivers in a row would outlast
            // it; the next batch is taken when this one is done.
            let most = settings.concurrency;
            while let Ok(due) = store.due_deliveries(unix_millis(), HOLD, most).await {
                let taken = due.len();
                let attempts = due
                    .into_iter()
                    .map(|job| attempt(&store, &settings, &metrics, &client, job));
                futures_util::future::join_all(attempts).await;
                // A backlog is left for the next process at shutdown.
                if taken < most || stopping.is_cancelled() {
                    break;
                }
            }
            Continue::Yes
        }
    });
    Ok(())
}

/// One attempt of one delivery, and its result written back.
async fn attempt(
    store: &Arc<dyn JobStore>,
    settings: &WebhookSettings,
    metrics: &Metrics,
    client: &reqwest::Client,
    job: Job,
) {
    let Some(delivery) = job.delivery.clone() else {
        return;
    };
    let payload = body(&job, &delivery).to_string();
    let timestamp = unix_millis() / 1_000;
    let mut request = client
        .post(&settings.url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header("webhook-id", &delivery.id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(key) = &settings.key {
        let mut signature =
            HeaderValue::from_str(&key.sign(&delivery.id, timestamp, payload.as_bytes()))
                .unwrap_or(HeaderValue::from_static(""));
        signature.set_sensitive(true);
        request = request.header("webhook-signature", signature);
    }
    let answered = request.body(payload).send().await;
    let status = answered.as_ref().ok().map(|r| r.status().as_u16());
    let delivered = status.is_some_and(|s| (200..300).contains(&s));
    let after = settings.after_attempt(delivery, delivered, unix_millis());
    tracing::info!(
        job_id = %job.id,
        webhook_id = %after.id,
        status = status.map_or_else(|| "error".to_owned(), |s| s.to_string()),
        attempt = after.attempts,
        "webhook attempt"
    );
    let outcome = match after.status {
        DeliveryStatus::Pending => "retry",
        done => done.name(),
    };
    metrics.webhook(outcome);
    // Unreachable: the delivery's hold runs out and it is made again.
    let _ = store.delivered(&job.id, after).await;
}
