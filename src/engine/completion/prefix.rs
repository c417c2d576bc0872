//! What a request keeps so that a cut answer can be continued (contract 11.4):
//! `P`, the content the caller has received so far across attempts, and what
//! goes with it (the tool calls that forbid a continuation, the usage billed by
//! attempts whose text is in the answer, the upstreams that refused one).
//!
//! `P` is kept for every request that asked for one choice, relayed or
//! assembled: appending a chunk's text is the whole cost on the relay's path.

use bytes::Bytes;
use serde_json::Value;

use super::continued::Identity;
use crate::engine::failure::{AttemptFailure, Classified};
use crate::engine::upstream::chunk::Chunk;

/// A request's continuation state.
#[derive(Debug, Default)]
pub struct Prefix {
    /// The bound on `P` (`LADLE_MAX_ANSWER_BYTES`) when the request asked for
    /// one choice; `None`: it is never continued.
    limit: Option<usize>,
    /// `P`.
    text: String,
    /// `P` passed its bound: it is no longer kept, and never continued.
    over: bool,
    /// A tool call began: a continuation would have to write inside it.
    tool_call: bool,
    /// The current attempt wrote content (not only reasoning).
    pub wrote: bool,
    /// The current attempt continues `P`, which was this many characters long.
    pub continuing: Option<usize>,
    /// The next attempt is a continuation.
    pub pending: bool,
    /// Cuts continued so far.
    pub continued: u32,
    /// Upstreams (by index) that refused a continuation in this request.
    pub refused: Vec<usize>,
    /// The failure the first continuation followed: a request that can be
    /// continued no more ends with its code.
    pub first_cut: Option<(AttemptFailure, Classified)>,
    /// Usage billed by earlier attempts whose text is in the answer.
    pub billed: Billed,
    /// The answer's first chunk as relayed, until a continuation needs its
    /// identity.
    first_chunk: Option<Bytes>,
    /// What every continued chunk repeats of the first one.
    identity: Option<Identity>,
}

impl Prefix {
    /// The state of a request that may be continued when `limit` is `Some`.
    pub fn new(limit: Option<usize>) -> Self {
        Prefix {
            limit,
            ..Prefix::default()
        }
    }

    /// `P`.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the request can be continued at all now.
    pub fn continuable(&self) -> bool {
        self.limit.is_some() && !self.over && !self.tool_call
    }

    /// An attempt starts: a continuation, or one that voids what came before.
    pub fn start_attempt(&mut self) {
        self.wrote = false;
        // Counted once per continuation, not per chunk: the relay's path only
        // appends.
        let pending = std::mem::take(&mut self.pending);
        self.continuing = pending.then(|| self.text.chars().count());
        if self.continuing.is_none() {
            self.text.clear();
            self.over = false;
            self.tool_call = false;
            self.billed = Billed::default();
            self.first_cut = None;
            self.first_chunk = None;
            self.identity = None;
        }
    }

    /// Adds what one chunk (`raw` as received) wrote to `P`.
    pub fn absorb(&mut self, chunk: &Chunk, raw: Option<&Bytes>) {
        let Some(limit) = self.limit else { return };
        if self.first_chunk.is_none() && self.identity.is_none() {
            self.first_chunk = raw.cloned();
        }
        for choice in chunk.choices() {
            let extra = choice.extra.as_deref();
            self.tool_call |= extra.is_some_and(|e| !e.tool_calls.is_empty());
            let Some(text) = choice.content.as_deref().filter(|_| choice.index == 0) else {
                continue;
            };
            self.wrote = true;
            if self.over {
                continue;
            }
            if self.text.len() + text.len() > limit {
                self.over = true;
                self.text = String::new();
                continue;
            }
            self.text.push_str(text);
        }
    }
}

impl Prefix {
    /// A continuation's chunk `raw` (reporting `usage`) as the caller's stream
    /// must see it; `None` when nothing of it is left to send.
    pub fn continue_chunk(&mut self, raw: &[u8], usage: Option<&Value>) -> Option<Bytes> {
        let first = self.first_chunk.take();
        let identity = self
            .identity
            .get_or_insert_with(|| first.map(|raw| Identity::of(&raw)).unwrap_or_default());
        let billed = usage.and_then(|usage| self.billed.total(Some(usage.clone())));
        identity.continue_chunk(raw, billed)
    }
}

/// The usage of the attempts whose text is in the answer, summed field by field
/// (what was billed), while every one of them reported one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Billed {
    /// The sum so far; `None` before any attempt was folded in.
    sum: Option<Value>,
    /// An attempt whose text is in the answer reported no usage.
    unknown: bool,
}

