//! What the current attempt has written, gathered chunk by chunk: the whole answer
//! a non-streaming caller gets. Reset with each attempt.

use serde_json::Value;

use crate::upstream::chunk::{Chunk, Meta};

/// The text, reasoning and closing facts of one attempt so far.
#[derive(Default)]
pub struct Answer {
    pub content: String,
    pub reasoning: String,
    pub finish_reason: Option<String>,
    pub usage: Option<Value>,
    pub meta: Meta,
}

impl Answer {
    /// Adds what one chunk wrote.
    pub fn absorb(&mut self, chunk: &Chunk) {
        if let Some(content) = &chunk.content {
            self.content.push_str(content);
        }
        if let Some(reasoning) = &chunk.reasoning {
            self.reasoning.push_str(reasoning);
        }
        if let Some(reason) = &chunk.finish_reason {
            self.finish_reason = Some(reason.clone());
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(Value::clone(usage));
        }
        if let Some(meta) = &chunk.meta
            && self.meta.id.is_none()
        {
            self.meta = Meta::clone(meta);
        }
    }
}
