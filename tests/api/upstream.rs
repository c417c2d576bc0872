//! Connections to the upstream: reuse, closed idle connections, framing, the URL.

use std::time::Duration;

use crate::support::mock_upstream::*;
use crate::support::scripts::{events_text, length_answer};
use crate::support::*;

#[tokio::test]
async fn consecutive_requests_share_one_upstream_connection() {
    let app = Gateway::start().await;
    app.upstream().push([
        keep_alive_answer(&["一"], false),
        keep_alive_answer(&["二"], false),
        keep_alive_answer(&["三"], false),
    ]);
    for expected in ["一", "二", "三"] {
        let response = app.chat(false).await;
        assert_eq!(response.status(), 200);
        let body = json_of(response).await;
        assert_eq!(body["choices"][0]["message"]["content"], expected);
    }
    assert_eq!(app.upstream().connections(), [0, 0, 0]);
    assert_eq!(app.upstream().open_sockets(), 1);
}

#[tokio::test]
async fn a_streamed_answer_also_leaves_its_connection_for_the_next_request() {
    let app = Gateway::start().await;
    app.upstream().push([
        keep_alive_answer(&["a"], false),
        keep_alive_answer(&["b"], false),
    ]);
    for _ in 0..2 {
        let response = app.chat(true).await;
        assert_eq!(response.status(), 200);
        let text = response.text().await.expect("body");
        assert!(text.ends_with("data: [DONE]\n\n"), "stream was {text}");
    }
    assert_eq!(app.upstream().connections(), [0, 0]);
}

#[tokio::test]
async fn an_idle_connection_the_upstream_closed_is_not_reused() {
    let app = Gateway::start().await;
    // The first answer promises keep-alive, then the upstream closes the socket.
    app.upstream().push([
        keep_alive_answer(&["first"], true),
        keep_alive_answer(&["second"], false),
    ]);
    assert_eq!(app.chat(false).await.status(), 200);
    sockets_close(app.upstream(), Duration::from_secs(1)).await;
    let response = app.chat(false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        json_of(response).await["choices"][0]["message"]["content"],
        "second"
    );
    assert_eq!(app.upstream().connections(), [0, 1]);
    assert_eq!(
        app.metric("ladle_retries_total{reason=\"not_started\"}")
            .await,
        0.0,
        "the closed connection cost no attempt"
    );
    assert_eq!(
        app.metric("ladle_upstream_attempts_total{outcome=\"ok\",upstream=\"default\"}")
            .await,
        2.0
    );
}

#[tokio::test]
async fn chunk_framing_cut_anywhere_still_gives_the_whole_answer() {
    let app = Gateway::start().await;
    let sse = events_text(&["番茄", "炒蛋"]);
    let mut wire = format!("{:x}\r\n", sse.len()).into_bytes();
    wire.extend_from_slice(sse.as_bytes());
    wire.extend_from_slice(b"\r\n0\r\n\r\n");
    // Cut inside the size line, inside a UTF-8 character, and between \r and \n.
    let cuts = [1, 30, wire.len() - 6, wire.len() - 1];
    let mut steps = vec![Step::Send(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec(),
    )];
    let mut at = 0;
    for cut in cuts.into_iter().chain([wire.len()]) {
        steps.push(Step::Send(wire[at..cut].to_vec()));
        steps.push(Step::Pause(Duration::from_millis(5)));
        at = cut;
    }
    app.upstream().push([Script(steps)]);
    let body = json_of(app.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "番茄炒蛋");
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_content_length_answer_is_read_to_its_length_and_reused() {
    let app = Gateway::start().await;
    app.upstream().push([
        length_answer(&["ok"], ""),
        keep_alive_answer(&["again"], false),
    ]);
    let body = json_of(app.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "ok");
    let body = json_of(app.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "again");
    assert_eq!(app.upstream().connections(), [0, 0]);
}

#[tokio::test]
async fn an_answer_that_says_connection_close_leaves_nothing_to_reuse() {
    let app = Gateway::start().await;
    app.upstream().push([
        length_answer(&["once"], "connection: close\r\n"),
        keep_alive_answer(&["twice"], false),
    ]);
    assert_eq!(app.chat(false).await.status(), 200);
    assert_eq!(app.chat(false).await.status(), 200);
    assert_eq!(app.upstream().connections(), [0, 1]);
}

#[tokio::test]
async fn broken_chunk_framing_is_a_broken_transport() {
    let app = Gateway::start().await;
    app.upstream().fallback(Script(vec![Step::Send(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\nzz\r\ndata: x\r\n"
            .to_vec(),
    )]));
    let response = app.chat(false).await;
    // The attempts never started, so they were retried with back-off until the
    // deadline ran out.
    assert_not_started_to_the_deadline(&app, response).await;
    assert!(app.upstream().requests().len() >= 2);
    sockets_close(app.upstream(), Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_malformed_response_head_is_a_broken_transport() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(Script(vec![Step::Send(b"HTTP/1.1 OK\r\n\r\n".to_vec())]));
    let response = app.chat(false).await;
    // The attempts never started, so they were retried with back-off until the
    // deadline ran out.
    assert_not_started_to_the_deadline(&app, response).await;
    assert!(app.upstream().requests().len() >= 2);
}

#[tokio::test]
async fn the_upstream_urls_query_string_reaches_the_upstream() {
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["azure"])]);
    let url = format!("{}/?api-version=2024-06-01", upstream.url);
    let gateway = Gateway::options().url(&url).start().await;
    assert_eq!(gateway.chat(false).await.status(), 200);
    let requests = upstream.requests();
    let request_line = requests[0].head.lines().next().expect("a request line");
    assert_eq!(
        request_line,
        "POST /v1/chat/completions?api-version=2024-06-01 HTTP/1.1"
    );
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_not_started_and_retried() {
    // `.invalid` never resolves (RFC 6761).
    let gateway = Gateway::options()
        .url("http://ladle-test.invalid/v1")
        .start()
        .await;
    let response = gateway.chat(false).await;
    assert_not_started_to_the_deadline(&gateway, response).await;
}

#[tokio::test]
async fn an_event_of_endless_data_lines_fails_the_attempt_instead_of_growing_memory() {
    // Each line is short, but no blank line ever ends the event; the cap is 1 MiB.
    let app = Gateway::start().await;
    let mut line = b"data: ".to_vec();
    line.extend(std::iter::repeat_n(b'a', 64 << 10));
    line.push(b'\n');
    app.upstream()
        .fallback(sse(vec![Step::Drip(line, Duration::from_millis(1))]));
    let response = app.chat(false).await;
    // A broken stream: retried once at once, then the request fails.
    assert_error(response, 502, "upstream_failed").await;
    assert_eq!(app.upstream().requests().len(), 2);
    for index in 0..2 {
        assert!(
            app.upstream().closed_at(index).await.is_some(),
            "socket {index} left open"
        );
    }
}