impl Billed {
    /// Folds in the usage of an attempt whose text stays in the answer.
    pub fn add(&mut self, usage: Option<&Value>) {
        match usage {
            None => self.unknown = true,
            Some(usage) => {
                self.sum = Some(match self.sum.take() {
                    None => usage.clone(),
                    Some(sum) => added(sum, usage),
                });
            }
        }
    }

    /// The answer's usage, with the last attempt's `last`: the sum, or `None`
    /// when some attempt in it reported none. Without earlier attempts, `last`.
    pub fn total(&self, last: Option<Value>) -> Option<Value> {
        match (&self.sum, last) {
            _ if self.unknown => None,
            (None, last) => last,
            (Some(_), None) => None,
            (Some(sum), Some(last)) => Some(added(sum.clone(), &last)),
        }
    }
}

/// Two usage reports summed field by field: numbers added, objects (the
/// `*_details`) summed the same way, anything else the later one's.
fn added(sum: Value, more: &Value) -> Value {
    match (sum, more) {
        (Value::Object(mut sum), Value::Object(more)) => {
            for (key, value) in more {
                let joined = match sum.remove(key) {
                    Some(before) => added(before, value),
                    None => value.clone(),
                };
                sum.insert(key.clone(), joined);
            }
            Value::Object(sum)
        }
        (Value::Number(a), Value::Number(b)) => match (a.as_u64(), b.as_u64()) {
            (Some(a), Some(b)) => Value::from(a.saturating_add(b)),
            _ => Value::Number(b.clone()),
        },
        (_, later) => later.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::upstream::chunk::{self, Parsed};

    impl Prefix {
        fn absorb_text(&mut self, chunk: &Chunk) {
            self.absorb(chunk, None);
        }
    }

    fn chunk(json: &str) -> Chunk {
        match chunk::parse(json.as_bytes(), false) {
            Ok(Parsed::Chunk(chunk)) => chunk,
            other => panic!("not a chunk: {other:?}"),
        }
    }

    #[test]
    fn p_is_every_content_character_in_order_and_never_the_reasoning() {
        let mut prefix = Prefix::new(Some(1 << 20));
        prefix.start_attempt();
        prefix.absorb_text(&chunk(
            r#"{"choices":[{"delta":{"reasoning_content":"想"}}]}"#,
        ));
        assert!(!prefix.wrote, "reasoning only");
        prefix.absorb_text(&chunk(r#"{"choices":[{"delta":{"content":"番茄"}}]}"#));
        prefix.absorb_text(&chunk(r#"{"choices":[{"delta":{"content":"炒蛋"}}]}"#));
        assert_eq!(prefix.text(), "番茄炒蛋");
        prefix.pending = true;
        prefix.start_attempt();
        assert_eq!(prefix.continuing, Some(4));
        prefix.absorb_text(&chunk(r#"{"choices":[{"delta":{"content":"，"}}]}"#));
        assert_eq!(prefix.text(), "番茄炒蛋，");
        prefix.start_attempt();
        assert_eq!((prefix.text(), prefix.continuing), ("", None), "a restart");
    }

    #[test]
    fn a_tool_call_more_choices_or_a_passed_bound_forbid_a_continuation() {
        let mut called = Prefix::new(Some(100));
        called.absorb_text(&chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}"#,
        ));
        assert!(!called.continuable());
        assert!(!Prefix::new(None).continuable(), "n > 1");
        let mut long = Prefix::new(Some(4));
        long.absorb_text(&chunk(r#"{"choices":[{"delta":{"content":"abc"}}]}"#));
        assert!(long.continuable());
        long.absorb_text(&chunk(r#"{"choices":[{"delta":{"content":"de"}}]}"#));
        assert!(!long.continuable());
        assert!(long.wrote);
    }

    #[test]
    fn usage_is_the_field_by_field_sum_while_every_attempt_reported_one() {
        let first = json!({"prompt_tokens": 100, "completion_tokens": 1200, "total_tokens": 1300,
                           "completion_tokens_details": {"reasoning_tokens": 7}});
        let second = json!({"prompt_tokens": 1300, "completion_tokens": 400, "total_tokens": 1700,
                            "completion_tokens_details": {"reasoning_tokens": 1}});
        let mut billed = Billed::default();
        billed.add(Some(&first));
        assert_eq!(
            billed.total(Some(second.clone())),
            Some(
                json!({"prompt_tokens": 1400, "completion_tokens": 1600, "total_tokens": 3000,
                        "completion_tokens_details": {"reasoning_tokens": 8}})
            )
        );
        assert_eq!(billed.total(None), None);
        let mut cut = Billed::default();
        cut.add(None);
        assert_eq!(
            cut.total(Some(second.clone())),
            None,
            "the cut attempt reported none"
        );
        assert_eq!(Billed::default().total(Some(second.clone())), Some(second));
    }
}
