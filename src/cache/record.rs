//! A kept answer as it is stored: its own small versioned type, pinned by a test,
//! since the state file and a fleet's Redis outlive the build that wrote them.

use serde::{Deserialize, Serialize};

use crate::engine::completion::Output;

/// The version of the stored encoding.
pub const VERSION: u8 = 1;

/// A task's kept `200` answer: what made it and what it said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// The encoding's version.
    pub v: u8,
    /// What the task asked the upstream (`AnswerKey::request`): compared on
    /// every lookup.
    pub request: String,
    /// The task's normalized output.
    pub output: Output,
    /// The model that answered.
    pub model: String,
    /// The upstream that answered.
    pub upstream: String,
    /// When it was made (Unix ms).
    pub made_at: u64,
}

impl Kept {
    /// How old it is at `now` (Unix ms).
    pub fn age(&self, now: u64) -> u64 {
        now.saturating_sub(self.made_at)
    }

    /// Its stored encoding.
    pub fn encode(&self) -> String {
        // JSON text and plain fields always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored encoding read back; `None` for another version or a broken one
    /// (a miss, never an error).
    pub fn decode(text: &str) -> Option<Kept> {
        serde_json::from_str::<Kept>(text)
            .ok()
            .filter(|kept| kept.v == VERSION)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::engine::completion::Output;

    use super::*;

    #[test]
    fn the_stored_encoding_is_pinned() {
        let kept = Kept {
            v: VERSION,
            request: r#"{"task":"recipe"}"#.into(),
            output: Output::of(&json!({"title": "宫保鸡丁"})),
            model: "glm-4-plus".into(),
            upstream: "primary".into(),
            made_at: 1_796_126_791_000,
        };
        let stored = r#"{"v":1,"request":"{\"task\":\"recipe\"}","output":{"title":"宫保鸡丁"},"model":"glm-4-plus","upstream":"primary","made_at":1796126791000}"#;
        assert_eq!(kept.encode(), stored);
        assert_eq!(Kept::decode(stored), Some(kept));
        assert_eq!(Kept::decode(&stored.replace(r#""v":1"#, r#""v":2"#)), None);
        assert_eq!(Kept::decode("{broken"), None);
    }
}
