//! One request to complete, as the attempt loop sees it: its `Spec`.

use bytes::Bytes;

use super::answer::Gather;
use crate::engine::bulkhead::{Bulkhead, Slots};
use crate::engine::normalize::OutputKind;
use crate::engine::retry::{Deadline, RetryPolicy};
use crate::engine::trace::TraceContext;

/// One request to complete: what to send, under which rules, gathering what.
pub struct Spec {
    /// The upstream request body, with `stream: true`.
    pub body: Bytes,
    /// The retry policy for this request.
    pub policy: RetryPolicy,
    /// The request's one deadline.
    pub deadline: Deadline,
    /// The task's output kind; `None` returns the text as it is.
    pub output: Option<OutputKind>,
    /// What an attempt gathers of the answer's text (`LADLE_MAX_ANSWER_BYTES`
    /// per choice): all of it when ladle assembles the answer, up to the bound
    /// when a relayed stream is kept, none otherwise. With any, the upstream's
    /// completion id and model are kept too.
    pub gather: Gather,
    /// The bound on the text a continuation carries (`LADLE_MAX_ANSWER_BYTES`)
    /// when the request asked for one choice; `None`: it is never continued.
    pub prefix_limit: Option<usize>,
    /// The task's name (`""` for chat), for the token counts.
    pub task: String,
    /// The model sent upstream, for the token counts.
    pub model: String,
    /// The client key's name (`""` without keys; a job run's, its job's), for the
    /// token counts.
    pub client: String,
    /// The slots taken already (a job's run waits for them without a time
    /// limit, and its deadline starts once it has them).
    pub slot: Option<Slots>,
    /// The task's bulkhead (its `max_inflight`), if it has one.
    pub task_bulkhead: Option<Bulkhead>,
    /// The request's trace, passed on to every attempt (its log lines are
    /// written in the edge's span, which names the request, route and job).
    pub trace: TraceContext,
}
