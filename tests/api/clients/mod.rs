//! Client keys (contract 8) from outside: who may call `/v1/*` (401), which
//! tasks a key may run (403), each key's share (429 over `max_inflight` or
//! `rate_per_s`), in that order and before anything else; jobs and idempotency
//! keys that belong to their key; the keys file edited while the gateway runs;
//! the real binary's logs, metrics and start-up; `ladle keys add`. Across
//! replicas: `replicas.rs`.

mod fairness;
mod limits;
mod order;
mod ownership;
mod refusals;
mod reload;
mod replicas;
mod seen;
mod startup;

use std::path::{Path, PathBuf};

use ladle::config::Config;
use reqwest::Response;
use serde_json::Value;
use sha2::Digest;

use crate::support::*;

/// One key of a keys file: its name, the key itself (only its digest goes into
/// the file), and more TOML lines for its entry (`max_inflight = 1`, say).
pub type Entry<'a> = (&'a str, &'a str, &'a str);

/// The keys the tests give their callers.
pub const KEY_A: &str = "lk_test-alpha-key-0001";
pub const KEY_B: &str = "lk_test-bravo-key-0002";

/// The lower-case hex SHA-256 of `key`, as a keys file holds it.
pub fn sha256_hex(key: &str) -> String {
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The text of a keys file declaring `keys`.
pub fn keys_toml(keys: &[Entry]) -> String {
    keys.iter()
        .map(|(name, key, extra)| {
            format!(
                "[[keys]]\nname = \"{name}\"\nsha256 = \"{}\"\n{extra}\n\n",
                sha256_hex(key)
            )
        })
        .collect()
}

/// A keys file declaring `keys`, in a folder of its own; its path.
pub fn keys_file(keys: &[Entry]) -> PathBuf {
    let path = temp_dir("client-keys").join("keys.toml");
    std::fs::write(&path, keys_toml(keys)).expect("write the keys file");
    path
}

/// Replaces the file's text in one step (a rename), as an editor saves it: the
/// gateway never reads a half-written file.
pub fn rewrite(path: &Path, text: &str) {
    let next = path.with_extension("toml.next");
    std::fs::write(&next, text).expect("write the next keys file");
    std::fs::rename(&next, path).expect("rename it over the keys file");
}

/// The config change that turns client keys on, from the file at `path`.
pub fn with_keys(path: &Path) -> impl FnOnce(&mut Config) + Send + 'static {
    let path = path.to_path_buf();
    move |config| config.client_keys_file = Some(path)
}

/// A gateway in front of a fresh mock upstream, with the keys file at `path`.
pub async fn keyed_gateway(path: &Path) -> Gateway {
    Gateway::options().adjust(with_keys(path)).start().await
}

/// A whole-answer chat request under client key `key`.
pub async fn chat_as(endpoint: &Endpoint, key: &str) -> Response {
    endpoint
        .chat_request(false)
        .bearer_auth(key)
        .send()
        .await
        .expect("the gateway answers")
}

/// A streaming chat request under client key `key`.
pub async fn stream_as(endpoint: &Endpoint, key: &str) -> Response {
    endpoint
        .chat_request(true)
        .bearer_auth(key)
        .send()
        .await
        .expect("the gateway answers")
}

/// `POST path` with `body` under client key `key`.
pub async fn post_as(endpoint: &Endpoint, key: &str, path: &str, body: &Value) -> Response {
    endpoint
        .post_request(path, body)
        .bearer_auth(key)
        .send()
        .await
        .expect("the gateway answers")
}

/// A fridge job (`?async=true`, named by `marker`) submitted under client key `key`.
pub async fn submit_as(endpoint: &Endpoint, key: &str, marker: &str) -> Response {
    let body = crate::jobs::fridge(marker);
    post_as(endpoint, key, "/v1/tasks/fridge?async=true", &body).await
}

/// `method path` under client key `key`, no body.
pub async fn call_as(
    endpoint: &Endpoint,
    key: &str,
    method: reqwest::Method,
    path: &str,
) -> Response {
    endpoint
        .client
        .request(method, endpoint.url(path))
        .bearer_auth(key)
        .send()
        .await
        .expect("the gateway answers")
}

/// The `error` object of a response that must have `status` and `code`.
pub async fn refused(response: Response, status: u16, code: &str) -> Value {
    assert_error_code(response, status, code, "").await
}

/// The `Retry-After` header of a response, which must have one.
pub fn retry_after(response: &Response) -> String {
    response
        .headers()
        .get("retry-after")
        .expect("a Retry-After header")
        .to_str()
        .expect("ASCII")
        .to_owned()
}

/// A `429 rate_limited` answer with `Retry-After: {seconds}`, retryable.
pub async fn rate_limited(response: Response, seconds: &str) {
    // The status and body first: a failure then says what came instead.
    let said = response.headers().get("retry-after").cloned();
    let error = refused(response, 429, "rate_limited").await;
    assert_eq!(error["retryable"], true, "{error}");
    let said = said.expect("a Retry-After header");
    assert_eq!(said.to_str().expect("ASCII"), seconds);
}

/// A `429 rate_limited` answer whose `Retry-After` is at most `seconds` and at
/// most 10 s less (the time the test itself took since the bucket ran dry).
pub async fn rate_limited_about(response: Response, seconds: u64) {
    let said: u64 = retry_after(&response).parse().expect("whole seconds");
    assert!(
        (seconds - 10..=seconds).contains(&said),
        "Retry-After: {said}"
    );
    rate_limited(response, &said.to_string()).await;
}
