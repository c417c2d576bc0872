//! Webhooks (contract 7.2): every job that finishes is delivered once to
//! `LADLE_JOB_WEBHOOK_URL`, signed as the Standard Webhooks specification says
//! (`sign`), retried with a doubling back-off, at least once: a delivery is part
//! of the job's record, so it survives a restart and any replica can make it
//! (`send`). The secret and the signature never reach a log line.

pub mod send;
pub mod sign;

use std::time::Duration;

use serde_json::{Value, json};

use super::{Delivery, DeliveryStatus, Job};
use crate::wall::rfc3339;

/// The longest back-off between two attempts of a delivery.
pub const MAX_BACKOFF: Duration = Duration::from_millis(600_000);

/// How a delivery is made.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// `LADLE_JOB_WEBHOOK_URL`.
    pub url: String,
    /// `LADLE_JOB_WEBHOOK_SECRET`, if deliveries are signed.
    pub key: Option<sign::SigningKey>,
    /// `LADLE_JOB_WEBHOOK_BACKOFF_MS`: before the second attempt; doubles after.
    pub backoff: Duration,
    /// `LADLE_JOB_WEBHOOK_ATTEMPTS`: attempts in all.
    pub attempts: u32,
    /// `LADLE_JOB_WEBHOOK_CONCURRENCY`: attempts in flight at once (and the
    /// deliveries loaded at once).
    pub concurrency: usize,
}

impl WebhookSettings {
    /// The wait after attempt `made` (1-based) failed.
    pub fn backoff_after(&self, made: u32) -> Duration {
        let doublings = made.saturating_sub(1).min(20);
        self.backoff
            .saturating_mul(1u32 << doublings)
            .min(MAX_BACKOFF)
    }

    /// The delivery after an attempt (its `made`-th) at `now`: delivered, due
    /// again after the back-off, or failed when it was the last.
    pub fn after_attempt(&self, mut delivery: Delivery, delivered: bool, now: u64) -> Delivery {
        delivery.attempts += 1;
        delivery.status = if delivered {
            DeliveryStatus::Delivered
        } else if delivery.attempts >= self.attempts {
            DeliveryStatus::Failed
        } else {
            delivery.next_at = now + self.backoff_after(delivery.attempts).as_millis() as u64;
            DeliveryStatus::Pending
        };
        delivery
    }
}

/// The body of a delivery: the event, and the job as `GET` shows it, with its
/// webhook still `pending` and the attempts made before this one.
pub fn body(job: &Job, delivery: &Delivery) -> Value {
    let mut data = job.view();
    data["webhook"] = json!({"status": "pending", "attempts": delivery.attempts});
    json!({
        "type": format!("job.{}", job.status.name()),
        "timestamp": rfc3339(job.updated_at),
        "data": data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(attempts: u32) -> WebhookSettings {
        WebhookSettings {
            url: "http://127.0.0.1:9/hook".into(),
            key: None,
            backoff: Duration::from_millis(1_000),
            attempts,
            concurrency: 16,
        }
    }

    #[test]
    fn the_default_attempts_keep_trying_for_over_an_hour() {
        let attempts: u32 = crate::config::settings::SETTINGS
            .iter()
            .find(|(name, _)| *name == "LADLE_JOB_WEBHOOK_ATTEMPTS")
            .and_then(|(_, default)| default.parse().ok())
            .expect("a default");
        let waits: Duration = (1..attempts)
            .map(|made| settings(attempts).backoff_after(made))
            .sum();
        assert!(waits >= Duration::from_secs(3_600), "{waits:?}");
    }

    #[test]
    fn back_offs_double_up_to_ten_minutes() {
        let waits: Vec<u64> = (1..=12)
            .map(|n| settings(8).backoff_after(n).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]);
    }

    #[test]
    fn a_delivery_is_retried_until_its_last_attempt_then_failed() {
        let settings = settings(3);
        let first = Delivery::pending(0);
        let after_one = settings.after_attempt(first.clone(), false, 10);
        assert_eq!(
            (
                after_one.status.name(),
                after_one.attempts,
                after_one.next_at
            ),
            ("pending", 1, 1_010)
        );
        let after_two = settings.after_attempt(after_one, false, 2_000);
        assert_eq!(
            (after_two.status.name(), after_two.next_at),
            ("pending", 4_000)
        );
        let after_three = settings.after_attempt(after_two, false, 5_000);
        assert_eq!(
            (after_three.status.name(), after_three.attempts),
            ("failed", 3)
        );
        let delivered = settings.after_attempt(first, true, 10);
        assert_eq!(
            (delivered.status.name(), delivered.attempts),
            ("delivered", 1)
        );
        assert_eq!(delivered.id.len(), "msg_".len() + 22);
    }
}
