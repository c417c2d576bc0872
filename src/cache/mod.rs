//! The answer cache (contract 7.3): a task's `200` answers kept, keyed by the task
//! and what it asks the upstream, and served again while young enough, or instead
//! of a run's retryable error while not too old.
//!
//! `serve` wraps a task's completion: it looks the answer up, answers a hit without
//! making the completion at all, keeps a new answer, and gives a stale one instead
//! of a retryable error. The kept answers live in the state file (`sqlite`) or,
//! for a fleet, in Redis (`redis`). A store that cannot be reached makes every
//! lookup a miss and every keep a no-op: the cache never turns into an error.

pub mod record;
pub mod redis;
pub mod serve;
pub mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;

use crate::store_down::StoreDown;

pub use record::Kept;

/// The largest kept answer (its stored encoding): a larger one is answered but not
/// kept.
pub const MAX_KEPT_BYTES: usize = 1 << 20;

/// A prompt's `[cache]` table: how long its answers serve (both 0, the default,
/// is off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachePolicy {
    /// `ttl_ms`: a kept answer this young answers without an upstream call.
    #[serde(default)]
    pub ttl_ms: u64,
    /// `stale_if_error_ms`: when a run fails retryably, a kept answer this young
    /// answers instead.
    #[serde(default)]
    pub stale_if_error_ms: u64,
    /// `per_client`: each client key has answers of its own (by default a kept
    /// answer serves every caller that asks the same, and its `cached_at` tells
    /// one caller when another asked).
    #[serde(default)]
    pub per_client: bool,
}

impl CachePolicy {
    /// Whether the task's answers are kept at all.
    pub fn on(self) -> bool {
        self.ttl_ms > 0 || self.stale_if_error_ms > 0
    }

    /// How long a kept answer is of any use: the store may forget it after this.
    pub fn longest(self) -> Duration {
        Duration::from_millis(self.ttl_ms.max(self.stale_if_error_ms))
    }
}

/// What the request's `Cache-Control` asks of the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheControl {
    /// `no-cache`: no hit (the answer is still kept, and stale still applies).
    pub no_cache: bool,
    /// `no-store`: the cache is neither read nor written.
    pub no_store: bool,
}

impl CacheControl {
    /// The directives of a `Cache-Control` value (RFC 9111: comma-separated,
    /// case-insensitive; the others mean nothing to ladle).
    pub fn parse(header: Option<&str>) -> CacheControl {
        let mut control = CacheControl::default();
        for directive in header.unwrap_or_default().split(',') {
            let name = directive.split('=').next().unwrap_or_default().trim();
            if name.eq_ignore_ascii_case("no-cache") {
                control.no_cache = true;
            } else if name.eq_ignore_ascii_case("no-store") {
                control.no_store = true;
            }
        }
        control
    }
}

/// What a kept answer is kept under: the task and what it asks the upstream (the
/// rendered messages and params, and the model named) and what shapes the answer
/// after it (the prompt's `output` kind; the client key with `per_client`), hashed with XXH3-128, whose
/// output its specification fixes; the request itself is kept beside the answer
/// and compared, so a collision cannot serve another dish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerKey {
    /// The task.
    pub task: String,
    /// 32 hex digits.
    pub hash: String,
    /// What the task asks: the task's and the model's names and the shaping,
    /// each after its length, then the params and messages as JSON text.
    pub request: String,
}

impl AnswerKey {
    /// The key of `task` asking `model` for `fields` (the params and messages as
    /// the upstream body has them), its answer shaped by `shaping` (the output
    /// kind, and the client key's name when answers are per client).
    pub fn new(task: &str, model: &str, shaping: &str, fields: &str) -> AnswerKey {
        // Lengths, not a JSON envelope: no name can run into the next, and the
        // fields (a recipe prompt's few KB) are not escaped again on every request.
        let request = format!(
            "{}:{task}{}:{model}{}:{shaping}{fields}",
            task.len(),
            model.len(),
            shaping.len()
        );
        let hash = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(request.as_bytes()));
        AnswerKey {
            task: task.to_owned(),
            hash,
            request,
        }
    }
}

/// Where kept answers live.
pub trait AnswerCache: Send + Sync {
    /// The answer kept under `key`, if its request is `key`'s.
    fn get<'a>(&'a self, key: &'a AnswerKey)
    -> BoxFuture<'a, Result<Option<Arc<Kept>>, StoreDown>>;

    /// Keeps `kept` under `key`, for at most `keep` (the least recently used go
    /// first past `LADLE_CACHE_MAX_ENTRIES`).
    fn put<'a>(
        &'a self,
        key: &'a AnswerKey,
        kept: &'a Kept,
        keep: Duration,
    ) -> BoxFuture<'a, Result<(), StoreDown>>;

    /// How many answers `task` has kept.
    fn count<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, StoreDown>>;

    /// Forgets every answer `task` kept: how many there were.
    fn forget<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, StoreDown>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_reads_its_two_directives_and_ignores_the_rest() {
        let read = |v: &str| CacheControl::parse(Some(v));
        assert_eq!(
            read("no-cache"),
            CacheControl {
                no_cache: true,
                no_store: false
            }
        );
        assert_eq!(
            read("max-age=0, No-Store"),
            CacheControl {
                no_cache: false,
                no_store: true
            }
        );
        assert_eq!(
            read("private,no-cache,no-store"),
            CacheControl {
                no_cache: true,
                no_store: true
            }
        );
        assert_eq!(CacheControl::parse(None), CacheControl::default());
    }

    #[test]
    fn the_key_changes_with_the_task_the_model_the_shaping_and_every_byte_asked() {
        let key = AnswerKey::new("recipe", "glm", "recipe", r#"{"messages":[1]}"#);
        assert_eq!(key.hash.len(), 32);
        assert_eq!(
            key,
            AnswerKey::new("recipe", "glm", "recipe", r#"{"messages":[1]}"#)
        );
        for other in [
            AnswerKey::new("fridge", "glm", "recipe", r#"{"messages":[1]}"#),
            AnswerKey::new("recipe", "qwen", "recipe", r#"{"messages":[1]}"#),
            AnswerKey::new("recipe", "glm", "text", r#"{"messages":[1]}"#),
            AnswerKey::new("recipe", "glm", "recipe a", r#"{"messages":[1]}"#),
            AnswerKey::new("recipe", "glm", "recipe", r#"{"messages":[2]}"#),
            // A name cannot run into the next part.
            AnswerKey::new("recipe1", "glm", "recipe", r#"{"messages":[1]}"#),
            AnswerKey::new("recipe", "glm{", "recipe", r#""messages":[1]}"#),
        ] {
            assert_ne!(key.hash, other.hash);
        }
    }

    #[test]
    fn the_key_hash_is_pinned() {
        // XXH3-128 is fixed by its specification: a later build finds what an
        // earlier one kept.
        let key = AnswerKey::new("recipe", "m", "recipe", "{}");
        assert_eq!(key.request, "6:recipe1:m6:recipe{}");
        assert_eq!(key.hash, PINNED_HASH);
    }

    const PINNED_HASH: &str = "989120b1e0ffff7d4729bba8230c4648";
}
