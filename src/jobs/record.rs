//! A job as the store keeps it, and as the API shows it (contract 7.1). The parts
//! written to a store as JSON (`JobRequest`, `Delivery`) are their own small
//! versioned types, pinned by a test: a later build must read what an earlier one
//! wrote, in a file that outlives the process or a Redis shared by a fleet.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::wall::rfc3339;

/// The version of the stored JSON parts.
pub const VERSION: u8 = 1;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Waiting for a run.
    Queued,
    /// A run is in progress.
    Running,
    /// A run failed retryably; the next is due at `next_run_at`.
    RetryWait,
    /// A run answered `200`.
    Succeeded,
    /// Out of runs, or a final error.
    Failed,
    /// Canceled by its caller.
    Canceled,
}

impl JobStatus {
    /// Every status, in the order the gauge lists them.
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::RetryWait,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Canceled,
    ];

    /// The contract's name.
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::RetryWait => "retry_wait",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Canceled => "canceled",
        }
    }

    /// The status a name stands for.
    pub fn from_name(name: &str) -> Option<JobStatus> {
        JobStatus::ALL
            .into_iter()
            .find(|status| status.name() == name)
    }

    /// Whether the job is over (its webhook, if any, is due).
    pub fn finished(self) -> bool {
        matches!(
            self,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Canceled
        )
    }
}

/// What a run needs: the task request as it was submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRequest {
    /// The encoding's version.
    pub v: u8,
    /// The task's name.
    pub task: String,
    /// The template variables, as given.
    pub variables: Map<String, Value>,
    /// `X-Request-Timeout-Ms`, which shortens each run's deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The submit's `Cache-Control`, for each run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// For a background response (contract 12, task `responses`): its chat
    /// body, and what its object says of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
}

impl JobRequest {
    /// What a finished job keeps of its request: the task and settings, not the
    /// variables (which only a run needs).
    pub fn facts(&self) -> JobRequest {
        JobRequest {
            variables: Map::new(),
            ..self.clone()
        }
    }
}

/// Where a delivery is (stored by these names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not made yet: an attempt is due at `next_at`.
    Pending,
    /// A receiver answered `2xx`.
    Delivered,
    /// Every attempt failed.
    Failed,
}

impl DeliveryStatus {
    /// The name the API and the metrics use.
    pub fn name(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }
}

/// A finished job's webhook delivery (contract 7.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The encoding's version.
    pub v: u8,
    /// `webhook-id`: the same on every attempt of this delivery.
    pub id: String,
    /// Where it is.
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (Unix ms), while pending.
    pub next_at: u64,
}

impl Delivery {
    /// The same delivery (its `webhook-id` kept) due again at `now`, with a whole
    /// new round of attempts.
    pub fn redrive(&mut self, now: u64) {
        self.status = DeliveryStatus::Pending;
        self.attempts = 0;
        self.next_at = now;
    }

    /// A delivery due at `now`, not tried yet.
    pub fn pending(now: u64) -> Delivery {
        Delivery {
            v: VERSION,
            id: format!("msg_{}", &super::ids::fresh()["job_".len()..]),
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_at: now,
        }
    }
}

/// A submit's `Idempotency-Key`, written with its job in one commit, so that a
/// resubmit after any crash finds the job the `202` (received or not) was about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitKey {
    /// The key, scoped to its client key (`idempotency::scoped`).
    pub key: String,
    /// What the submit asked (`idempotency::fingerprint`).
    pub fingerprint: u64,
    /// Until when it is kept (Unix ms): `LADLE_IDEMPOTENCY_TTL_MS` on.
    pub until: u64,
}

/// A job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// `job_` and 22 characters of `[A-Za-z0-9]` from 122 random bits.
    pub id: String,
    /// The client key's name that submitted it (empty without client keys).
    pub client: String,
    /// Where it is.
    pub status: JobStatus,
    /// Runs started so far.
    pub runs: u32,
    /// Unix ms.
    pub created_at: u64,
    /// Unix ms of the last change of status.
    pub updated_at: u64,
    /// While `retry_wait`: when the next run is due (Unix ms).
    pub next_run_at: Option<u64>,
    /// The request its runs make.
    pub request: JobRequest,
    /// When `succeeded`: the task's `200` body.
    pub result: Option<Value>,
    /// When `failed`: the `error` object of the last run's error body.
    pub error: Option<Value>,
    /// Once finished, with webhooks on: its delivery.
    pub delivery: Option<Delivery>,
    /// The request id of its current (or last) run.
    pub run_id: Option<String>,
    /// The submit's idempotency key, written with it (never read back with it).
    pub key: Option<SubmitKey>,
    /// The id of its final `job` event (contract 11.2), once that was made: a
    /// reader whose events are gone gets that event with it.
    pub final_event: Option<String>,
}

