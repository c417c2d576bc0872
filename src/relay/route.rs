//! The completion routes, as the router, the logs and the metrics name them:
//! the edge's, so the attempt loop knows none of them.

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
