//! Idempotency keys (contract 6.6): a request with `Idempotency-Key: K` runs once;
//! a repeat of it gets the kept result, or waits for the run in progress; another
//! request under the same key is refused. The records sit behind
//! [`IdempotencyStore`], with two variants: `memory` (one replica's) and `redis`
//! (a fleet's, with memory while Redis is away).

pub mod limits;
mod memory;
mod record;
mod redis;
mod run;

pub use self::limits::Limits;
pub use self::memory::MemoryStore;
pub use self::record::Kept;
pub use self::redis::RedisIdempotency;
pub use self::run::detached;

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::time::Instant;

use crate::error::ApiError;

/// How a run ended, for the requests that waited on it: what it kept, or the
/// error and how many attempts the run made (for `x-should-retry`).
pub type Outcome = Result<Arc<Kept>, (ApiError, u32)>;

/// What a request with a key finds.
pub enum Lookup {
    /// Nothing usable: this request runs, and reports through the slot.
    Run(Box<dyn RunSlot>),
    /// A kept success of the same request: answer with it, no upstream call.
    Kept(Arc<Kept>),
    /// The same request is running: its outcome, when it comes (`None` if the run
    /// was dropped).
    Wait(BoxFuture<'static, Option<Outcome>>),
    /// The key is kept or running for another request.
    Reused,
}

/// Where a run reports its outcome. Reports are futures, so that a shared store
/// can write them out; the run's own task awaits them. A slot dropped without a
/// report (the run ended with no one waiting) frees its key.
pub trait RunSlot: Send {
    /// A complete success: kept for the TTL, and given to the waiters.
    fn succeed(self: Box<Self>, body: Arc<Kept>) -> BoxFuture<'static, ()>;
    /// A failure after `attempts` attempts: not kept (the next repeat runs anew);
    /// given to the waiters.
    fn fail(self: Box<Self>, error: ApiError, attempts: u32) -> BoxFuture<'static, ()>;
    /// Resolves once no other request waits on this run.
    fn unwatched(&self) -> BoxFuture<'static, ()>;
}

/// The records of idempotency keys.
pub trait IdempotencyStore: Send + Sync {
    /// Looks `key` up for a request with `fingerprint`, claiming it if unused.
    /// A shared store's calls end well before the request's `deadline` (the
    /// lookup within half of what is left), deciding alone if its backend is slow.
    fn begin<'a>(
        &'a self,
        key: &'a str,
        fingerprint: u64,
        now: Instant,
        deadline: Instant,
    ) -> BoxFuture<'a, Lookup>;

    /// Starts what the store keeps up beside the requests (a shared store's
    /// renewal of its claims); nothing for one in memory.
    fn start(&self, _background: &crate::background::Background) {}
}

/// The largest result kept for a key (its encoding's bytes, in memory or in
/// Redis); a larger success is answered but not kept.
pub const MAX_KEPT_BYTES: usize = 1 << 20;

/// The longest key.
const MAX_KEY: usize = 255;

/// A key of 1–255 visible ASCII characters (`0x21`–`0x7E`).
pub fn valid_key(key: &[u8]) -> bool {
    (1..=MAX_KEY).contains(&key.len()) && key.iter().all(|b| (0x21..=0x7e).contains(b))
}

/// The key a client's `Idempotency-Key` is kept under: the same key from two
/// clients is two records (contract 8). Without client keys the client is `""`
/// and the key is kept as given. A client's name has no `:`, so no two clients'
/// keys meet.
pub fn scoped(client: &str, key: &str) -> String {
    match client {
        "" => key.to_owned(),
        client => format!("{client}:{key}"),
    }
}

/// What names one request: its path (task name included) and its body as JSON,
/// object keys in any order; `without_stream` leaves chat's top-level `stream` out
/// (a task's variable of that name counts). XXH3, whose output its specification
/// fixes: replicas of different builds (a rolling upgrade) must agree on it, which
/// std's `DefaultHasher` does not promise across Rust releases.
pub fn fingerprint(path: &str, body: &Value, without_stream: bool) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    path.hash(&mut hasher);
    hash_json(body, without_stream, &mut hasher);
    hasher.finish()
}

fn hash_json(value: &Value, top: bool, hasher: &mut impl Hasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => (2u8, n.to_string()).hash(hasher),
        Value::String(s) => (3u8, s).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                hash_json(item, false, hasher);
            }
        }
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields
                .keys()
                .filter(|k| !(top && k.as_str() == "stream"))
                .collect();
            keys.sort();
            (5u8, keys.len()).hash(hasher);
            for key in keys {
                key.hash(hasher);
                hash_json(&fields[key], false, hasher);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PINNED_FINGERPRINT: u64 = 13_594_204_357_601_834_223;

    #[test]
    fn a_fingerprint_is_the_same_in_every_build() {
        // Pinned: replicas of different builds share fingerprints through Redis.
        let body = json!({"messages": [{"role": "user", "content": "红烧肉"}], "n": 1.5});
        assert_eq!(
            fingerprint("/v1/chat/completions", &body, true),
            PINNED_FINGERPRINT
        );
    }

    #[test]
    fn keys_are_1_to_255_visible_ascii_characters() {
        assert!(valid_key(b"order-42_A~!"));
        assert!(valid_key(&[b'k'; 255]));
        for bad in [
            &b""[..],
            b"has space",
            b"tab\t",
            "中文".as_bytes(),
            &[b'k'; 256],
        ] {
            assert!(!valid_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn one_request_is_its_path_and_json_equal_body_without_stream() {
        let a = fingerprint(
            "/v1/chat/completions",
            &json!({"model": "m", "n": 1, "stream": true}),
            true,
        );
        let b = fingerprint("/v1/chat/completions", &json!({"n": 1, "model": "m"}), true);
        assert_eq!(a, b);
        let other_body = fingerprint("/v1/chat/completions", &json!({"n": 2, "model": "m"}), true);
        let other_path = fingerprint("/v1/tasks/recipe", &json!({"n": 1, "model": "m"}), true);
        assert_ne!(a, other_body);
        assert_ne!(b, other_path);
        let nested = |v| fingerprint("/p", &json!({"x": {"stream": v}}), true);
        assert_ne!(
            nested(true),
            nested(false),
            "only the top-level `stream` is ignored"
        );
    }
}
