//! The rarer parts of a choice's delta: a refusal, tool-call pieces and
//! log-probabilities. They are boxed beside the text (most chunks carry none, and
//! a chunk is moved a few times on its way to the client) and read from the same
//! borrowed JSON as the text.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

/// A choice's refusal, tool-call pieces and log-probabilities, as one chunk
/// carries them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra {
    /// Non-empty `refusal`.
    pub refusal: Option<String>,
    /// The pieces of tool calls, each naming the call's `index`.
    pub tool_calls: Vec<ToolCallPiece>,
    /// `logprobs`, as sent (`{"content": […], "refusal": […]}`).
    pub logprobs: Option<Value>,
}

/// A piece of one tool call: its first piece names it, later ones add arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallPiece {
    /// Which call of the choice it belongs to.
    pub index: u32,
    /// The call's `id`.
    pub id: Option<String>,
    /// The call's `type` (`function`).
    pub kind: Option<String>,
    /// The function's `name`.
    pub name: Option<String>,
    /// More of the function's `arguments`.
    pub arguments: String,
}

impl Extra {
    /// Whether it is output (contract 2): a refusal, or any part of a tool call.
    pub fn is_output(&self) -> bool {
        self.refusal.is_some()
            || self.tool_calls.iter().any(|piece| {
                piece.id.is_some() || piece.name.is_some() || !piece.arguments.is_empty()
            })
    }
}

/// One element of a delta's (or a message's) `tool_calls`, as sent.
#[derive(Deserialize)]
pub(super) struct WireToolCall<'a> {
    /// Absent in a whole `message` (its place in the list is its index).
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

/// A choice's extra parts, or `None` when it has none (the common case).
pub(super) fn extra(
    refusal: Option<Cow<'_, str>>,
    tool_calls: Option<Vec<WireToolCall<'_>>>,
    logprobs: Option<Value>,
) -> Option<Box<Extra>> {
    let refusal = refusal.filter(|r| !r.is_empty()).map(Cow::into_owned);
    let logprobs = logprobs.filter(|l| !l.is_null());
    let tool_calls: Vec<ToolCallPiece> = tool_calls
        .unwrap_or_default()
        .into_iter()
        .zip(0..)
        .map(|(call, position)| {
            let function = call.function;
            let (name, arguments) = match function {
                Some(f) => (f.name, f.arguments),
                None => (None, None),
            };
            ToolCallPiece {
                index: call.index.unwrap_or(position),
                id: call.id.filter(|id| !id.is_empty()).map(Cow::into_owned),
                kind: call.kind.map(Cow::into_owned),
                name: name.filter(|n| !n.is_empty()).map(Cow::into_owned),
                arguments: arguments.map(Cow::into_owned).unwrap_or_default(),
            }
        })
        .collect();
    if refusal.is_none() && logprobs.is_none() && tool_calls.is_empty() {
        return None;
    }
    Some(Box::new(Extra {
        refusal,
        tool_calls,
        logprobs,
    }))
}
