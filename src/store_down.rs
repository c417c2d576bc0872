//! What a store says when it could not do what was asked: the job store, the
//! job event log and the answer cache, on the state file or on the fleet's
//! Redis. One type, so `error/` maps it to the contract's `503
//! store_unavailable` in one place, and every log line names the operation and
//! the cause alike. Neither holds a password.

/// A store's operation that failed, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the store could not {op}: {cause}")]
pub struct StoreDown {
    /// The operation (`submit`, `claim`, `cache_get`, …).
    pub op: &'static str,
    /// Why.
    pub cause: Cause,
}

impl StoreDown {
    /// `op` failed for `cause`.
    pub fn new(op: &'static str, cause: Cause) -> StoreDown {
        StoreDown { op, cause }
    }
}

/// Why a store's operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cause {
    /// A recent Redis call failed: it is not asked again for a moment, so an
    /// outage answers at once instead of after a timeout.
    #[error("redis is unreachable")]
    Unreachable,
    /// Redis answered with an error, the connection failed, or no answer came
    /// in time.
    #[error("{0}")]
    Redis(String),
    /// The state file failed the call or its transaction (SQLite's code).
    #[error("the state file: {0}")]
    File(String),
    /// The state file's writer thread has stopped.
    #[error("the state thread has stopped")]
    Stopped,
    /// A record could not be written as JSON.
    #[error("cannot encode {0}")]
    Encode(String),
    /// The fleet's epoch moved twice during one submit (Redis forgot its data
    /// twice in a row).
    #[error("the fleet's epoch changed twice during one submit")]
    EpochMoved,
}
