//! `GET /admin/status`: the live view an operator would rather look at than
//! read `/metrics` (issue 23): per upstream its breaker, attempts in flight and
//! the last ones' outcomes and times to first output; the job queue by status;
//! the answers each caching task keeps. A ladle addition beside the contract's
//! admin routes, under the same token.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::auth::Admin;
use crate::engine::completion::recent::KEPT;
use crate::state::AppState;
use crate::wall::unix_millis;

/// The status as JSON. A store that cannot be reached (Redis) is reported in
/// its own part, never as the whole answer's error: the panel is for bad days.
pub async fn status(_: Admin, State(app): State<AppState>) -> Json<Value> {
    Json(json!({
        "upstreams": upstreams(&app),
        "jobs": jobs(&app).await,
        "cache": cache(&app).await,
        "webhooks": webhooks(&app).await,
        "kept_attempts": KEPT,
    }))
}

fn upstreams(app: &AppState) -> Vec<Value> {
    let shared = &app.upstreams;
    let now = Instant::now();
    shared
        .upstreams
        .iter()
        .enumerate()
        .map(|(index, upstream)| {
            let guards = &shared.guards[index];
            let summary = guards.recent.summary();
            let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
            for outcome in &summary.outcomes {
                *outcomes.entry(outcome.name()).or_default() += 1;
            }
            let last: Vec<&str> = summary
                .outcomes
                .iter()
                .rev()
                .take(20)
                .map(|o| o.name())
                .collect();
            json!({
                "name": upstream.name,
                "breaker": shared.breaker_state(index, now).map(|s| s.name()),
                "inflight": summary.inflight,
                "max_inflight": guards.bulkhead.as_ref().map(|b| b.limit()),
                "recent": {
                    "attempts": summary.outcomes.len(),
                    "outcomes": outcomes,
                    "last": last,
                },
                "first_output_ms": {
                    "p50": summary.first_output_p50_ms,
                    "p95": summary.first_output_p95_ms,
                },
            })
        })
        .collect()
}

async fn jobs(app: &AppState) -> Value {
    match app.jobs.store().counts().await {
        Ok(counts) => json!({
            "queued": counts.queued,
            "running": counts.running,
            "retry_wait": counts.retry_wait,
            "oldest_queued_age_ms": counts.oldest_queued.map(|at| unix_millis().saturating_sub(at)),
        }),
        Err(_) => json!({"error": "store_unavailable"}),
    }
}

/// The most failed deliveries the panel lists (the newest first).
const FAILED_LISTED: usize = 20;

/// The newest failed webhook deliveries, each redriven with its job's
/// `POST /admin/jobs/{id}/redeliver`.
async fn webhooks(app: &AppState) -> Value {
    match app.jobs.store().failed_deliveries(FAILED_LISTED).await {
        Ok(jobs) => {
            let failed: Vec<Value> = jobs
                .iter()
                .filter_map(|job| {
                    let delivery = job.delivery.as_ref()?;
                    Some(json!({
                        "job_id": job.id,
                        "task": job.request.task,
                        "webhook_id": delivery.id,
                        "attempts": delivery.attempts,
                    }))
                })
                .collect();
            json!({ "failed": failed })
        }
        Err(_) => json!({"error": "store_unavailable"}),
    }
}

async fn cache(app: &AppState) -> Value {
    let mut tasks = Vec::new();
    for (prompt, _) in app.prompts.list() {
        if !prompt.cache.on() {
            continue;
        }
        let entries = app.cache.count(&prompt.name).await.ok();
        tasks.push(json!({"task": prompt.name, "entries": entries}));
    }
    json!({ "tasks": tasks })
}
