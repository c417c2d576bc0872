//! A gateway's HTTP surface, the same for one in this process and for the real
//! binary: its base URL and a client, with the requests the tests make (JSON,
//! event streams, chat, tasks, admin calls under the admin token, metrics,
//! readiness) and the waits built on them.

use std::cell::RefCell;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::answers::{etag_of, json_of, metric_value};
use super::config::ADMIN_TOKEN;
use super::eventually::{Lazy, eventually};

/// The body of every chat request the helpers send: one user message.
pub fn chat_body(stream: bool) -> Value {
    json!({"stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

/// Where a gateway answers, and a client for it.
#[derive(Clone)]
pub struct Endpoint {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// An HTTP client for calling the gateway.
    pub client: reqwest::Client,
}

impl Endpoint {
    /// The gateway at `base`.
    pub fn new(base: String) -> Endpoint {
        Endpoint {
            base,
            client: reqwest::Client::new(),
        }
    }

    /// The URL of `path` on the gateway.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// A POST of a JSON body, to add to before sending.
    pub fn post_request(&self, path: &str, body: &Value) -> RequestBuilder {
        self.client.post(self.url(path)).json(body)
    }

    /// POSTs a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Response {
        send(self.post_request(path, body)).await
    }

    /// POSTs a JSON body asking for an event stream.
    pub async fn post_events(&self, path: &str, body: &Value) -> Response {
        send(
            self.post_request(path, body)
                .header("accept", "text/event-stream"),
        )
        .await
    }

    /// POSTs a JSON body under an `Idempotency-Key`, asking for events if `events`.
    pub async fn post_keyed(&self, path: &str, key: &str, body: &Value, events: bool) -> Response {
        let mut request = self.post_request(path, body).header("idempotency-key", key);
        if events {
            request = request.header("accept", "text/event-stream");
        }
        send(request).await
    }

    /// `DELETE`s `path`.
    pub async fn delete(&self, path: &str) -> Response {
        send(self.client.delete(self.url(path))).await
    }

    /// `GET`s `path`.
    pub async fn get(&self, path: &str) -> Response {
        send(self.client.get(self.url(path))).await
    }

    /// A chat request (`chat_body`), to add to before sending.
    pub fn chat_request(&self, stream: bool) -> RequestBuilder {
        self.post_request("/v1/chat/completions", &chat_body(stream))
    }

    /// A chat request.
    pub async fn chat(&self, stream: bool) -> Response {
        send(self.chat_request(stream)).await
    }

    /// A streaming chat request, its first chunk already read.
    pub async fn chat_streaming(&self) -> (Response, bytes::Bytes) {
        let mut response = self.chat(true).await;
        let first = response
            .chunk()
            .await
            .expect("read")
            .expect("a first chunk");
        (response, first)
    }

    /// A chat request under `X-Request-Id: request_id`.
    pub async fn chat_as(&self, request_id: &str, stream: bool) -> Response {
        send(self.chat_request(stream).header("x-request-id", request_id)).await
    }

    /// A whole-answer chat request under an `Idempotency-Key`.
    pub async fn chat_keyed(&self, key: &str) -> Response {
        send(self.chat_request(false).header("idempotency-key", key)).await
    }

    /// `POST /v1/tasks/{name}` with `variables`.
    pub async fn task(&self, name: &str, variables: &Value) -> Response {
        self.post(&format!("/v1/tasks/{name}"), variables).await
    }

    /// A request carrying the admin token, to add to before sending.
    pub fn admin(&self, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(ADMIN_TOKEN)
    }

    /// An admin request without a body, sent.
    pub async fn admin_call(&self, method: Method, path: &str) -> Response {
        send(self.admin(method, path)).await
    }

    /// An admin request with the JSON `body`, sent.
    pub async fn admin_json(&self, method: Method, path: &str, body: &Value) -> Response {
        send(self.admin(method, path).json(body)).await
    }

    /// `PUT /admin/prompts/{name}`, with `If-Match` if given.
    pub async fn put_prompt(&self, name: &str, text: &str, if_match: Option<&str>) -> Response {
        let path = format!("/admin/prompts/{name}");
        let mut request = self.admin(Method::PUT, &path).body(text.to_owned());
        if let Some(tag) = if_match {
            request = request.header("if-match", tag);
        }
        send(request).await
    }

    /// The live prompt's ETag, if the gateway has the prompt.
    pub async fn prompt_etag(&self, name: &str) -> Option<String> {
        let path = format!("/admin/prompts/{name}");
        let response = send(self.admin(Method::GET, &path)).await;
        (response.status() == 200).then(|| etag_of(&response))
    }

    /// The ETags of a prompt's history, newest first; each entry checked for a
    /// version and a UTC time of saving.
    pub async fn history_etags(&self, name: &str) -> Vec<String> {
        let path = format!("/admin/prompts/{name}/history");
        let response = send(self.admin(Method::GET, &path)).await;
        assert_eq!(response.status(), 200);
        let history = json_of(response).await;
        history
            .as_array()
            .expect("a list")
            .iter()
            .map(|v| {
                assert!(
                    v["version"].is_string()
                        && v["saved_at"].as_str().is_some_and(|t| t.ends_with('Z')),
                    "{v}"
                );
                v["etag"].as_str().expect("etag").to_owned()
            })
            .collect()
    }

    /// Waits until the gateway serves `etag` (or nothing, for `None`) for `name`;
    /// how long that took. Fails past the contract's 2 s.
    pub async fn sees(&self, name: &str, etag: Option<&str>) -> Duration {
        let started = Instant::now();
        let what = format!("{} to serve {name} at {etag:?}", self.base);
        eventually(Duration::from_secs(2), what, async || {
            self.prompt_etag(name).await.as_deref() == etag
        })
        .await;
        started.elapsed()
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.get("/metrics")
            .await
            .text()
            .await
            .expect("metrics text")
    }

    /// The value of one metric series, 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        metric_value(&self.metrics().await, series).unwrap_or(0.0)
    }

    /// `/readyz`'s body.
    pub async fn ready(&self) -> Value {
        json_of(self.get("/readyz").await).await
    }

    /// Waits (up to 2 s) until `/readyz` answers `status`; its body then.
    pub async fn eventually_readyz(&self, status: u16) -> String {
        let last = RefCell::new(None);
        let what = Lazy(|| format!("/readyz to answer {status} (last: {:?})", last.borrow()));
        eventually(Duration::from_secs(2), what, async || {
            let response = self.get("/readyz").await;
            let seen = response.status().as_u16();
            let body = response.text().await.expect("body");
            *last.borrow_mut() = Some((seen, body.clone()));
            (seen == status).then_some(body)
        })
        .await
    }

    /// Sends an admin request byte for byte, so the path reaches the gateway
    /// exactly as written (an HTTP client would resolve `..` itself); its status
    /// and body.
    pub async fn raw(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let address = self.address();
        let mut socket = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect to the gateway");
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {ADMIN_TOKEN}\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket
            .write_all(request.as_bytes())
            .await
            .expect("send the request");
        let mut answer = Vec::new();
        socket
            .read_to_end(&mut answer)
            .await
            .expect("read the answer");
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status line");
        let body = answer
            .split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_owned());
        (status, body)
    }
}

/// Sends a request; the gateway must answer.
async fn send(request: RequestBuilder) -> Response {
    request.send().await.expect("gateway answers")
}
