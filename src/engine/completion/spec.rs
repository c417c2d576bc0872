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
    /// For logs: the request id.
    pub request_id: String,
    /// For logs: the route it came in on.
    pub route: CompletionRoute,
    /// What an attempt gathers of the answer's text (`LADLE_MAX_ANSWER_BYTES`
    /// per choice): all of it when ladle assembles the answer, up to the bound
    /// when a relayed stream is kept, none otherwise. With any, the upstream's
    /// completion id and model are kept too.
    pub gather: Gather,
    /// The bound on the text a continuation carries (`LADLE_MAX_ANSWER_BYTES`)
    /// when the request asked for one choice; `None`: it is never continued.
    pub prefix_limit: Option<usize>,
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
    /// For the log line: the job this is a run of.
    pub job_id: Option<String>,
    /// The request's trace, passed on to every attempt.
    pub trace: TraceContext,
}

/// The completion route a request came in on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRoute {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/tasks/{name}`, with the task's name.
    Task(String),
    /// `POST /v1/responses` (contract 12).
    Responses,
}

impl CompletionRoute {
    /// The chat route's path.
    pub const CHAT: &'static str = "/v1/chat/completions";
    /// The task route's path pattern.
    pub const TASK: &'static str = "/v1/tasks/{name}";
    /// The Responses API's create.
    pub const RESPONSES: &'static str = "/v1/responses";

    /// The route's path pattern, as the router, logs and metrics name it.
    pub fn path(&self) -> &'static str {
        match self {
            CompletionRoute::Chat => Self::CHAT,
            CompletionRoute::Task(_) => Self::TASK,
            CompletionRoute::Responses => Self::RESPONSES,
        }
    }

    /// The path the request came in on (a task's name filled in).
    pub fn request_path(&self) -> String {
        match self {
            CompletionRoute::Chat => Self::CHAT.to_owned(),
            CompletionRoute::Responses => Self::RESPONSES.to_owned(),
            CompletionRoute::Task(name) => format!("/v1/tasks/{name}"),
        }
    }

    /// The task's name; `None` for chat.
    pub fn task(&self) -> Option<&str> {
        match self {
            CompletionRoute::Chat | CompletionRoute::Responses => None,
            CompletionRoute::Task(name) => Some(name),
        }
    }
}
