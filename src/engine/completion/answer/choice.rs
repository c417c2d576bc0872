//! One choice of an answer, assembled as OpenAI assembles its own: text and
//! reasoning appended, a refusal appended, each tool call by its `index` (its id,
//! type and name from the first piece that has them, its arguments concatenated
//! in order), log-probabilities' lists concatenated. Everything kept counts toward
//! the choice's bound.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::upstream::chunk::{Choice, ToolCallPiece};

/// One choice's answer so far. Its serde form is part of a kept answer's
/// encoding (`kept::KeptAnswer`, pinned there): empty fields are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChoiceAnswer {
    /// The choice's `index`.
    pub index: u32,
    /// Its content.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// Its reasoning.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// Its refusal.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub refusal: String,
    /// Its tool calls, in order of first appearance (rendered by `index`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Its log-probabilities, when the upstream sent any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Logprobs>,
    /// Its finish reason, once given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Bytes kept so far, against the bound (an answer read back is whole).
    #[serde(skip)]
    size: usize,
}

/// One tool call the model made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCall {
    /// Its `index` among the choice's calls.
    pub index: u32,
    /// Its `id`.
    pub id: String,
    /// Its `type`: `function` when the upstream left it out.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The function's name.
    pub name: String,
    /// The function's arguments, concatenated in order.
    pub arguments: String,
}

impl ToolCall {
    /// The call's `type`.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("function")
    }
}

/// A choice's `logprobs`: each list concatenated in order, `None` (rendered
/// `null`, as OpenAI's) while no chunk carried it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Logprobs {
    /// `logprobs.content`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<Value>>,
    /// `logprobs.refusal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Vec<Value>>,
}

/// A choice passed its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

impl ChoiceAnswer {
    /// An empty choice.
    pub fn new(index: u32) -> Self {
        ChoiceAnswer {
            index,
            ..ChoiceAnswer::default()
        }
    }

    /// Adds what one chunk's choice wrote, unless this choice would pass `limit`
    /// bytes.
    pub fn absorb(&mut self, wrote: &Choice, limit: usize) -> Result<(), TooLarge> {
        let extra = wrote.extra.as_deref();
        let logprobs = extra.and_then(|e| e.logprobs.as_ref());
        let adding = wrote.content.as_ref().map_or(0, String::len)
            + wrote.reasoning.as_ref().map_or(0, String::len)
            + extra.map_or(0, |e| {
                e.refusal.as_ref().map_or(0, String::len)
                    + e.tool_calls.iter().map(piece_size).sum::<usize>()
            })
            + logprobs.map_or(0, json_size);
        if self.size + adding > limit {
            return Err(TooLarge);
        }
        self.size += adding;
        self.content
            .push_str(wrote.content.as_deref().unwrap_or_default());
        self.reasoning
            .push_str(wrote.reasoning.as_deref().unwrap_or_default());
        if let Some(extra) = extra {
            self.refusal
                .push_str(extra.refusal.as_deref().unwrap_or_default());
            for call in &extra.tool_calls {
                self.add_tool_call(call);
            }
        }
        if let Some(logprobs) = logprobs {
            let kept = self.logprobs.get_or_insert_with(Logprobs::default);
            for (name, list) in [
                ("content", &mut kept.content),
                ("refusal", &mut kept.refusal),
            ] {
                if let Some(more) = logprobs.get(name).and_then(Value::as_array) {
                    list.get_or_insert_with(Vec::new).extend_from_slice(more);
                }
            }
        }
        Ok(())
    }

    fn add_tool_call(&mut self, piece: &ToolCallPiece) {
        let at = match self.tool_calls.iter().position(|c| c.index == piece.index) {
            Some(at) => at,
            None => {
                self.tool_calls.push(ToolCall {
                    index: piece.index,
                    ..ToolCall::default()
                });
                self.tool_calls.len() - 1
            }
        };
        let call = &mut self.tool_calls[at];
        if let Some(id) = &piece.id
            && call.id.is_empty()
        {
            call.id.clone_from(id);
        }
        if let Some(kind) = &piece.kind
            && call.kind.is_none()
        {
            call.kind = Some(kind.clone());
        }
        if let Some(name) = &piece.name
            && call.name.is_empty()
        {
            call.name.clone_from(name);
        }
        call.arguments.push_str(&piece.arguments);
    }

    /// Its tool calls by `index`.
    pub fn tool_calls_in_order(&self) -> Vec<&ToolCall> {
        let mut calls: Vec<&ToolCall> = self.tool_calls.iter().collect();
        calls.sort_by_key(|call| call.index);
        calls
    }

    /// Whether the model wrote no content but called tools or refused: its
    /// `content` is then `null`, as OpenAI's is.
    pub fn content_is_null(&self) -> bool {
        self.content.is_empty() && (!self.tool_calls.is_empty() || !self.refusal.is_empty())
    }
}

fn piece_size(piece: &ToolCallPiece) -> usize {
    piece.id.as_ref().map_or(0, String::len)
        + piece.name.as_ref().map_or(0, String::len)
        + piece.arguments.len()
}

/// The length of a value's JSON text.
fn json_size(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(0, |text| text.len())
}
