//! Wall-clock time, for what outlives a process or crosses replicas (job and
//! prompt times, budget buckets): Unix milliseconds and RFC 3339. Durations and
//! deadlines are `tokio::time::Instant`'s, never these.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: replicas on different hosts agree on it well
/// enough for one-second buckets, version times and job times.
pub fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// Seconds since the Unix epoch: OpenAI's `created`.
pub fn unix_seconds() -> u64 {
    unix_millis() / 1000
}

/// Milliseconds since the epoch as RFC 3339 UTC, to the millisecond.
pub fn rfc3339(millis: u64) -> String {
    let when = UNIX_EPOCH + Duration::from_millis(millis);
    humantime::format_rfc3339_millis(when).to_string()
}
