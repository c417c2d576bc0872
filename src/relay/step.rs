//! What an OpenAI stream carries, step by step, before and after its commit: a
//! completion's progress, or a waited-for run's outcome, in one vocabulary.

use bytes::Bytes;

use super::wire::{DONE, whole_as_chunk};
use crate::engine::completion::Progress;
use crate::error::ApiError;

/// One step of what an OpenAI stream carries, before and after its commit.
#[derive(Debug)]
pub enum Step {
    /// An event that is not output (a role-only chunk, say): held until the commit.
    Hold(Bytes),
    /// An output event: the commit point, if it is the first.
    Output(Bytes),
    /// Attempt `n` starts: what was held is void.
    Attempt(u32),
    /// A retry follows: what was held is void.
    Void,
    /// A continuation follows (contract 11.4): nothing is void, nothing is sent.
    Continued,
    /// The last bytes, already framed (`[DONE]`, or a kept answer's chunks).
    End(Bytes),
    /// The request failed.
    Failed(ApiError),
}

impl From<Progress> for Step {
    fn from(progress: Progress) -> Step {
        match progress {
            Progress::Chunk(received) => {
                let output = received.chunk.is_output();
                let raw = match received.raw {
                    Some(raw) => raw,
                    None => whole_as_chunk(&received.chunk),
                };
                if output {
                    Step::Output(raw)
                } else {
                    Step::Hold(raw)
                }
            }
            Progress::Attempt(n) => Step::Attempt(n),
            Progress::Retry { .. } => Step::Void,
            Progress::Continue { .. } => Step::Continued,
            Progress::Finished(_) => Step::End(Bytes::from_static(DONE)),
            Progress::Failed(gave_up) => Step::Failed(ApiError::from(gave_up)),
        }
    }
}
