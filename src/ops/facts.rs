//! What a request's handlers and relays learn that its log line and metrics
//! report: the arrival, a completion route's note (deadline, idempotency key,
//! cache), and the words known only once a stream's body has ended. A leaf, so
//! the writers (routes, relays, the request pipeline) and the one reader
//! (`observe`) meet here, not through each other.

use std::sync::{Arc, OnceLock};

use tokio::time::Instant;

use crate::engine::retry::Deadline;

/// What a completion route adds to its request's log line: the effective deadline,
/// and with an `Idempotency-Key` the key and what it led to.
#[derive(Debug, Clone, Default)]
pub struct CompletionNote {
    /// The request's deadline, fixed at its arrival.
    pub deadline: Option<Deadline>,
    /// The `Idempotency-Key`, if the request had one.
    pub idempotency_key: Option<String>,
    /// `executed`, `replayed`, `joined` or `reused`.
    pub idempotency: Option<&'static str>,
    /// For a cached task: `hit`, `miss` or `stale`, once the answer is known.
    pub cache: Option<LateWord>,
    /// The answer's usage, once it is known (a stream's comes at its end).
    pub usage: LateUsage,
    /// A Responses API create's response id.
    pub response_id: Option<String>,
}

/// The prompt and completion tokens of a request's answer, when the upstream
/// reported them: set when the answer is finished, read when its body ends.
#[derive(Debug, Clone, Default)]
pub struct LateUsage(Arc<OnceLock<(u64, u64)>>);

impl LateUsage {
    /// Records an answer's usage report, if it has both counts.
    pub fn set(&self, usage: &serde_json::Value) {
        let count = |field: &str| usage.get(field).and_then(serde_json::Value::as_u64);
        if let (Some(prompt), Some(completion)) =
            (count("prompt_tokens"), count("completion_tokens"))
        {
            let _ = self.0.set((prompt, completion));
        }
    }

    /// The prompt and completion tokens, once known.
    pub fn tokens(&self) -> (Option<u64>, Option<u64>) {
        self.0.get().copied().unzip()
    }
}

/// When the request arrived.
#[derive(Debug, Clone, Copy)]
pub struct Arrival(pub Instant);

/// A word of the request's log line known only after its head is out: the error
/// a `200` stream ended with (a relay puts one in the response's extensions and
/// fills it in when it writes the `error` event), or what the answer cache did
/// (in the `CompletionNote`). The observer reads it when the body ends.
#[derive(Debug, Clone, Default)]
pub struct LateWord(Arc<OnceLock<&'static str>>);

impl LateWord {
    /// Records the word (the first one given stays).
    pub fn set(&self, word: &'static str) {
        let _ = self.0.set(word);
    }

    /// The word, once it is known.
    pub fn word(&self) -> Option<&'static str> {
        self.0.get().copied()
    }
}

/// An event stream that may wait long for its next event (a job's): its client
/// must take each frame within this, or its connection is cut (a reader that
/// never reads holds nothing). The observer re-arms the connection's timer at
/// every frame.
#[derive(Debug, Clone, Copy)]
pub struct ReaderStall(pub std::time::Duration);

/// An answer whose body outlives the work the request asked for (a submit
/// answered with its job's event stream): what the request holds (a client
/// key's slot) is given back when its head is out, not when its body ends.
#[derive(Debug, Clone, Copy)]
pub struct OutlivesItsWork;
