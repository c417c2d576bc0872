//! The settings of background jobs and their webhooks (contract 7.1, 7.2).

use std::path::PathBuf;
use std::time::Duration;

use super::ConfigError;
use super::settings::{Millis, Sources, invalid};
use crate::jobs::settings::{RunnerSettings, StreamSettings};
use crate::jobs::webhooks::WebhookSettings;
use crate::jobs::webhooks::sign::SigningKey;

/// Where jobs live and how they run.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// `LADLE_STATE_DB`: the SQLite file (or `:memory:`) without Redis.
    pub state_db: PathBuf,
    /// How this replica runs jobs.
    pub runner: RunnerSettings,
    /// `LADLE_JOB_MAX_QUEUED`: unfinished jobs before a submit is refused.
    pub max_queued: u64,
    /// `LADLE_STATE_MAX_BYTES`: the state file's size past which submits are
    /// refused.
    pub state_max_bytes: u64,
    /// Deliveries of finished jobs, when `LADLE_JOB_WEBHOOK_URL` is set.
    pub webhook: Option<WebhookSettings>,
    /// Jobs' event streams (contract 11).
    pub streams: StreamSettings,
}

/// The jobs' settings, each checked.
pub fn load(src: &Sources<'_>, lease: Duration) -> Result<JobSettings, ConfigError> {
    let runner = RunnerSettings {
        concurrency: src.get("LADLE_JOB_CONCURRENCY")?,
        max_runs: src.get("LADLE_JOB_MAX_RUNS")?,
        retry: src.get::<Millis>("LADLE_JOB_RETRY_MS")?.0,
        ttl: src.get::<Millis>("LADLE_JOB_TTL_MS")?.0,
        lease,
        tick: Duration::from_millis(100),
        account_every: Duration::from_secs(1),
        max_waiters: src.get("LADLE_MAX_WAITERS")?,
    };
    for (key, value) in [
        ("LADLE_JOB_CONCURRENCY", runner.concurrency as u64),
        ("LADLE_JOB_MAX_RUNS", u64::from(runner.max_runs)),
    ] {
        if value == 0 {
            return Err(invalid(key, "must be at least 1"));
        }
    }
    let max_queued: u64 = src.get("LADLE_JOB_MAX_QUEUED")?;
    let state_max_bytes: u64 = src.get("LADLE_STATE_MAX_BYTES")?;
    for (key, value) in [
        ("LADLE_JOB_MAX_QUEUED", max_queued),
        ("LADLE_STATE_MAX_BYTES", state_max_bytes),
        ("LADLE_MAX_WAITERS", runner.max_waiters as u64),
    ] {
        if value == 0 {
            return Err(invalid(key, "must be at least 1"));
        }
    }
    Ok(JobSettings {
        state_db: src.get("LADLE_STATE_DB")?,
        runner,
        max_queued,
        state_max_bytes,
        webhook: webhook(src)?,
        streams: streams(src)?,
    })
}

fn streams(src: &Sources<'_>) -> Result<StreamSettings, ConfigError> {
    let max_bytes: u64 = src.get("LADLE_STREAM_MAX_BYTES")?;
    if max_bytes == 0 {
        return Err(invalid("LADLE_STREAM_MAX_BYTES", "must be at least 1"));
    }
    let Millis(progress) = src.get("LADLE_STREAM_PROGRESS_MS")?;
    let Millis(stall) = src.get("LADLE_STREAM_STALL_MS")?;
    if stall < Duration::from_millis(100) {
        return Err(invalid("LADLE_STREAM_STALL_MS", "must be at least 100"));
    }
    Ok(StreamSettings {
        stall,
        ttl: src.get::<Millis>("LADLE_STREAM_TTL_MS")?.0,
        max_bytes,
        progress: (!progress.is_zero()).then_some(progress),
    })
}

fn webhook(src: &Sources<'_>) -> Result<Option<WebhookSettings>, ConfigError> {
    let secret = src.optional::<String>("LADLE_JOB_WEBHOOK_SECRET")?;
    let key = secret
        .as_deref()
        .map(SigningKey::parse)
        .transpose()
        .map_err(|why| invalid("LADLE_JOB_WEBHOOK_SECRET", why))?;
    let Millis(backoff) = src.get("LADLE_JOB_WEBHOOK_BACKOFF_MS")?;
    let attempts: u32 = src.get("LADLE_JOB_WEBHOOK_ATTEMPTS")?;
    let concurrency: usize = src.get("LADLE_JOB_WEBHOOK_CONCURRENCY")?;
    for (key, value) in [
        ("LADLE_JOB_WEBHOOK_ATTEMPTS", attempts as usize),
        ("LADLE_JOB_WEBHOOK_CONCURRENCY", concurrency),
    ] {
        if value == 0 {
            return Err(invalid(key, "must be at least 1"));
        }
    }
    let Some(url) = src.optional::<String>("LADLE_JOB_WEBHOOK_URL")? else {
        return Ok(None);
    };
    // The URL is not echoed: its query may hold a receiver's token.
    let parsed = url::Url::parse(url.trim())
        .map_err(|_| invalid("LADLE_JOB_WEBHOOK_URL", "is not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(invalid(
            "LADLE_JOB_WEBHOOK_URL",
            "must be an http:// or https:// URL with a host",
        ));
    }
    Ok(Some(WebhookSettings {
        url: parsed.to_string(),
        key,
        backoff,
        attempts,
        concurrency,
    }))
}
