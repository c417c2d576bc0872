//! A store that is down, as the client hears it: `503 store_unavailable`
//! (retryable; nothing was accepted that could not be kept).

use super::ApiError;
use crate::store_down::StoreDown;

impl From<StoreDown> for ApiError {
    /// Logs what failed (the client is told only that the store is
    /// unavailable, and an operator needs the operation and its cause).
    fn from(down: StoreDown) -> ApiError {
        tracing::warn!(op = down.op, error = %down.cause, "a store was unavailable");
        ApiError::StoreUnavailable
    }
}
