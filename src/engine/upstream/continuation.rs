//! How an upstream continues a partial answer (contract 11.4): its dialect, and
//! the one place a continuation's request body is built. No dialect is guessed
//! from a URL: providers that take a prefix change their field names, and a
//! wrong guess would be a 400 on every cut.

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// How an upstream takes an assistant prefix to continue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Continuation {
    /// Never continued (OpenAI's chat completions, Anthropic's newest models).
    #[default]
    None,
    /// `{"role": "assistant", "content": P, "prefix": true}`: DeepSeek (beta), Mistral.
    Prefix,
    /// `{"role": "assistant", "content": P, "partial": true}`: Moonshot (Kimi).
    Partial,
    /// `{"role": "assistant", "content": P}` with `continue_final_message: true`
    /// and `add_generation_prompt: false` in the body: vLLM, SGLang.
    ContinueFinalMessage,
}

impl Continuation {
    /// The words a setting takes, exactly.
    pub const WORDS: [&'static str; 4] = ["prefix", "partial", "continue_final_message", "none"];

    /// The dialect a setting names; `None` for any other word.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "prefix" => Some(Continuation::Prefix),
            "partial" => Some(Continuation::Partial),
            "continue_final_message" => Some(Continuation::ContinueFinalMessage),
            "none" => Some(Continuation::None),
            _ => None,
        }
    }

    /// The setting's word.
    pub fn name(self) -> &'static str {
        match self {
            Continuation::None => "none",
            Continuation::Prefix => "prefix",
            Continuation::Partial => "partial",
            Continuation::ContinueFinalMessage => "continue_final_message",
        }
    }

    /// Whether the upstream can be asked to continue at all.
    pub fn can_continue(self) -> bool {
        self != Continuation::None
    }

    /// `body` (what a first attempt to this upstream sends) with `prefix` as a
    /// trailing assistant message in this dialect; nothing else changes. `None`
    /// for `none`, or a body that is not an object with `messages`.
    pub fn body(self, body: &[u8], prefix: &str) -> Option<Bytes> {
        let mut fields: Map<String, Value> = serde_json::from_slice(body).ok()?;
        let message = match self {
            Continuation::None => return None,
            Continuation::Prefix => {
                json!({"role": "assistant", "content": prefix, "prefix": true})
            }
            Continuation::Partial => {
                json!({"role": "assistant", "content": prefix, "partial": true})
            }
            Continuation::ContinueFinalMessage => json!({"role": "assistant", "content": prefix}),
        };
        fields.get_mut("messages")?.as_array_mut()?.push(message);
        if self == Continuation::ContinueFinalMessage {
            fields.insert("continue_final_message".into(), true.into());
            fields.insert("add_generation_prompt".into(), false.into());
        }
        serde_json::to_vec(&fields).ok().map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"菜谱"}],"stream":true,"temperature":0.3}"#;

    fn continued(dialect: Continuation, prefix: &str) -> Value {
        let body = dialect.body(BODY.as_bytes(), prefix).expect("a body");
        serde_json::from_slice(&body).expect("JSON")
    }

    #[test]
    fn each_dialect_appends_its_own_assistant_message_and_nothing_else_changes() {
        let prefix = "{\"title\":\"番茄炒";
        let user = json!({"role": "user", "content": "菜谱"});
        for (dialect, last) in [
            (
                Continuation::Prefix,
                json!({"role": "assistant", "content": prefix, "prefix": true}),
            ),
            (
                Continuation::Partial,
                json!({"role": "assistant", "content": prefix, "partial": true}),
            ),
            (
                Continuation::ContinueFinalMessage,
                json!({"role": "assistant", "content": prefix}),
            ),
        ] {
            let body = continued(dialect, prefix);
            assert_eq!(body["messages"], json!([user, last]), "{dialect:?}");
            assert_eq!(body["model"], "m");
            assert_eq!(body["stream"], true);
            assert_eq!(body["temperature"], 0.3);
            let extra = dialect == Continuation::ContinueFinalMessage;
            assert_eq!(body.get("continue_final_message").is_some(), extra);
            assert_eq!(body.get("add_generation_prompt").is_some(), extra);
        }
        let vllm = continued(Continuation::ContinueFinalMessage, prefix);
        assert_eq!(vllm["continue_final_message"], true);
        assert_eq!(vllm["add_generation_prompt"], false);
        let keys: Vec<&String> = vllm.as_object().expect("object").keys().collect();
        assert_eq!(
            keys,
            [
                "model",
                "messages",
                "stream",
                "temperature",
                "continue_final_message",
                "add_generation_prompt"
            ],
            "the body's own fields keep their order"
        );
    }

    #[test]
    fn none_and_a_body_without_messages_make_no_continuation() {
        assert_eq!(Continuation::None.body(BODY.as_bytes(), "x"), None);
        assert_eq!(Continuation::Prefix.body(b"{\"model\":\"m\"}", "x"), None);
        assert_eq!(Continuation::Prefix.body(b"[1]", "x"), None);
    }

    #[test]
    fn the_words_are_exact_and_lower_case() {
        for word in Continuation::WORDS {
            let dialect = Continuation::parse(word).expect("a dialect");
            assert_eq!(dialect.name(), word);
        }
        for word in ["Prefix", "PARTIAL", "prefix ", "", "continue"] {
            assert_eq!(Continuation::parse(word), None, "{word:?}");
        }
    }
}
