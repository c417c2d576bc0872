//! Trace context: the caller's `traceparent` reaches the upstream on every
//! attempt with its trace id and a new span id each, `tracestate` with it; a
//! malformed one is never passed on (ladle starts a trace, as without one); and
//! every log line of the request names the trace.

use std::collections::HashSet;
use std::time::Duration;

use super::*;
use crate::support::mock_upstream::*;
use crate::support::*;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLERS_SPAN: &str = "00f067aa0ba902b7";

/// The caller's `traceparent`.
fn callers() -> String {
    format!("00-{TRACE_ID}-{CALLERS_SPAN}-01")
}

/// The value of header `name` in a raw request head, if it is there once.
fn header(head: &str, name: &str) -> Option<String> {
    let values: Vec<&str> = head
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then_some(value.trim())
        })
        .collect();
    assert!(values.len() <= 1, "{name} twice: {head}");
    values.first().map(|v| (*v).to_owned())
}

/// A `traceparent`'s trace id and span id; it must be well formed.
fn parts(traceparent: &str) -> (String, String) {
    let fields: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(fields.len(), 4, "{traceparent}");
    assert_eq!(fields[0], "00", "{traceparent}");
    for (field, len) in [(fields[1], 32), (fields[2], 16), (fields[3], 2)] {
        let hex = field
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        assert!(field.len() == len && hex, "{traceparent}");
    }
    (fields[1].to_owned(), fields[2].to_owned())
}

/// A busy answer, retried.
fn busy() -> Script {
    status(
        503,
        r#"{"error": {"message": "当前模型访问量较大，请稍后重试"}}"#,
    )
}

#[tokio::test]
async fn every_attempt_carries_the_callers_trace_with_a_span_of_its_own() {
    let gateway = Gateway::start().await;
    let upstream = gateway.upstream();
    upstream.push([busy(), busy(), sse_answer(&["好"])]);
    let response = gateway
        .chat_request(false)
        .header("traceparent", callers())
        .header("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200);
    let requests = upstream.requests();
    assert_eq!(requests.len(), 3, "two busy attempts and the answer");
    let mut spans = HashSet::new();
    for request in &requests {
        let sent = header(&request.head, "traceparent").expect("a traceparent");
        let (trace, span) = parts(&sent);
        assert_eq!(trace, TRACE_ID, "{sent}");
        assert!(sent.ends_with("-01"), "the caller's flags: {sent}");
        assert_ne!(
            span, CALLERS_SPAN,
            "the attempt is the caller's child: {sent}"
        );
        spans.insert(span);
        let state = header(&request.head, "tracestate");
        assert_eq!(
            state.as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
    }
    assert_eq!(spans.len(), 3, "a new span id per attempt: {spans:?}");
}

#[tokio::test]
async fn a_malformed_traceparent_is_never_passed_on_and_a_new_trace_is_started() {
    let gateway = Gateway::start().await;
    let upstream = gateway.upstream();
    upstream.cycle([sse_answer(&["好"])]);
    let malformed = [
        format!("00-{}-{CALLERS_SPAN}-01", TRACE_ID.to_uppercase()),
        format!("00-{TRACE_ID}-0000000000000000-01"),
        format!("00-{TRACE_ID}-{CALLERS_SPAN}"),
        format!("ff-{TRACE_ID}-{CALLERS_SPAN}-01"),
        "not-a-traceparent".to_owned(),
    ];
    let mut traces = HashSet::new();
    for value in &malformed {
        let mut request = gateway
            .chat_request(false)
            .header("tracestate", "congo=t61rcWkgMzE");
        if let Ok(value) = reqwest::header::HeaderValue::from_str(value) {
            request = request.header("traceparent", value);
        }
        let response = request.send().await.expect("the gateway answers");
        assert_eq!(response.status(), 200, "{value}");
    }
    // And one without any.
    assert_eq!(gateway.chat(false).await.status(), 200);
    for request in upstream.requests() {
        let sent = header(&request.head, "traceparent").expect("a trace of ladle's own");
        let (trace, _) = parts(&sent);
        assert_ne!(trace.to_lowercase(), TRACE_ID, "{sent}");
        assert!(!request.head.contains(CALLERS_SPAN), "{}", request.head);
        assert_eq!(
            header(&request.head, "tracestate"),
            None,
            "no state without its trace"
        );
        traces.insert(trace);
    }
    assert_eq!(traces.len(), malformed.len() + 1, "a new trace per request");
}

#[tokio::test]
async fn every_log_line_of_the_request_names_its_trace() {
    let upstream = MockUpstream::start().await;
    upstream.push([busy()]);
    upstream.fallback(sse_answer(&["好"]));
    let mut gateway = LadleProcess::start(&upstream.url, &[]).await;
    let response = gateway
        .chat_request(false)
        .header("x-request-id", "traced")
        .header("traceparent", callers())
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200);
    answered(&gateway, "untraced").await;
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let lines: Vec<Value> = gateway
        .all_lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["request_id"] == "traced")
        .collect();
    let messages: Vec<&str> = lines.iter().filter_map(|l| l["message"].as_str()).collect();
    assert_eq!(
        messages,
        [
            "attempt ended",
            "attempt ended",
            "completion ended",
            "request answered"
        ],
        "{lines:#?}"
    );
    for line in &lines {
        assert_eq!(line["trace_id"], TRACE_ID, "{line}");
    }
    // Without a traceparent, the trace ladle started, the same in every line and
    // the one the upstream was sent.
    let untraced = gateway.logged("untraced", "request answered");
    let started = untraced[0]["trace_id"]
        .as_str()
        .expect("a trace id")
        .to_owned();
    assert_eq!(
        gateway.logged("untraced", "attempt ended")[0]["trace_id"],
        started
    );
    let sent = header(&upstream.requests()[2].head, "traceparent").expect("sent");
    assert_eq!(parts(&sent).0, started);
}

#[tokio::test]
async fn an_admin_change_is_logged_with_its_trace() {
    let upstream = MockUpstream::start().await;
    let env = [("LADLE_ADMIN_TOKEN", ADMIN_TOKEN)];
    let mut gateway = LadleProcess::start(&upstream.url, &env).await;
    let deleted = gateway
        .admin(reqwest::Method::DELETE, "/admin/prompts/fridge")
        .header("x-request-id", "admin-delete")
        .header("traceparent", callers())
        .send()
        .await
        .expect("the gateway answers");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let changed = gateway.lines_of("admin-delete", "prompt changed through the admin API");
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["trace_id"], TRACE_ID, "{}", changed[0]);
}

#[tokio::test]
async fn a_tracestate_past_the_w3c_bounds_is_not_passed_on() {
    let gateway = Gateway::start().await;
    let upstream = gateway.upstream();
    upstream.cycle([sse_answer(&["好"])]);
    let members = |n: usize| {
        (0..n)
            .map(|i| format!("v{i}=x"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let long = format!("congo={}", "t".repeat(506));
    let cases = [
        (members(32), true),
        (members(33), false),
        (long.clone(), true),
        (format!("{long}x"), false),
    ];
    for (state, passed) in &cases {
        let response = gateway
            .chat_request(false)
            .header("traceparent", callers())
            .header("tracestate", state)
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(response.status(), 200);
        let sent = upstream
            .requests()
            .last()
            .map(|r| header(&r.head, "tracestate"));
        let expected = passed.then(|| state.clone());
        assert_eq!(sent.flatten(), expected, "{} bytes", state.len());
    }
}
