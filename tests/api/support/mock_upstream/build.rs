//! Script builders: heads, statuses, SSE events and whole answers.

use std::time::Duration;

use super::{Script, Step};

/// A response head.
pub fn head(status: u16, content_type: &str, extra: &str) -> Step {
    Step::Send(
        format!("HTTP/1.1 {status} Mock\r\ncontent-type: {content_type}\r\nconnection: close\r\n{extra}\r\n").into_bytes(),
    )
}

/// A whole response with a body.
pub fn status(code: u16, body: &str) -> Script {
    Script(vec![
        head(code, "application/json", ""),
        Step::Send(body.as_bytes().to_vec()),
    ])
}

/// An SSE data event.
pub fn data(payload: &str) -> Step {
    Step::Send(format!("data: {payload}\n\n").into_bytes())
}

/// A content delta chunk's JSON.
pub fn content(text: &str) -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]}).to_string()
}

/// A reasoning delta chunk's JSON.
pub fn reasoning(text: &str) -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {"reasoning_content": text}}]}).to_string()
}

/// A role-only delta chunk's JSON.
pub fn role() -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        .to_string()
}

/// A finish chunk's JSON.
pub fn finish() -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string()
}

/// A whole, well-formed SSE answer writing `text` in pieces.
pub fn sse_answer(pieces: &[&str]) -> Script {
    let mut steps = vec![head(200, "text/event-stream", ""), data(&role())];
    steps.extend(pieces.iter().map(|p| data(&content(p))));
    steps.push(data(&finish()));
    steps.push(data("[DONE]"));
    Script(steps)
}

/// A whole SSE answer in chunked encoding, on a connection the mock keeps open
/// for the next request; or, with `then_close`, closes a moment later, after the
/// gateway has put it aside as idle.
pub fn keep_alive_answer(pieces: &[&str], then_close: bool) -> Script {
    let events = answer_events(pieces);
    let mut steps = vec![Step::Send(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec(),
    )];
    for event in events {
        let frame = format!("data: {event}\n\n");
        steps.push(Step::Send(
            format!("{:x}\r\n{frame}\r\n", frame.len()).into_bytes(),
        ));
    }
    steps.push(Step::Send(b"0\r\n\r\n".to_vec()));
    steps.push(if then_close {
        Step::Pause(Duration::from_millis(50))
    } else {
        Step::KeepAlive
    });
    Script(steps)
}

/// The data payloads of a whole answer writing `pieces`: role, contents, finish, `[DONE]`.
pub fn answer_events(pieces: &[&str]) -> Vec<String> {
    let mut events = vec![role()];
    events.extend(pieces.iter().map(|p| content(p)));
    events.push(finish());
    events.push("[DONE]".to_owned());
    events
}

/// An SSE head followed by the given steps.
pub fn sse(steps: Vec<Step>) -> Script {
    let mut all = vec![head(200, "text/event-stream", "")];
    all.extend(steps);
    Script(all)
}
