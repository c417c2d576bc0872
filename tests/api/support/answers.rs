//! Reading what came back, and what was sent upstream: JSON bodies, SSE events,
//! the headers the contract names, metric series in a scrape.

use reqwest::Response;
use serde_json::Value;

use super::gateway::Gateway;
use super::http::Endpoint;
use super::mock_upstream::MockUpstream;

/// The JSON body of a response.
pub async fn json_of(response: Response) -> Value {
    response.json().await.expect("a JSON body")
}

/// Status and `error` object of an error response.
pub async fn error_of(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = json_of(response).await;
    (status, body["error"].clone())
}

/// Whether an answer was taken from another request's run (`Idempotent-Replayed`).
pub fn replayed(response: &Response) -> bool {
    response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

/// The `ETag` header of a response.
pub fn etag_of(response: &Response) -> String {
    response
        .headers()
        .get("etag")
        .expect("an ETag header")
        .to_str()
        .expect("an ASCII ETag")
        .to_owned()
}

/// The `x-should-retry` header of a response.
pub fn should_retry(response: &Response) -> &str {
    response
        .headers()
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
        .expect("x-should-retry is set")
}

/// Splits an SSE body into `(event, data)` pairs; comments are kept as `(":", text)`.
pub fn sse_events(body: &str) -> Vec<(String, String)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = String::from("message");
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(comment) = line.strip_prefix(':') {
                    return (":".to_owned(), comment.trim().to_owned());
                }
                if let Some(name) = line.strip_prefix("event:") {
                    event = name.trim().to_owned();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value));
                }
            }
            (event, data.join("\n"))
        })
        .collect()
}

/// The content an OpenAI chunk stream wrote, its pieces joined.
pub fn streamed_text(body: &str) -> String {
    sse_events(body)
        .iter()
        .filter_map(|(_, data)| serde_json::from_str::<Value>(data).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// A task's events with their JSON data, comments left out.
pub fn task_events(text: &str) -> Vec<(String, Value)> {
    sse_events(text)
        .into_iter()
        .filter(|(event, _)| event != ":")
        .map(|(event, data)| {
            (
                event,
                serde_json::from_str(&data).expect("event data is JSON"),
            )
        })
        .collect()
}

/// The names of a task's events, a run of one name counted once.
pub fn event_names(events: &[(String, Value)]) -> Vec<&str> {
    let mut names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    names.dedup();
    names
}

/// The value of one series in a `/metrics` text.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

/// The last user message of the upstream request at `index`.
pub fn user_message_sent(upstream: &MockUpstream, index: usize) -> String {
    let requests = upstream.requests();
    let messages = requests[index].body["messages"]
        .as_array()
        .expect("messages")
        .clone();
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Asserts a chat answer failed the way an upstream that never started does:
/// `504 upstream_timeout` once the deadline ran out, after retries as not started.
pub async fn assert_not_started_to_the_deadline(gateway: &Gateway, response: Response) {
    assert_eq!(response.status(), 504);
    assert_eq!(json_of(response).await["error"]["code"], "upstream_timeout");
    let retried = gateway
        .metric("ladle_retries_total{reason=\"not_started\"}")
        .await;
    assert!(retried >= 1.0, "retried as not started: {retried}");
}

/// Asserts an error answer: its `status` and its `error.code`.
pub async fn assert_error(response: Response, status: u16, code: &str) {
    assert_eq!(response.status(), status);
    assert_eq!(json_of(response).await["error"]["code"], code);
}

/// Asserts an error answer's status and `error.code`, naming `context` and the
/// error if not; the `error` object.
pub async fn assert_error_code(
    response: Response,
    status: u16,
    code: &str,
    context: impl std::fmt::Display,
) -> Value {
    let (got, error) = error_of(response).await;
    assert_eq!(
        (got, error["code"].as_str()),
        (status, Some(code)),
        "{context} {error}"
    );
    error
}

/// Asserts an answer is the deadline's end: `504` with `deadline_exceeded`.
pub async fn assert_deadline_exceeded(response: Response) {
    assert_error(response, 504, "deadline_exceeded").await;
}

/// Asks `app` for a chat answer and asserts it came on the second upstream
/// request, after one retry for `reason`.
pub async fn assert_answered_after_one_retry(app: &Gateway, reason: &str) {
    let response = app.chat(false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(app.upstream().requests().len(), 2);
    let series = format!("ladle_retries_total{{reason=\"{reason}\"}}");
    assert_eq!(app.metric(&series).await, 1.0);
}

/// Submits `variables` to the task `name` as a job (`202`), waits up to 3 s for
/// it and asserts it succeeded in one run; the job.
pub async fn job_succeeded_in_one_run(endpoint: &Endpoint, name: &str, variables: &Value) -> Value {
    let submitted = endpoint
        .post(&format!("/v1/tasks/{name}?async=true"), variables)
        .await;
    assert_eq!(submitted.status(), 202);
    let id = json_of(submitted).await["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let job = json_of(endpoint.get(&format!("/v1/jobs/{id}?wait_ms=3000")).await).await;
    assert_eq!(
        (job["status"].as_str(), job["runs"].as_u64()),
        (Some("succeeded"), Some(1)),
        "{job}"
    );
    job
}
