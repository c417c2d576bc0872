//! The scripts the tests' mock upstream plays, beyond `mock_upstream`'s builders:
//! answers paced in time, streams that never end, answers with usage or a
//! `Content-Length`, the recipe sample, and every failure row of the contract.

use std::time::Duration;

use super::fixtures::{fixture_text, pieces};
use super::mock_upstream::*;

/// The busy error a Zhipu-style upstream writes as a stream chunk.
pub const BUSY_CHUNK: &str =
    r#"{"error":{"code":"1305","message":"当前模型访问量较大，请稍后重试"}}"#;

/// An SSE answer whose first piece comes at once and each later one after `gap`.
pub fn slow_answer(pieces: &[&str], gap: Duration) -> Script {
    let mut steps = vec![data(&role())];
    for (n, piece) in pieces.iter().enumerate() {
        if n > 0 {
            steps.push(Step::Pause(gap));
        }
        steps.push(data(&content(piece)));
    }
    steps.push(data(&finish()));
    steps.push(data("[DONE]"));
    sse(steps)
}

/// An answer whose role and each piece come `pause_ms` apart (every gap within
/// the idle timeout), then the finish.
pub fn paced_answer(pieces: &[&str], pause_ms: u64) -> Script {
    let pause = || Step::Pause(Duration::from_millis(pause_ms));
    let mut steps = vec![data(&role())];
    for piece in pieces {
        steps.push(pause());
        steps.push(data(&content(piece)));
    }
    steps.extend([pause(), data(&finish()), data("[DONE]")]);
    sse(steps)
}

/// An answer ("慢") that takes 200 ms to start (the idle timeout is 300 ms).
pub fn late_answer() -> Script {
    sse(vec![
        Step::Pause(Duration::from_millis(200)),
        data(&content("慢")),
        data(&finish()),
        data("[DONE]"),
    ])
}

/// A content chunk writing `text` every `gap`, for ever.
pub fn drip(text: &str, gap: Duration) -> Script {
    let chunk = format!("data: {}\n\n", content(text));
    sse(vec![Step::Drip(chunk.into_bytes(), gap)])
}

/// Role-only deltas every 50 ms: events that keep the idle timer reset, never output.
pub fn only_role_deltas() -> Script {
    sse(vec![Step::Drip(
        format!("data: {}\n\n", role()).into_bytes(),
        Duration::from_millis(50),
    )])
}

/// An answer whose last chunk reports usage, as `include_usage` asks.
pub fn answer_with_usage(text: &str) -> Script {
    sse(vec![
        data(&content(text)),
        data(&finish()),
        data(
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}"#,
        ),
        data("[DONE]"),
    ])
}

/// The events of a whole answer writing `pieces`, as one SSE text.
pub fn events_text(pieces: &[&str]) -> String {
    answer_events(pieces)
        .iter()
        .map(|e| format!("data: {e}\n\n"))
        .collect()
}

/// A whole answer framed by `Content-Length`, with `extra` head lines, on a
/// connection the mock keeps for the next request.
pub fn length_answer(pieces: &[&str], extra: &str) -> Script {
    let sse = events_text(pieces);
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{extra}content-length: {}\r\n\r\n",
        sse.len()
    );
    Script(vec![
        Step::Send((head + &sse).into_bytes()),
        Step::KeepAlive,
    ])
}

/// The recipe sample's raw model output, streamed in pieces of 7 characters.
pub fn recipe_answer() -> Script {
    let raw = fixture_text("recipe-raw-model-output.txt");
    let parts = pieces(&raw, 7);
    sse_answer(&parts.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Every failure row of the contract's table, and two good answers.
pub fn failure_rows() -> Vec<Script> {
    let whole = r#"{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"整段"},"finish_reason":"stop"}]}"#;
    vec![
        status(503, r#"{"error":{"message":"overloaded"}}"#),
        Script(vec![
            head(429, "application/json", "retry-after: 1\r\n"),
            Step::Send(b"{}".to_vec()),
        ]),
        sse(vec![data(&role()), data(BUSY_CHUNK)]),
        // Stall before output.
        sse(vec![data(&role()), Step::Stall]),
        sse(vec![
            data(&role()),
            Step::Pause(Duration::from_millis(10)),
            Step::Reset,
        ]),
        // EOF after output, without [DONE] or finish_reason.
        sse(vec![data(&role()), data(&content("半"))]),
        status(500, r#"{"error":{"message":"internal"}}"#),
        status(401, r#"{"error":{"message":"bad key"}}"#),
        sse(vec![data(&content("半")), Step::Stall]),
        // An upstream that ignores `stream`.
        status(200, whole),
        sse_answer(&["好"]),
    ]
}
