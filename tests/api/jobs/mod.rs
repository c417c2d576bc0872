//! Background jobs and webhooks (contract 7.1, 7.2) on one gateway with its
//! SQLite store: the API, runs and their outcomes, the real file across a SIGKILL
//! and a restart, and deliveries to a real HTTP receiver.

mod api;
mod durability;
mod event_cursors;
pub mod events;
mod full_disk;
mod pacing;
mod poison;
mod replicas;
mod runs;
mod state_file;
mod waiting;
mod webhooks;

use serde_json::{Value, json};

use crate::support::*;

/// The fridge task's variables, named by `marker` (so the mock can tell jobs
/// apart by their request).
pub fn fridge(marker: &str) -> Value {
    json!({"ingredients": ["鸡蛋", marker]})
}

/// A fridge answer the task's `json` output accepts.
pub fn ideas() -> crate::support::mock_upstream::Script {
    crate::support::mock_upstream::sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])
}

/// Submits a fridge job (`?async=true`); the response.
pub async fn submit(endpoint: &Endpoint, marker: &str) -> reqwest::Response {
    endpoint
        .post("/v1/tasks/fridge?async=true", &fridge(marker))
        .await
}

/// The id of the job a `202` answered with.
pub async fn job_id(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 202);
    let job = json_of(response).await;
    job["id"].as_str().expect("an id").to_owned()
}

/// The job, waited for up to `wait_ms`.
pub async fn job_after(endpoint: &Endpoint, id: &str, wait_ms: u64) -> Value {
    let response = endpoint
        .get(&format!("/v1/jobs/{id}?wait_ms={wait_ms}"))
        .await;
    assert_eq!(response.status(), 200);
    json_of(response).await
}
