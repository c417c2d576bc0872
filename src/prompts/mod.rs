//! Tasks from operator-edited prompt templates.
//!
//! `spec` turns a TOML file into a checked, compiled prompt (pure); `render` binds a
//! caller's variables and renders messages (pure). The live prompts and their
//! history sit behind [`PromptStore`], with two variants: `files` (a folder, for
//! one replica) and `redis` (a fleet's shared copy).

pub mod files;
mod place;
pub mod redis;
pub mod render;
pub mod spec;

pub use self::files::FileStore;
pub use self::redis::RedisPrompts;
pub use crate::wall::rfc3339;
pub use spec::{Prompt, PromptError, valid_name};

use std::sync::Arc;

use crate::error::ApiError;
use crate::store_down::StoreDown;

/// One earlier version of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Version {
    /// Opaque id, used for rollback.
    pub version: String,
    /// The entity tag the version had.
    pub etag: String,
    /// When it was replaced, RFC 3339.
    pub saved_at: String,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such prompt or version.
    #[error("no prompt or version named `{0}`")]
    NotFound(String),
    /// The name does not match the contract's pattern.
    #[error("`{0}` is not a valid prompt name")]
    BadName(String),
    /// `If-Match` named another version.
    #[error("etag mismatch")]
    EtagMismatch,
    /// The text is not a usable prompt.
    #[error(transparent)]
    Invalid(#[from] PromptError),
    /// The file system failed.
    #[error("{0}")]
    Io(String),
    /// The shared store (Redis) did not answer.
    #[error(transparent)]
    Unavailable(#[from] StoreDown),
}

/// The outcome of a save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// Whether the prompt did not exist before.
    pub created: bool,
    /// The new entity tag.
    pub etag: String,
}

/// Prompts by name, and their history.
pub trait PromptStore: Send + Sync {
    /// The live version of a prompt.
    fn get(&self, name: &str) -> Option<Arc<Prompt>>;
    /// All live prompts, by name, with when each last changed (RFC 3339).
    fn list(&self) -> Vec<(Arc<Prompt>, String)>;
    /// Files that failed to load, with the reason.
    fn broken(&self) -> Vec<(String, String)>;
    /// Validates and saves a prompt; `if_match` must name the live version.
    fn save(&self, name: &str, text: &str, if_match: Option<&str>) -> Result<Saved, StoreError>;
    /// Deletes a prompt, keeping it in history.
    fn delete(&self, name: &str, if_match: Option<&str>) -> Result<(), StoreError>;
    /// Earlier versions, newest first.
    fn history(&self, name: &str) -> Result<Vec<Version>, StoreError>;
    /// Makes an earlier version current.
    fn rollback(&self, name: &str, version: &str) -> Result<Saved, StoreError>;
    /// Looks at the backing storage again.
    fn refresh(&self);

    /// Why the store's folder could not be listed at its last reload, while
    /// that lasts (the prompts read before stay live).
    fn folder_unreadable(&self) -> Option<String> {
        None
    }
}

/// A prompt error as the admin API answers it, with its place in the file.
impl From<PromptError> for ApiError {
    fn from(error: PromptError) -> Self {
        ApiError::InvalidPrompt {
            message: error.message,
            line: error.line,
            column: error.column,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(what) => {
                ApiError::NotFound(format!("no prompt or version named `{what}`"))
            }
            StoreError::BadName(name) => {
                ApiError::InvalidRequest(format!("`{name}` is not a valid prompt name"))
            }
            StoreError::EtagMismatch => ApiError::EtagMismatch,
            StoreError::Invalid(error) => error.into(),
            StoreError::Io(problem) => {
                // The operator's log has the details; a client never sees a path.
                tracing::warn!(%problem, "the prompt store failed");
                ApiError::Storage("the prompts folder could not be read or written".into())
            }
            StoreError::Unavailable(down) => down.into(),
        }
    }
}

#[cfg(test)]
mod tests;
