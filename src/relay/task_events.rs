//! The task route's named SSE events, and its `200` body.
//!
//! Events follow the contract's table: `attempt`, `retry`, `reset` (only when the
//! failed attempt had written output), `continue` (11.4: after a continuation's
//! `attempt`, and nothing voided), `delta`, then exactly one `result` or
//! `error`, whose data is exactly the non-streaming body. A `: ping` comment goes
//! out whenever 15 s pass without an event.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use serde::Serialize;
use serde_json::{Value, json};

use super::Reply;
use crate::engine::completion::{Finished, Output, Progress};
use crate::error::ApiError;
use crate::ops::facts::LateWord;
use crate::wall::rfc3339;

/// Answers at once with an SSE stream of the completion's progress.
pub fn streaming(
    progress: impl Stream<Item = Progress> + Send + 'static,
    reply: Reply,
) -> Response {
    let failed = LateWord::default();
    let told = failed.clone();
    let events = progress.flat_map(move |step| {
        if let Progress::Failed(gave_up) = &step {
            told.set(gave_up.code());
        }
        let named = named_events(&step, &reply).into_iter();
        stream::iter(named.map(|named| Event::default().event(named.name).data(named.data)))
    });
    let keep_alive = KeepAlive::new()
        .interval(Duration::from_secs(15))
        .text(" ping");
    let mut response = Sse::new(events.map(Ok::<_, Infallible>))
        .keep_alive(keep_alive)
        .into_response();
    // The request's log line names the error event the stream may end with.
    response.extensions_mut().insert(failed);
    response
}

/// One named event: what a task stream sends, and what a job's run keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedEvent {
    /// `attempt`, `retry`, `reset`, `continue`, `delta`, `result` or `error`.
    pub name: &'static str,
    /// A JSON object's text.
    pub data: String,
}

/// The events one step of progress becomes.
pub fn named_events(step: &Progress, reply: &Reply) -> Vec<NamedEvent> {
    match step {
        Progress::Attempt(attempt) => vec![event("attempt", &json!({ "attempt": attempt }))],
        Progress::Chunk(received) => {
            let chunk = &received.chunk.first;
            let reasoning = chunk
                .reasoning
                .as_ref()
                .map(|text| event("delta", &json!({ "reasoning": text })));
            let content = chunk
                .content
                .as_ref()
                .map(|text| event("delta", &json!({ "content": text })));
            reasoning.into_iter().chain(content).collect()
        }
        Progress::Retry {
            attempt,
            reason,
            wait,
            output_began,
            upstream,
        } => {
            let wait_ms = wait.as_millis() as u64;
            let retry = event(
                "retry",
                &json!({
                    "attempt": attempt,
                    "reason": reason.name(),
                    "wait_ms": wait_ms,
                    "upstream": upstream,
                }),
            );
            let reset = output_began.then(|| event("reset", &json!({ "attempt": attempt + 1 })));
            std::iter::once(retry).chain(reset).collect()
        }
        Progress::Continue {
            attempt,
            upstream,
            chars,
        } => vec![event(
            "continue",
            &json!({"attempt": attempt, "upstream": upstream, "chars": chars}),
        )],
        Progress::Finished(finished) => {
            let text = reply.body_text(finished);
            // JSON text is UTF-8: no copy is made.
            let data = String::from_utf8(text)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            vec![NamedEvent {
                name: "result",
                data,
            }]
        }
        Progress::Failed(gave_up) => {
            let error = ApiError::from(gave_up.clone());
            vec![event("error", &error.body(&reply.request_id))]
        }
    }
}

fn event(name: &'static str, data: &Value) -> NamedEvent {
    NamedEvent {
        name,
        data: data.to_string(),
    }
}

/// The non-streaming `200` body, also the `result` event's data: a type, not a
/// `Value`, so that the output's text goes in as it is.
#[derive(Serialize)]
pub struct ResultBody<'a> {
    task: &'a str,
    output: &'a Option<Output>,
    meta: ResultMeta<'a>,
}

#[derive(Serialize)]
struct ResultMeta<'a> {
    request_id: &'a str,
    attempts: u32,
    elapsed_ms: u64,
    model: &'a str,
    upstream: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cached_at: Option<String>,
}

impl<'a> ResultBody<'a> {
    /// The body of `finished`, task `task`'s answer to request `request_id`.
    pub fn of(finished: &'a Finished, task: &'a str, request_id: &'a str) -> ResultBody<'a> {
        ResultBody {
            task,
            output: &finished.output,
            meta: ResultMeta {
                request_id,
                attempts: finished.attempts,
                elapsed_ms: finished.elapsed.as_millis() as u64,
                model: &finished.model,
                upstream: &finished.upstream,
                usage: finished.usage.as_ref(),
                cache: finished.cache.map(|cached| cached.name()),
                cached_at: finished.cache.and_then(|c| c.made_at()).map(rfc3339),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::engine::completion::Cached;

    fn finished(usage: Option<Value>, cache: Option<Cached>) -> Finished {
        Finished {
            choices: Vec::new(),
            usage,
            meta: Default::default(),
            output: Some(Output::of(&json!({"title": "宫保鸡丁", "servings": 2}))),
            attempts: 2,
            upstream: "primary".into(),
            model: "glm".into(),
            elapsed: Duration::from_millis(1_250),
            cache,
            gathered: true,
        }
    }

    #[test]
    fn the_body_is_pinned_with_its_fields_in_their_order() {
        let made = finished(Some(json!({"total_tokens": 9})), None);
        assert_eq!(
            serde_json::to_string(&ResultBody::of(&made, "recipe", "r-1")).expect("writes"),
            r#"{"task":"recipe","output":{"title":"宫保鸡丁","servings":2},"meta":{"request_id":"r-1","attempts":2,"elapsed_ms":1250,"model":"glm","upstream":"primary","usage":{"total_tokens":9}}}"#
        );
        let kept = finished(
            None,
            Some(Cached::Hit {
                at: 1_796_126_791_000,
            }),
        );
        assert_eq!(
            serde_json::to_string(&ResultBody::of(&kept, "recipe", "r-2")).expect("writes"),
            r#"{"task":"recipe","output":{"title":"宫保鸡丁","servings":2},"meta":{"request_id":"r-2","attempts":2,"elapsed_ms":1250,"model":"glm","upstream":"primary","cache":"hit","cached_at":"2026-12-01T12:06:31.000Z"}}"#
        );
    }

    #[test]
    fn the_result_event_carries_the_same_text_as_the_json_answer() {
        let reply = Reply {
            shape: crate::relay::ResponseShape::TaskEvents,
            request_id: "r-3".into(),
            route: crate::relay::CompletionRoute::Task("recipe".into()),
            model: "glm".into(),
            created: 1_796_126_791,
            keep_alive: None,
            made: None,
        };
        let made = finished(None, Some(Cached::Miss));
        let text = reply.body_text(&made);
        let value: Value = serde_json::from_slice(&text).expect("JSON");
        assert_eq!(value, reply.body(&made));
        assert_eq!(value["meta"]["cache"], "miss");
        assert_eq!(value["output"]["title"], "宫保鸡丁");
    }
}
