//! What a completion reports, in order: the vocabulary shared by the attempt loop
//! and the relays that turn it into the client's format.

use std::time::Duration;

use serde_json::Value;

use super::answer::ChoiceAnswer;
use super::attempt::Received;
use crate::engine::failure::RetryReason;
use crate::engine::upstream::chunk::Meta;

/// What happens, in order, as a request is completed.
#[derive(Debug)]
pub enum Progress {
    /// Attempt `n` (1-based) starts.
    Attempt(u32),
    /// A data chunk of the current attempt (output or not).
    Chunk(Received),
    /// The attempt failed and another follows after `wait`.
    Retry {
        /// The attempt that failed.
        attempt: u32,
        /// Why the retry is made.
        reason: RetryReason,
        /// How long until the next attempt.
        wait: Duration,
        /// Whether the failed attempt had produced output, which is now void.
        output_began: bool,
        /// The upstream the next attempt goes to.
        upstream: String,
    },
    /// The attempt that just started (its `Attempt` came first) continues the
    /// answer so far (contract 11.4): nothing the caller has is void.
    Continue {
        /// The continuation's own attempt number.
        attempt: u32,
        /// The upstream it goes to.
        upstream: String,
        /// The length of the text it continues, in Unicode code points.
        chars: usize,
    },
    /// The request succeeded (boxed: rare, and large beside a chunk).
    Finished(Box<Finished>),
    /// The request failed for good.
    Failed(super::GaveUp),
}

/// A whole answer.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Every choice of the successful attempt, by `index` as first seen.
    pub choices: Vec<ChoiceAnswer>,
    /// The upstream's usage report.
    pub usage: Option<Value>,
    /// The upstream completion's id and model.
    pub meta: Meta,
    /// The normalized output, when the spec asked for an output kind.
    pub output: Option<super::Output>,
    /// Attempts made, the successful one included.
    pub attempts: u32,
    /// The upstream that answered.
    pub upstream: String,
    /// The model sent to it.
    pub model: String,
    /// Time since the request arrived.
    pub elapsed: Duration,
    /// What the answer cache (`cache/`) made of it; `None` for a task without
    /// `[cache]`, or a chat.
    pub cache: Option<Cached>,
    /// Whether `choices` hold the whole answer's text: not for a relayed stream
    /// that gathered none, or passed its bound (it is not kept).
    pub gathered: bool,
}

/// Where a task's answer came from, as its `meta.cache` says (contract 7.3).
/// Part of a kept answer's encoding: `{"outcome": "hit", "at": …}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Cached {
    /// Made now, by the upstream (and kept, unless the request said `no-store`).
    Miss,
    /// A kept answer made at `at` (Unix ms), young enough to answer at once.
    Hit {
        /// When the kept answer was made.
        at: u64,
    },
    /// A kept answer made at `at`, given instead of the run's retryable error.
    Stale {
        /// When the kept answer was made.
        at: u64,
    },
}

impl Cached {
    /// `meta.cache`, and the metric's `outcome`.
    pub fn name(self) -> &'static str {
        match self {
            Cached::Miss => "miss",
            Cached::Hit { .. } => "hit",
            Cached::Stale { .. } => "stale",
        }
    }

    /// When the kept answer was made, for a hit or a stale answer.
    pub fn made_at(self) -> Option<u64> {
        match self {
            Cached::Miss => None,
            Cached::Hit { at } | Cached::Stale { at } => Some(at),
        }
    }
}
