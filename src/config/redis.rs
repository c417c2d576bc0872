//! `LADLE_REDIS_URL` / `LADLE_REDIS_PREFIX` (contract 6.7): where replicas share
//! prompts, idempotency records and retry budgets.

use std::time::Duration;

use super::settings::{Millis, Sources, invalid};
use super::{ConfigError, Secret};

/// How to reach the fleet's Redis.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://[:password@]host:port[/db]`; a secret, since it may hold a password.
    pub url: Secret,
    /// Prefix of every key ladle writes (`LADLE_REDIS_PREFIX`, default `ladle:`).
    pub prefix: String,
    /// How long an idempotency claim outlives the last sign of life of the replica
    /// running it (not in the contract; `LADLE_REDIS_LEASE_MS`, default 10000).
    pub lease: Duration,
}

/// The Redis settings, or `None` without `LADLE_REDIS_URL`.
pub fn load(src: &Sources<'_>) -> Result<Option<RedisSettings>, ConfigError> {
    let prefix: String = src.get("LADLE_REDIS_PREFIX")?;
    let Millis(lease) = src.get("LADLE_REDIS_LEASE_MS")?;
    let Some(url) = src.optional::<String>("LADLE_REDIS_URL")? else {
        return Ok(None);
    };
    // The parser's own message may quote the URL, password included: say what is
    // expected instead.
    if ::redis::IntoConnectionInfo::into_connection_info(url.trim()).is_err()
        || !url.trim().starts_with("redis://")
    {
        return Err(invalid(
            "LADLE_REDIS_URL",
            "must look like redis://[:password@]host:port[/db]",
        ));
    }
    if lease < Duration::from_millis(300) {
        return Err(invalid("LADLE_REDIS_LEASE_MS", "must be at least 300"));
    }
    if prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            "LADLE_REDIS_PREFIX",
            "must not contain spaces or control characters",
        ));
    }
    Ok(Some(RedisSettings {
        url: Secret::new(url.trim()),
        prefix,
        lease,
    }))
}
