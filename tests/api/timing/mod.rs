//! Where the time goes (contract 9), from outside: each phase of an attempt in
//! its log line and histogram against upstreams that are slow in one phase on
//! purpose, a reused connection without a connect time (`phases.rs`); the trace
//! context passed to every attempt and named in every log line (`trace.rs`); the
//! waits for a slot and the job queue's age (`waits.rs`). Alerts and the
//! dashboard in real Prometheus tools in `prometheus.rs`.

mod phases;
mod prometheus;
mod trace;
mod waits;

use serde_json::Value;

use crate::support::process::LadleProcess;

/// A whole-answer chat under `X-Request-Id: request_id`, which must be answered.
pub async fn answered(gateway: &LadleProcess, request_id: &str) {
    let response = gateway.chat_as(request_id, false).await;
    assert_eq!(response.status(), 200, "{request_id}");
}

/// The one `attempt ended` line of `request_id`, after the process exited.
pub fn attempt_line(gateway: &mut LadleProcess, request_id: &str) -> Value {
    let lines = gateway.lines_of(request_id, "attempt ended");
    assert_eq!(lines.len(), 1, "{request_id}: {lines:?}");
    lines[0].clone()
}

/// A line's field in milliseconds, which must be there.
pub fn ms(line: &Value, field: &str) -> u64 {
    line[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {line}"))
}
