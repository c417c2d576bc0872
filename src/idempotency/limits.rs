//! The idempotency store's settings, apart from the store: the configuration
//! names them, and the store (through its runs) depends on the attempt loop,
//! which depends on the configuration.

use std::time::Duration;

/// How long kept results live, and how many a memory store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `LADLE_IDEMPOTENCY_TTL_MS`.
    pub ttl: Duration,
    /// `LADLE_IDEMPOTENCY_MAX_ENTRIES`.
    pub max_entries: usize,
    /// `LADLE_IDEMPOTENCY_MAX_BYTES`: kept bodies in memory, all together.
    pub max_bytes: usize,
}
