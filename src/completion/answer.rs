//! What the current attempt has written, gathered chunk by chunk: the whole answer
//! a non-streaming caller gets, every choice apart (by `index`), each bounded by
//! `LADLE_MAX_ANSWER_BYTES`. Reset with each attempt. A relayed stream gathers no
//! text (its client has every word already) unless it is kept under an
//! idempotency key: then it gathers up to the same bound, and past it stops and
//! is not kept, while its client still gets every word.

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
        if let Some(meta) = &chunk.meta
            && self.meta.id.is_none()
        {
            self.meta = Meta::clone(meta);
        }
        Ok(())
    }

    /// Adds the text of every choice a chunk wrote.
    fn absorb_text(&mut self, chunk: &Chunk, limit: usize) -> Result<(), Overflow> {
        let (content, reasoning) = (chunk.content.as_deref(), chunk.reasoning.as_deref());
        self.absorb_choice(chunk.index, content, reasoning, limit)?;
        for more in &chunk.more {
            let (content, reasoning) = (more.content.as_deref(), more.reasoning.as_deref());
            self.absorb_choice(more.index, content, reasoning, limit)?;
        }
        self.finish(chunk.index, chunk.finish_reason.as_deref());
        for more in &chunk.more {
            self.finish(more.index, more.finish_reason.as_deref());
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
        let mut answer = Answer::new(Gather::Whole(100));
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
        let mut answer = Answer::new(Gather::Whole(5));
        answer
            .absorb(&text(0, "12345"))
            .expect("exactly the limit fits");
        assert_eq!(answer.absorb(&text(0, "6")), Err(Overflow::TooLarge(5)));
        assert_eq!(
            Answer::new(Gather::Whole(5)).absorb(&text(MAX_CHOICES, "x")),
            Err(Overflow::Index(MAX_CHOICES))
        );
    }

    #[test]
    fn a_relayed_stream_gathers_no_text() {
        let mut answer = Answer::new(Gather::Nothing);
        answer
            .absorb(&text(0, &"x".repeat(10_000)))
            .expect("no limit");
        assert!(answer.choices.is_empty());
        assert!(!answer.gathered());
    }

    #[test]
    fn a_kept_stream_gathers_up_to_its_bound_then_stops_without_failing() {
        let mut answer = Answer::new(Gather::ToKeep(5));
        answer.absorb(&text(0, "番")).expect("gathers");
        assert_eq!((answer.content(), answer.gathered()), ("番", true));
        answer
            .absorb(&text(0, "茄"))
            .expect("past the bound, no failure");
        answer.absorb(&text(0, "x")).expect("nor after");
        assert!(!answer.gathered(), "what it has is not the whole answer");
        assert_eq!(answer.content(), "");
    }
}
