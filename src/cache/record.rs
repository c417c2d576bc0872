//! A cache entry as it is stored: the request it answers and when it was made,
//! around the one kept-answer record (`kept::KeptAnswer`, versioned and pinned
//! there), since the state file and a fleet's Redis outlive the build that wrote
//! them.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::kept::KeptAnswer;

/// A task's kept `200` answer, and what it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// What the task asked the upstream (`AnswerKey::request`): compared on
    /// every lookup.
    pub request: String,
    /// When it was made (Unix ms).
    pub made_at: u64,
    /// The answer, whole.
    pub answer: KeptAnswer,
}

/// The stored form: written with the answer itself, read with the answer's
/// text, which `KeptAnswer::decode` reads (checking its version).
#[derive(Serialize, Deserialize)]
struct Stored<R, A> {
    request: R,
    made_at: u64,
    answer: A,
}

impl Kept {
    /// How old it is at `now` (Unix ms).
    pub fn age(&self, now: u64) -> u64 {
        now.saturating_sub(self.made_at)
    }

    /// Its stored encoding.
    pub fn encode(&self) -> String {
        let stored = Stored {
            request: &self.request,
            made_at: self.made_at,
            answer: &self.answer,
        };
        // Plain fields and JSON values always serialize.
        serde_json::to_string(&stored).unwrap_or_default()
    }

    /// A stored encoding read back; `None` for another version or a broken one
    /// (a miss, never an error).
    pub fn decode(text: &str) -> Option<Kept> {
        let stored: Stored<String, &RawValue> = serde_json::from_str(text).ok()?;
        Some(Kept {
            request: stored.request,
            made_at: stored.made_at,
            answer: KeptAnswer::decode(stored.answer.get())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::engine::completion::{Finished, Output};
    use crate::kept::Named;

    use super::*;

    #[test]
    fn the_stored_encoding_is_pinned() {
        let finished = Finished {
            choices: Vec::new(),
            usage: None,
            meta: Default::default(),
            output: Some(Output::of(&json!({"title": "宫保鸡丁"}))),
            attempts: 1,
            upstream: "primary".into(),
            model: "glm-4-plus".into(),
            elapsed: Duration::from_millis(900),
            cache: None,
            gathered: true,
        };
        let named = Named {
            request_id: "r-1".into(),
            created: 1_796_126_791,
            response_id: None,
        };
        let kept = Kept {
            request: r#"{"task":"recipe"}"#.into(),
            made_at: 1_796_126_791_000,
            answer: KeptAnswer::new(&finished, named),
        };
        let stored = r#"{"request":"{\"task\":\"recipe\"}","made_at":1796126791000,"answer":{"v":2,"request_id":"r-1","created":1796126791,"output":{"title":"宫保鸡丁"},"attempts":1,"upstream":"primary","model":"glm-4-plus","elapsed_ms":900}}"#;
        assert_eq!(kept.encode(), stored);
        assert_eq!(Kept::decode(stored), Some(kept));
        assert_eq!(Kept::decode(&stored.replace(r#""v":2"#, r#""v":3"#)), None);
        // What builds before the one record kept: a miss.
        let older = r#"{"v":1,"request":"{}","output":{"title":"宫保鸡丁"},"model":"glm","upstream":"primary","made_at":1796126791000}"#;
        assert_eq!(Kept::decode(older), None);
        assert_eq!(Kept::decode("{broken"), None);
    }
}
