//! Where an `ApiError` becomes a response: `IntoResponse` only places the error
//! in the response's extensions (with its `Retry-After` and, on a 401,
//! `WWW-Authenticate`), and `render_error`, called by the request observer that
//! knows the request id, writes the JSON body. `x-should-retry` keeps retries at
//! one layer on the completion routes.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::engine::trace::TraceId;
use crate::ops::request_id::RequestId;

/// The contract error code a response carries, set where errors are rendered and
/// read by the request observer for its log line.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode(pub &'static str);

/// The header the official OpenAI SDKs obey before retrying a request on their own.
pub const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");

impl ApiError {
    /// The answer of a completion route that gave up after `attempts` upstream
    /// attempts. `x-should-retry` keeps retries at one layer: once ladle has retried
    /// itself, a caller's SDK retrying too would multiply the upstream's load.
    pub fn into_completion_response(self, attempts: u32) -> Response {
        let should_retry = self.should_retry(attempts);
        let mut response = self.into_response();
        response.headers_mut().insert(SHOULD_RETRY, should_retry);
        response
    }

    fn should_retry(&self, attempts: u32) -> HeaderValue {
        let yes = self.retryable() && attempts <= 1;
        HeaderValue::from_static(if yes { "true" } else { "false" })
    }
}

/// The longest `Retry-After` ladle sends, whatever an upstream asked for.
const MAX_RETRY_AFTER_S: u64 = 3600;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status().into_response();
        if let Some(wait) = self.retry_after() {
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let seconds = seconds.clamp(1, MAX_RETRY_AFTER_S);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status() == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response.extensions_mut().insert(self);
        response
    }
}

/// Which kind of route an error is answered on: the chat route keeps some
/// upstream statuses (`ApiError::status_on_chat`), and both completion routes say
/// `x-should-retry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnsweredOn {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/tasks/{name}`.
    Task,
    /// Any other route.
    Other,
}

/// Writes the JSON body of an error response, with the request id: the one place
/// error bodies are made (called for every response by `app::observe`). An error of
/// a completion route that made no upstream attempt (a bad body, a full queue)
/// gets its `x-should-retry` here, and the chat route's status is set here.
pub fn render_error(
    mut response: Response,
    request_id: &RequestId,
    trace_id: TraceId,
    route: AnsweredOn,
) -> Response {
    let completion_route = route != AnsweredOn::Other;
    let Some(error) = response.extensions_mut().remove::<ApiError>().or_else(|| {
        // An extractor's own plain-text refusal (a malformed path or query that
        // no route maps itself) gets the contract's JSON body too.
        let plain = !response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|t| {
                t.as_bytes().starts_with(b"application/json")
                    || t.as_bytes().starts_with(b"text/event-stream")
            });
        (response.status() == StatusCode::BAD_REQUEST && plain)
            .then(|| ApiError::InvalidRequest("the request's path or query is malformed".into()))
    }) else {
        return response;
    };
    if completion_route && !response.headers().contains_key(SHOULD_RETRY) {
        let should_retry = error.should_retry(0);
        response.headers_mut().insert(SHOULD_RETRY, should_retry);
    }
    tracing::debug!(
        request_id = %request_id,
        trace_id = %trace_id,
        code = error.code(),
        message = %error,
        "request failed"
    );
    let (mut parts, _) = response.into_parts();
    if route == AnsweredOn::Chat {
        parts.status = error.status_on_chat();
    }
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    // The request's log line names the code.
    parts.extensions.insert(ErrorCode(error.code()));
    let body = error.body(request_id.as_str()).to_string();
    Response::from_parts(parts, body.into())
}

/// The whole answer, as bytes on the wire, to a request hyper refused before any
/// route saw it (`status` is hyper's own: 431 for a head over `max_head`, 400 for
/// broken framing or a bad method, URI or header): the contract's JSON error, a
/// new `X-Request-Id`, and the connection closed.
pub fn below_the_router(status: u16, max_head: usize) -> Vec<u8> {
    let error = match status {
        431 | 414 => ApiError::HeadTooLarge(max_head),
        _ => ApiError::InvalidRequest(
            "the request is malformed (framing, method, URI or a header)".into(),
        ),
    };
    let request_id = uuid::Uuid::new_v4().hyphenated().to_string();
    let body = error.body(&request_id).to_string();
    let status = error.status();
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         x-request-id: {request_id}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len(),
    );
    let mut answer = head.into_bytes();
    answer.extend_from_slice(body.as_bytes());
    answer
}
