//! Progress of a completion → what the client sees.
//!
//! `openai` speaks the OpenAI chat format and owns the commit point: nothing, not
//! even a status line, reaches a streaming client before the first output chunk.
//! `task_events` speaks the task route's named SSE events, where a retry after
//! output is announced with `reset` instead of being hidden. `batched` writes a
//! committed OpenAI stream.

mod batched;
mod keepalive;
pub mod openai;
pub mod replay;
pub mod task_events;
