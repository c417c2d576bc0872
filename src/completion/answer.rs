//! What the current attempt has written, gathered chunk by chunk: the whole answer
//! a non-streaming caller gets, every choice apart (by `index`), each bounded by
//! `LADLE_MAX_ANSWER_BYTES`. Reset with each attempt. A relayed stream gathers no
//! text: its client has every word already.

use serde_json::Value;

use crate::failure::FailureKind;
use crate::upstream::chunk::{Chunk, Meta};

/// The most choices (`n`) an answer ladle assembles may have.
pub const MAX_CHOICES: u32 = 8;

/// One choice's text and finish reason so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChoiceAnswer {
    /// The choice's `index`.
    pub index: u32,
    /// Its content.
    pub content: String,
    /// Its reasoning.
    pub reasoning: String,
    /// Its finish reason, once given.
    pub finish_reason: Option<String>,
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
    /// The most text one choice may gather; `None` gathers none (a relayed stream).
    limit: Option<usize>,
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
    /// An empty answer that gathers at most `limit` bytes of text per choice, or
    /// none.
    pub fn new(limit: Option<usize>) -> Self {
        Answer {
            limit,
            ..Answer::default()
        }
    }

    /// Adds what one chunk wrote.
    pub fn absorb(&mut self, chunk: &Chunk) -> Result<(), Overflow> {
        if let Some(limit) = self.limit {
            self.absorb_choice(
                chunk.index,
                chunk.content.as_deref(),
                chunk.reasoning.as_deref(),
                limit,
            )?;
            for more in &chunk.more {
                self.absorb_choice(
                    more.index,
                    more.content.as_deref(),
                    more.reasoning.as_deref(),
                    limit,
                )?;
            }
            self.finish(chunk.index, chunk.finish_reason.as_deref());
            for more in &chunk.more {
                self.finish(more.index, more.finish_reason.as_deref());
            }
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(Value::clone(usage));
        }
        if let Some(meta) = &chunk.meta
            && self.meta.id.is_none()
        {
            self.meta = Meta::clone(meta);
        }
        Ok(())
    }

    /// The first choice's content (what a task's output is made from).
    pub fn content(&self) -> &str {
        self.choices
            .iter()
            .find(|c| c.index == 0)
            .map_or("", |c| c.content.as_str())
    }

    fn choice(&mut self, index: u32) -> Result<&mut ChoiceAnswer, Overflow> {
        if index >= MAX_CHOICES {
            return Err(Overflow::Index(index));
        }
        let at = match self.choices.iter().position(|c| c.index == index) {
            Some(at) => at,
            None => {
                self.choices.push(ChoiceAnswer {
                    index,
                    ..ChoiceAnswer::default()
                });
                self.choices.len() - 1
            }
        };
        Ok(&mut self.choices[at])
    }

    fn absorb_choice(
        &mut self,
        index: u32,
        content: Option<&str>,
        reasoning: Option<&str>,
        limit: usize,
    ) -> Result<(), Overflow> {
        if content.is_none() && reasoning.is_none() {
            return Ok(());
        }
        let choice = self.choice(index)?;
        let adding = content.map_or(0, str::len) + reasoning.map_or(0, str::len);
        if choice.content.len() + choice.reasoning.len() + adding > limit {
            return Err(Overflow::TooLarge(limit));
        }
        choice.content.push_str(content.unwrap_or_default());
        choice.reasoning.push_str(reasoning.unwrap_or_default());
        Ok(())
    }

    fn finish(&mut self, index: u32, reason: Option<&str>) {
        if let Some(reason) = reason
            && let Ok(choice) = self.choice(index)
        {
            choice.finish_reason = Some(reason.to_owned());
        }
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
mod tests {
    use super::*;
    use crate::upstream::chunk::Choice;

    fn text(index: u32, content: &str) -> Chunk {
        Chunk {
            index,
            content: Some(content.into()),
            ..Chunk::default()
        }
    }

    #[test]
    fn choices_are_gathered_apart_by_index() {
        let mut answer = Answer::new(Some(100));
        answer.absorb(&text(0, "AAA")).expect("fits");
        answer.absorb(&text(1, "aaa")).expect("fits");
        let both = Chunk {
            index: 0,
            content: Some(" BBB".into()),
            finish_reason: Some("stop".into()),
            more: vec![Choice {
                index: 1,
                content: Some("bbb".into()),
                finish_reason: Some("length".into()),
                ..Choice::default()
            }],
            ..Chunk::default()
        };
        answer.absorb(&both).expect("fits");
        let texts: Vec<_> = answer
            .choices
            .iter()
            .map(|c| (c.index, c.content.as_str(), c.finish_reason.as_deref()))
            .collect();
        assert_eq!(
            texts,
            [(0, "AAA BBB", Some("stop")), (1, "aaabbb", Some("length"))]
        );
        assert_eq!(answer.content(), "AAA BBB");
    }

    #[test]
    fn a_choice_past_the_limit_or_the_most_choices_overflows() {
        let mut answer = Answer::new(Some(5));
        answer
            .absorb(&text(0, "12345"))
            .expect("exactly the limit fits");
        assert_eq!(answer.absorb(&text(0, "6")), Err(Overflow::TooLarge(5)));
        assert_eq!(
            Answer::new(Some(5)).absorb(&text(MAX_CHOICES, "x")),
            Err(Overflow::Index(MAX_CHOICES))
        );
    }

    #[test]
    fn a_relayed_stream_gathers_no_text() {
        let mut answer = Answer::new(None);
        answer
            .absorb(&text(0, &"x".repeat(10_000)))
            .expect("no limit");
        assert!(answer.choices.is_empty());
    }
}
