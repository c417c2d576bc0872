//! One request to complete, as the attempt loop sees it.

use bytes::Bytes;

use crate::normalize::OutputKind;
use crate::retry::{Deadline, RetryPolicy};

/// One request to complete.
pub struct Job {
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
    /// Whether to keep the upstream's completion id and model: a whole answer
    /// reports them, while a relayed stream carries them in its own chunks.
    pub wants_meta: bool,
    /// The model sent upstream, for the token counts.
    pub model: String,
}

/// The completion route a request came in on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRoute {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/tasks/{name}`, with the task's name.
    Task(String),
}

impl CompletionRoute {
    /// The route's path pattern, as logs and metrics name it.
    pub fn path(&self) -> &'static str {
        match self {
            CompletionRoute::Chat => "/v1/chat/completions",
            CompletionRoute::Task(_) => "/v1/tasks/{name}",
        }
    }

    /// The task's name; `None` for chat.
    pub fn task(&self) -> Option<&str> {
        match self {
            CompletionRoute::Chat => None,
            CompletionRoute::Task(name) => Some(name),
        }
    }
}