impl Job {
    /// A new queued job for `request`, created at `now`.
    pub fn queued(request: JobRequest, client: &str, now: u64) -> Job {
        Job {
            id: super::ids::fresh(),
            client: client.to_owned(),
            status: JobStatus::Queued,
            runs: 0,
            created_at: now,
            updated_at: now,
            next_run_at: None,
            request,
            result: None,
            error: None,
            delivery: None,
            run_id: None,
            key: None,
            final_event: None,
        }
    }

    /// The job as every answer of the API shows it.
    pub fn view(&self) -> Value {
        let mut view = json!({
            "id": self.id,
            "object": "job",
            "task": self.request.task,
            "status": self.status.name(),
            "runs": self.runs,
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
        });
        if let (JobStatus::RetryWait, Some(at)) = (self.status, self.next_run_at) {
            view["next_run_at"] = rfc3339(at).into();
        }
        if let (JobStatus::Succeeded, Some(result)) = (self.status, &self.result) {
            view["result"] = result.clone();
        }
        if let (JobStatus::Failed, Some(error)) = (self.status, &self.error) {
            view["error"] = error.clone();
        }
        if let Some(delivery) = &self.delivery {
            view["webhook"] =
                json!({"status": delivery.status.name(), "attempts": delivery.attempts});
        }
        view
    }
}

/// Whether `id` has the shape of a job id (anything else is not looked up).
pub use super::ids::plausible_id;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_parts_are_pinned() {
        let request = JobRequest {
            v: VERSION,
            task: "recipe".into(),
            variables: Map::from_iter([("dish".to_owned(), json!("宫保鸡丁"))]),
            timeout_ms: Some(90_000),
            cache_control: None,
            response: None,
        };
        assert_eq!(
            serde_json::to_string(&request).expect("encodes"),
            r#"{"v":1,"task":"recipe","variables":{"dish":"宫保鸡丁"},"timeout_ms":90000}"#
        );
        let delivery: Delivery = serde_json::from_str(
            r#"{"v":1,"id":"msg_x","status":"pending","attempts":2,"next_at":5}"#,
        )
        .expect("decodes");
        assert_eq!((delivery.attempts, delivery.next_at), (2, 5));
    }

    #[test]
    fn ids_are_job_and_22_alphanumerics_and_differ() {
        let request = JobRequest {
            v: VERSION,
            task: "t".into(),
            variables: Map::new(),
            timeout_ms: None,
            cache_control: None,
            response: None,
        };
        let (a, b) = (
            Job::queued(request.clone(), "", 0),
            Job::queued(request, "", 0),
        );
        assert!(
            plausible_id(&a.id) && plausible_id(&b.id),
            "{} {}",
            a.id,
            b.id
        );
        assert_ne!(a.id, b.id);
        assert!(!plausible_id("job_../../etc") && !plausible_id("job_short"));
    }

    #[test]
    fn a_view_shows_what_its_status_has() {
        let request = JobRequest {
            v: VERSION,
            task: "recipe".into(),
            variables: Map::new(),
            timeout_ms: None,
            cache_control: None,
            response: None,
        };
        let mut job = Job::queued(request, "", 1_700_000_000_000);
        job.status = JobStatus::RetryWait;
        job.next_run_at = Some(1_700_000_300_000);
        job.result = Some(json!({"never": "shown"}));
        let view = job.view();
        assert_eq!(view["status"], "retry_wait");
        assert_eq!(view["next_run_at"], "2023-11-14T22:18:20.000Z");
        assert!(view.get("result").is_none() && view.get("webhook").is_none());
        assert_eq!(view["created_at"], "2023-11-14T22:13:20.000Z");
    }
}
