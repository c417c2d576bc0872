//! The admin API (contract section 4) from outside: auth, saving with ETags,
//! validation positions, names and symlinks that could escape the prompts folder,
//! rendering, history, rollback, and that a save is live for the next task call.
//! Shared helpers live here; the tests are in the submodules.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ladle::config::Secret;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::mock_upstream::*;
use crate::support::*;

mod auth;
mod history;
mod paths;
mod render;
mod saving;

/// The admin token the tests configure.
pub const TOKEN: &str = "admin-test-token-4242";

/// A small valid prompt whose user message carries `marker`.
fn small_prompt(marker: &str) -> String {
    format!(
        "description = \"测试用\"\noutput = \"text\"\n\n[variables.dish]\nrequired = true\n\n\
         [messages]\nuser = \"\"\"{marker}：{{{{ dish }}}}\"\"\"\n"
    )
}

/// The shipped recipe prompt's text.
fn shipped_recipe() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/prompts/recipe.toml"))
        .expect("read the shipped recipe prompt")
}

/// A gateway with the admin API enabled.
async fn admin_app() -> TestApp {
    spawn_app_with(|c| c.admin_token = Some(Secret::new(TOKEN))).await
}

/// A gateway with the admin API enabled, serving prompts from `dir`.
async fn admin_app_in(dir: &Path) -> TestApp {
    let dir = dir.to_path_buf();
    spawn_app_with(move |c| {
        c.admin_token = Some(Secret::new(TOKEN));
        c.prompts_dir = dir;
    })
    .await
}

/// A request to the gateway carrying the admin token.
fn admin(app: &TestApp, method: Method, path: &str) -> reqwest::RequestBuilder {
    app.client
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(TOKEN)
}

/// `PUT /admin/prompts/{name}` with the token.
async fn put(app: &TestApp, name: &str, text: &str, if_match: Option<&str>) -> reqwest::Response {
    let mut request =
        admin(app, Method::PUT, &format!("/admin/prompts/{name}")).body(text.to_owned());
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    request.send().await.expect("gateway answers")
}

/// The `ETag` header of a response.
fn etag_of(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("etag")
        .expect("an ETag header")
        .to_str()
        .expect("an ASCII ETag")
        .to_owned()
}

/// Status and error code of an error response.
async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = json_of(response).await;
    (status, body["error"].clone())
}

/// Sends a request byte for byte, so the path reaches the gateway exactly as
/// written (an HTTP client would resolve `..` itself); returns status and body.
async fn raw(app: &TestApp, method: &str, path: &str, body: &str) -> (u16, String) {
    let address = app.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect to the gateway");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {TOKEN}\r\n\
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

/// A fresh, empty temporary folder.
fn temp_dir(label: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ladle-admin-{}-{label}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary folder");
    dir
}

/// The sorted file names in a folder.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
