//! A finished answer as it is kept: under an idempotency key (for its repeats)
//! and in the answer cache (for its hits). One versioned type for both, pinned by
//! the test below, since Redis and the state file outlive the build that wrote
//! them. It holds the answer whole (every choice's content, reasoning, refusal,
//! tool calls and log-probabilities, the usage; a task's output) and the names
//! it was first given, so the relay renders it in every shape (`relay/replay.rs`):
//! a shape cannot lose what the record never dropped.
//!
//! A job keeps its result as the contract's body instead (`GET /v1/jobs/{id}`
//! and the webhook read it as it is): see
//! `docs/design/19-one-boundary-for-the-engine/07-one-answer-record.md`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::completion::answer::ChoiceAnswer;
use crate::engine::completion::{Cached, Finished, Output};
use crate::engine::upstream::chunk::Meta;

/// The encoding's version. Version 1 was the cache's own record of a task's
/// output alone; a record of another version reads as nothing kept.
pub const VERSION: u8 = 2;

/// A finished answer, as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptAnswer {
    v: u8,
    /// The request that made it: a replay names it, as the first answer did.
    pub request_id: String,
    /// When it was answered (Unix seconds): chat's `created`, a response's
    /// `created_at`.
    pub created: u64,
    /// The Responses API response it was, if it was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Every choice, whole. A task's answer is its output (all any of its
    /// shapes renders), so the model's text it was made from is not kept twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<ChoiceAnswer>,
    /// The upstream's usage report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// The upstream completion's id, model and fingerprint.
    #[serde(default, skip_serializing_if = "is_default")]
    pub meta: Meta,
    /// A task's normalized output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Output>,
    /// Attempts made, the successful one included.
    pub attempts: u32,
    /// The upstream that answered.
    pub upstream: String,
    /// The model sent to it.
    pub model: String,
    /// How long the first answer took.
    pub elapsed_ms: u64,
    /// What the answer cache made of the first answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Cached>,
}

/// The names an answer is given where it is first made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The request's id.
    pub request_id: String,
    /// Unix seconds.
    pub created: u64,
    /// The response's id, for the Responses API.
    pub response_id: Option<String>,
}

impl KeptAnswer {
    /// `finished`, under the names it was first given.
    pub fn new(finished: &Finished, named: Named) -> KeptAnswer {
        KeptAnswer {
            v: VERSION,
            request_id: named.request_id,
            created: named.created,
            response_id: named.response_id,
            choices: match finished.output {
                Some(_) => Vec::new(),
                None => finished.choices.clone(),
            },
            usage: finished.usage.clone(),
            meta: finished.meta.clone(),
            output: finished.output.clone(),
            attempts: finished.attempts,
            upstream: finished.upstream.clone(),
            model: finished.model.clone(),
            elapsed_ms: finished.elapsed.as_millis() as u64,
            cache: finished.cache,
        }
    }

    /// The answer again, as a completion that finished with it.
    pub fn finished(&self) -> Finished {
        Finished {
            choices: self.choices.clone(),
            usage: self.usage.clone(),
            meta: self.meta.clone(),
            output: self.output.clone(),
            attempts: self.attempts,
            upstream: self.upstream.clone(),
            model: self.model.clone(),
            elapsed: Duration::from_millis(self.elapsed_ms),
            cache: self.cache,
            gathered: true,
        }
    }

    /// The names it was first given.
    pub fn named(&self) -> Named {
        Named {
            request_id: self.request_id.clone(),
            created: self.created,
            response_id: self.response_id.clone(),
        }
    }

    /// Its stored encoding.
    pub fn encode(&self) -> String {
        // Plain fields and JSON values always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored encoding read back; `None` for another version or a broken one.
    pub fn decode(text: &str) -> Option<KeptAnswer> {
        serde_json::from_str::<KeptAnswer>(text)
            .ok()
            .filter(|kept| kept.v == VERSION)
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[cfg(test)]
mod tests;
