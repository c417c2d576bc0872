//! Requests the gateway refuses or bounds before any upstream call: bad bodies,
//! bodies over the limit, slow clients; every answer with a request id and
//! contract JSON (contract section 3).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::raw::{read_response, read_until_closed};
use crate::support::*;

#[tokio::test]
async fn every_response_carries_a_request_id_and_errors_are_contract_json() {
    let app = Gateway::start().await;
    let echoed = app
        .client
        .get(format!("{}/healthz", app.base))
        .header("x-request-id", "req-42")
        .send()
        .await
        .expect("answer");
    assert_eq!(echoed.headers()["x-request-id"], "req-42");
    assert_eq!(echoed.text().await.expect("body"), "ok");
    let missing = app.get("/nope").await;
    assert_eq!(missing.status(), 404);
    let generated = missing.headers()["x-request-id"]
        .to_str()
        .expect("id")
        .to_owned();
    let body = json_of(missing).await;
    assert_eq!(body["error"]["code"], "not_found");
    assert_eq!(body["error"]["request_id"], generated.as_str());
    let bad_json = app
        .client
        .post(format!("{}/v1/chat/completions", app.base))
        .body("{not json")
        .send()
        .await
        .expect("answer");
    assert_eq!(bad_json.status(), 400);
    assert_eq!(json_of(bad_json).await["error"]["code"], "invalid_request");
    let not_utf8 = app
        .client
        .post(format!("{}/v1/chat/completions", app.base))
        .body(&b"{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}"[..])
        .send()
        .await
        .expect("answer");
    assert_eq!(not_utf8.status(), 400);
    let error = json_of(not_utf8).await;
    assert_eq!(error["error"]["code"], "invalid_request");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("utf-8")),
        "{error}"
    );
    let no_messages = app
        .post("/v1/chat/completions", &json!({"model": "m"}))
        .await;
    assert_eq!(
        json_of(no_messages).await["error"]["code"],
        "invalid_request"
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_body_too_large() {
    let app = Gateway::with(|c| c.max_body_bytes = 1024).await;
    let big = json!({"messages": [{"role": "user", "content": "x".repeat(4096)}]});
    let response = app.post("/v1/chat/completions", &big).await;
    assert_error(response, 413, "body_too_large").await;
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn a_chunked_body_is_counted_against_the_limit_as_it_arrives() {
    // Arrange: no Content-Length, so only counting the pieces can catch it.
    let app = Gateway::with(|c| c.max_body_bytes = 1024).await;
    app.upstream().push([sse_answer(&["好"])]);
    let chunked = |pieces: Vec<String>| {
        let stream = futures_util::stream::iter(
            pieces
                .into_iter()
                .map(|piece| Ok::<_, std::io::Error>(piece.into_bytes())),
        );
        app.client
            .post(format!("{}/v1/chat/completions", app.base))
            .body(reqwest::Body::wrap_stream(stream))
            .send()
    };
    let fits = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    let (head, tail) = fits.split_at(10);
    // Act
    let over = chunked(vec!["x".repeat(600), "x".repeat(600)]).await;
    let within = chunked(vec![head.to_owned(), tail.to_owned()]).await;
    // Assert
    let over = over.expect("gateway answers");
    assert_eq!(over.status(), 413);
    assert_eq!(json_of(over).await["error"]["code"], "body_too_large");
    assert_eq!(within.expect("gateway answers").status(), 200);
    let sent = app.upstream().requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["messages"][0]["content"], "hi");
}

#[tokio::test]
async fn bad_chat_fields_are_400_naming_the_field_and_nothing_goes_upstream() {
    let app = Gateway::start().await;
    let hi = json!([{"role": "user", "content": "hi"}]);
    for (body, named) in [
        (json!({"messages": []}), "messages"),
        (json!({"messages": "hi"}), "messages"),
        (json!({"messages": hi, "stream": "yes"}), "stream"),
        (json!({"messages": hi, "model": 5}), "model"),
        (json!([1, 2]), "JSON"),
    ] {
        let response = app.post("/v1/chat/completions", &body).await;
        assert_eq!(response.status(), 400, "{body}");
        let error = json_of(response).await;
        assert_eq!(error["error"]["code"], "invalid_request");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{body} → {message}");
    }
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn a_client_that_never_finishes_its_request_head_is_disconnected() {
    // Arrange
    let app = Gateway::with(|c| c.header_read_timeout = millis(200)).await;
    let mut socket = TcpStream::connect(app.address()).await.expect("connect");
    // Act
    socket
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: ladle\r\n")
        .await
        .expect("write half a head");
    let started = Instant::now();
    let answer = read_until_closed(&mut socket, Duration::from_secs(3)).await;
    // Assert
    let waited = started.elapsed();
    assert!(answer.is_some(), "the connection was left open");
    assert!(waited >= millis(150), "closed after {waited:?}");
    assert!(waited < millis(1500), "closed after {waited:?}");
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn a_body_that_stops_arriving_gets_400_invalid_request_in_time() {
    // Arrange
    let app = Gateway::with(|c| c.body_read_timeout = millis(200)).await;
    let mut socket = TcpStream::connect(app.address()).await.expect("connect");
    // Act: promise 100 bytes, send 8, then nothing.
    socket
        .write_all(
            b"POST /v1/tasks/recipe HTTP/1.1\r\nhost: ladle\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"dish\":",
        )
        .await
        .expect("write part of a request");
    let started = Instant::now();
    let answer = read_response(&mut socket, Duration::from_secs(3)).await;
    // Assert
    let waited = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 400"), "answer was {answer:?}");
    let body: Value = serde_json::from_str(&answer[answer.find("\r\n\r\n").expect("head") + 4..])
        .expect("JSON error body");
    assert_eq!(body["error"]["code"], "invalid_request");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("request body not received in time")
    );
    assert!(waited >= millis(150), "answered after {waited:?}");
    assert!(waited < millis(1500), "answered after {waited:?}");
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn a_body_over_the_limit_on_the_task_route_is_413_body_too_large() {
    // Arrange
    let app = Gateway::with(|c| c.max_body_bytes = 1024).await;
    // Act
    let response = app
        .post("/v1/tasks/recipe", &json!({"dish": "鸭".repeat(2000)}))
        .await;
    // Assert
    assert_error(response, 413, "body_too_large").await;
    assert!(app.upstream().requests().is_empty());
}
