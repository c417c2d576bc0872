//! What the current attempt has written, gathered chunk by chunk: the whole answer
//! a non-streaming caller gets, every choice apart (by `index`), each bounded by
//! `LADLE_MAX_ANSWER_BYTES`. Reset with each attempt. A relayed stream gathers no
//! text (its client has every word already) unless it is kept under an
//! idempotency key: then it gathers up to the same bound, and past it stops and
//! is not kept, while its client still gets every word.

mod choice;

pub use choice::{ChoiceAnswer, Logprobs, ToolCall};

use serde_json::Value;

use crate::engine::failure::FailureKind;
use crate::engine::upstream::chunk::{Choice, Chunk, Meta};

/// The most choices (`n`) an answer ladle assembles may have.
pub const MAX_CHOICES: u32 = 8;

/// What an attempt's answer gathers of its text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Gather {
    /// None: a relayed stream whose client has every word.
    #[default]
    Nothing,
    /// All of it, at most this many bytes per choice, or the attempt fails: an
    /// answer ladle assembles.
    Whole(usize),
    /// Up to this many bytes per choice, to be kept: a relayed stream under an
    /// idempotency key. Past it, gathering stops and the answer is not kept.
    ToKeep(usize),
}

/// The choices, usage and identity of one attempt's answer so far.
#[derive(Debug, Default)]
pub struct Answer {
    /// Every choice seen, in order of first appearance.
    pub choices: Vec<ChoiceAnswer>,
    /// The upstream's usage report.
    pub usage: Option<Value>,
    /// The upstream completion's id and model.
    pub meta: Meta,
    /// What it gathers.
    gather: Gather,
    /// A `ToKeep` answer that passed its bound: what it gathered is not whole.
    cut: bool,
}

/// Why an answer cannot be gathered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// A choice's content and reasoning passed this many bytes.
    TooLarge(usize),
    /// A choice index of `MAX_CHOICES` or more.
    Index(u32),
}

impl Answer {
    /// An empty answer that gathers as `gather` says.
    pub fn new(gather: Gather) -> Self {
        Answer {
            gather,
            ..Answer::default()
        }
    }

    /// Whether its choices hold the whole answer's text.
    pub fn gathered(&self) -> bool {
        self.gather != Gather::Nothing && !self.cut
    }

    /// Adds what one chunk wrote.
    pub fn absorb(&mut self, chunk: &Chunk) -> Result<(), Overflow> {
        match self.gather {
            Gather::Nothing => {}
            Gather::Whole(limit) => self.absorb_text(chunk, limit)?,
            Gather::ToKeep(_) if self.cut => {}
            Gather::ToKeep(limit) => {
                if self.absorb_text(chunk, limit).is_err() {
                    self.cut = true;
                    self.choices.clear();
                }
            }
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(Value::clone(usage));
        }
        if let Some(meta) = &chunk.meta {
            if self.meta.id.is_none() {
                self.meta = Meta::clone(meta);
            } else if self.meta.system_fingerprint.is_none() {
                self.meta
                    .system_fingerprint
                    .clone_from(&meta.system_fingerprint);
            }
        }
        Ok(())
    }

    /// Adds what every choice of a chunk wrote.
    fn absorb_text(&mut self, chunk: &Chunk, limit: usize) -> Result<(), Overflow> {
        chunk
            .choices()
            .try_for_each(|choice| self.absorb_choice(choice, limit))
    }

    /// The first choice's content (what a task's output is made from).
    pub fn content(&self) -> &str {
        self.choices
            .iter()
            .find(|c| c.index == 0)
            .map_or("", |c| c.content.as_str())
    }

    fn absorb_choice(&mut self, choice: &Choice, limit: usize) -> Result<(), Overflow> {
        let adds = choice.content.is_some() || choice.reasoning.is_some() || choice.extra.is_some();
        if !adds && choice.finish_reason.is_none() {
            return Ok(());
        }
        if choice.index >= MAX_CHOICES {
            // A finish reason alone of a choice never kept is nothing to keep.
            return match adds {
                true => Err(Overflow::Index(choice.index)),
                false => Ok(()),
            };
        }
        let at = match self.choices.iter().position(|c| c.index == choice.index) {
            Some(at) => at,
            None => {
                self.choices.push(ChoiceAnswer::new(choice.index));
                self.choices.len() - 1
            }
        };
        let kept = &mut self.choices[at];
        kept.absorb(choice, limit)
            .map_err(|_| Overflow::TooLarge(limit))?;
        if let Some(reason) = &choice.finish_reason {
            kept.finish_reason = Some(reason.clone());
        }
        Ok(())
    }
}

impl From<Overflow> for FailureKind {
    fn from(overflow: Overflow) -> Self {
        match overflow {
            Overflow::TooLarge(limit) => FailureKind::AnswerTooLarge(limit),
            Overflow::Index(index) => FailureKind::Protocol(format!(
                "the upstream sent choice {index}; at most {MAX_CHOICES} are assembled"
            )),
        }
    }
}

#[cfg(test)]
mod tests;
