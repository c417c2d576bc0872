//! Request heads and framing: a caller's `X-Request-Id` is used only when it is
//! 1–128 visible ASCII characters; a head over 16 KiB is `431`, broken framing
//! and HTTP/1.1 without `Host` are `400`, each with the contract's JSON error and
//! a request id; every `401` says `WWW-Authenticate: Bearer`.

use reqwest::Method;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::raw::{read_response, read_until_closed};
use crate::support::*;

/// A response read off a raw socket: status, head (lower-cased) and body.
struct Raw {
    status: u16,
    head: String,
    body: String,
}

impl Raw {
    fn parse(text: &str) -> Raw {
        let (head, body) = text.split_once("\r\n\r\n").expect("a whole head");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status line");
        Raw {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_owned(),
        }
    }

    /// A header's value.
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim())
        })
    }

    /// The `error` of the JSON body, checked to carry the `x-request-id` header's
    /// id.
    fn error(&self) -> Value {
        let body: Value = serde_json::from_str(&self.body).expect("a JSON body");
        let id = self.header("x-request-id").expect("an x-request-id header");
        assert_eq!(body["error"]["request_id"].as_str(), Some(id), "{body}");
        body["error"].clone()
    }
}

/// Sends `bytes` on a fresh connection; the answer, up to the connection's close.
async fn send_raw(app: &Gateway, bytes: &[u8]) -> Raw {
    let mut socket = TcpStream::connect(app.address()).await.expect("connect");
    // The gateway may answer and close before it has read all of a huge head.
    let _ = socket.write_all(bytes).await;
    let answer = read_until_closed(&mut socket, millis(2000))
        .await
        .expect("the gateway answers and closes the connection");
    Raw::parse(&String::from_utf8_lossy(&answer))
}

/// A GET of `/healthz` with one more header line, `x-big`, of `size` bytes.
fn with_big_header(size: usize) -> Vec<u8> {
    format!(
        "GET /healthz HTTP/1.1\r\nhost: ladle\r\nconnection: close\r\nx-big: {}\r\n\r\n",
        "a".repeat(size)
    )
    .into_bytes()
}

/// Asserts the contract's JSON error for a refused head: `invalid_request`,
/// not retryable, under a new request id.
fn assert_refused(raw: &Raw, status: u16) -> String {
    assert_eq!(raw.status, status, "{}", raw.head);
    let error = raw.error();
    assert_eq!(error["code"], "invalid_request", "{error}");
    assert_eq!(error["retryable"], false, "{error}");
    assert_eq!(raw.header("content-type"), Some("application/json"));
    error["request_id"].as_str().expect("an id").to_owned()
}

#[tokio::test]
async fn a_request_head_over_16_kib_is_431_invalid_request_with_the_json_error() {
    let app = Gateway::start().await;
    for size in [20_000, 400_000] {
        let raw = send_raw(&app, &with_big_header(size)).await;
        let id = assert_refused(&raw, 431);
        assert_eq!(id.len(), 36, "a new id: {id}");
    }
    // Under the limit, the same request is served.
    let raw = send_raw(&app, &with_big_header(10_000)).await;
    assert_eq!(raw.status, 200);
}

#[tokio::test]
async fn a_malformed_request_line_is_400_invalid_request_with_the_json_error() {
    let app = Gateway::start().await;
    for line in [
        "GET /healthz HTTP/1.1 and more",
        "NOT A REQUEST",
        "GET  HTTP/1.1",
    ] {
        let raw = send_raw(&app, format!("{line}\r\nhost: ladle\r\n\r\n").as_bytes()).await;
        assert_refused(&raw, 400);
    }
}

#[tokio::test]
async fn http_1_1_without_host_is_400_invalid_request_and_http_1_0_without_host_is_served() {
    let app = Gateway::start().await;
    let mut socket = TcpStream::connect(app.address()).await.expect("connect");
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\n\r\n")
        .await
        .expect("send");
    let raw = Raw::parse(&read_response(&mut socket, millis(2000)).await);
    assert_refused(&raw, 400);
    let message = raw.error()["message"]
        .as_str()
        .expect("a message")
        .to_owned();
    assert!(message.contains("Host"), "{message}");
    let old = send_raw(&app, b"GET /healthz HTTP/1.0\r\n\r\n").await;
    assert_eq!((old.status, old.body.as_str()), (200, "ok"));
}

/// A chat request with a broken body (`400`, no upstream call) under
/// `X-Request-Id: id`: the response's id header and its body's id.
async fn ids_answered(app: &Gateway, id: &str) -> (String, String) {
    let response = app
        .client
        .post(app.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body("{not json")
        .send()
        .await
        .expect("gateway answers");
    let header = response.headers()["x-request-id"]
        .to_str()
        .expect("ASCII")
        .to_owned();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 400);
    (
        header,
        error["request_id"].as_str().expect("an id").to_owned(),
    )
}

#[tokio::test]
async fn a_request_id_of_128_visible_ascii_characters_is_kept() {
    let app = Gateway::start().await;
    let visible: String = (0x21u8..=0x7e).cycle().take(128).map(char::from).collect();
    let (header, body) = ids_answered(&app, &visible).await;
    assert_eq!(
        (header.as_str(), body.as_str()),
        (visible.as_str(), visible.as_str())
    );
}

#[tokio::test]
async fn a_request_id_too_long_or_with_a_space_is_replaced_by_a_new_one() {
    let app = Gateway::start().await;
    for id in [
        "x".repeat(129),
        "has space".to_owned(),
        "tab\there".to_owned(),
    ] {
        let (header, body) = ids_answered(&app, &id).await;
        assert_ne!(header, id);
        assert_eq!(header, body, "one id in the header and the body");
        assert_eq!(header.len(), 36, "a new id: {header}");
    }
    // A 400 KB id makes the head too large: refused under an id of ladle's own.
    let head = format!(
        "GET /healthz HTTP/1.1\r\nhost: ladle\r\nx-request-id: {}\r\n\r\n",
        "r".repeat(400_000)
    );
    let raw = send_raw(&app, head.as_bytes()).await;
    let id = assert_refused(&raw, 431);
    assert_eq!(id.len(), 36, "a new id: {id}");
}

#[tokio::test]
async fn every_401_carries_www_authenticate_bearer() {
    let app = Gateway::options().admin().start().await;
    let wrong = app
        .client
        .get(app.url("/admin/prompts"))
        .bearer_auth("not-the-admin-token")
        .send()
        .await
        .expect("answer");
    let missing = app
        .client
        .request(Method::PUT, app.url("/admin/prompts/recipe"))
        .body("x")
        .send()
        .await
        .expect("answer");
    for response in [wrong, missing] {
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let (_, error) = error_of(response).await;
        assert_eq!(error["code"], "unauthorized");
    }
}
