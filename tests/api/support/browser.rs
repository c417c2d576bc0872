//! Debian's headless Chromium driven through chromedriver's W3C WebDriver HTTP
//! API (plain reqwest, no WebDriver crate), for the browser test: a session,
//! pages, elements, scripts, waits for what a script sees, and screenshots.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::eventually::{eventually, within};
use super::free_port;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key under which WebDriver names an element.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Sets a textarea's value the way typing would, without typing it key by key.
const SET_VALUE: &str = "const e = document.querySelector(arguments[0]); e.value = arguments[1]; \
     e.dispatchEvent(new Event('input', {bubbles: true})); return e.value;";

/// A chromedriver process with one browser session; dropping it ends both.
pub struct Browser {
    driver: Child,
    port: u16,
    session: Option<String>,
    profile: PathBuf,
    log: PathBuf,
    http: reqwest::Client,
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless Chromium session.
    pub async fn start() -> Browser {
        let port = free_port();
        let profile =
            std::env::temp_dir().join(format!("ladle-browser-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).expect("create the browser profile folder");
        let log = profile.with_extension("log");
        let log_file = std::fs::File::create(&log).expect("create the chromedriver log");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log handle"))
            .stderr(log_file)
            .spawn()
            .expect("start chromedriver");
        let mut browser = Browser {
            driver,
            port,
            session: None,
            profile,
            log,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("an HTTP client"),
        };
        browser.wait_until_ready().await;
        let args = json!([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,1000",
            format!("--user-data-dir={}", browser.profile.display()),
        ]);
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let created = browser
            .command(reqwest::Method::POST, "/session", capabilities)
            .await;
        let id = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {created}"))
            .to_owned();
        browser.session = Some(id);
        browser
    }

    /// Waits until chromedriver says it is ready; fails at once if it exited.
    async fn wait_until_ready(&mut self) {
        let what = format!("chromedriver to get ready; see {}", self.log.display());
        eventually(Duration::from_secs(10), what, async || {
            if let Ok(Some(status)) = self.driver.try_wait() {
                panic!(
                    "chromedriver exited with {status}; see {}",
                    self.log.display()
                );
            }
            let url = format!("http://127.0.0.1:{}/status", self.port);
            let response = self.http.get(url).send().await.ok()?;
            let body = response.json::<Value>().await.ok()?;
            (body["value"]["ready"] == true).then_some(())
        })
        .await;
    }

    /// One WebDriver command; its `value`, or a panic naming the error.
    pub async fn command(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let mut request = self.http.request(method.clone(), url);
        if method != reqwest::Method::GET {
            request = request.json(&body);
        }
        let response = request.send().await.expect("chromedriver answers");
        let status = response.status();
        let body: Value = response.json().await.expect("chromedriver answers JSON");
        assert!(
            status.is_success(),
            "WebDriver {method} {path} failed ({status}): {}; log: {}",
            body["value"],
            self.log.display()
        );
        body["value"].clone()
    }

    pub fn session_path(&self, rest: &str) -> String {
        let id = self.session.as_deref().expect("an open session");
        format!("/session/{id}{rest}")
    }

    pub async fn go(&self, url: &str) {
        let path = self.session_path("/url");
        self.command(reqwest::Method::POST, &path, json!({"url": url}))
            .await;
    }

    /// The element for a CSS selector, as WebDriver's element reference.
    pub async fn find(&self, selector: &str) -> String {
        let path = self.session_path("/element");
        let body = json!({"using": "css selector", "value": selector});
        let found = self.command(reqwest::Method::POST, &path, body).await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element for {selector}: {found}"))
            .to_owned()
    }

    pub async fn click(&self, element: &str) {
        let path = self.session_path(&format!("/element/{element}/click"));
        self.command(reqwest::Method::POST, &path, json!({})).await;
    }

    /// Finds the element for `selector` and clicks it.
    pub async fn click_on(&self, selector: &str) {
        let element = self.find(selector).await;
        self.click(&element).await;
    }

    /// Opens the admin page at `url` and signs it in with the admin token.
    pub async fn sign_in(&self, url: &str) {
        self.go(url).await;
        let token = self.find("#token").await;
        self.type_into(&token, super::config::ADMIN_TOKEN).await;
        self.click_on("#token-save").await;
    }

    pub async fn type_into(&self, element: &str, text: &str) {
        let path = self.session_path(&format!("/element/{element}/value"));
        self.command(reqwest::Method::POST, &path, json!({"text": text}))
            .await;
    }

    /// Runs a script in the page and returns what it returned.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        let path = self.session_path("/execute/sync");
        let body = json!({"script": script, "args": args});
        self.command(reqwest::Method::POST, &path, body).await
    }

    pub async fn set_value(&self, selector: &str, text: &str) {
        let value = self.run(SET_VALUE, json!([selector, text])).await;
        assert_eq!(value, json!(text), "{selector} holds the text");
    }

    pub async fn value_of(&self, selector: &str) -> String {
        let script = "return document.querySelector(arguments[0]).value;";
        let value = self.run(script, json!([selector])).await;
        value.as_str().expect("a text value").to_owned()
    }

    /// The text of the element `selector` finds.
    pub async fn value_of_text(&self, selector: &str) -> String {
        let script = "return document.querySelector(arguments[0]).textContent;";
        let value = self.run(script, json!([selector])).await;
        value.as_str().expect("a text").to_owned()
    }

    /// Polls a script until it returns something other than null, false or "".
    pub async fn wait_for(&self, what: &str, script: &str) -> Value {
        let shown = within(Duration::from_secs(15), async || {
            let value = self.run(script, json!([])).await;
            let nothing =
                matches!(&value, Value::Null | Value::Bool(false)) || value.as_str() == Some("");
            (!nothing).then_some(value)
        })
        .await;
        if let Some(value) = shown {
            return value;
        }
        let status = self
            .run(
                "return document.getElementById('status').textContent;",
                json!([]),
            )
            .await;
        panic!("timed out waiting for {what}; the page's status says {status}");
    }

    pub async fn screenshot(&self) -> Vec<u8> {
        let path = self.session_path("/screenshot");
        let encoded = self.command(reqwest::Method::GET, &path, json!(null)).await;
        base64_decode(encoded.as_str().expect("base64 text"))
    }

    /// Closes the session (and with it the browser).
    pub async fn quit(&mut self) {
        let path = self.session_path("");
        self.command(reqwest::Method::DELETE, &path, json!({}))
            .await;
        self.session = None;
    }
}

impl Drop for Browser {
    /// Closes a session a failed test left open, then ends chromedriver.
    fn drop(&mut self) {
        if let Some(id) = self.session.take() {
            delete_session_blocking(self.port, &id);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// `DELETE /session/{id}` without async, for `Drop`.
fn delete_session_blocking(port: u16, id: &str) {
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut socket) = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(2))
    else {
        return;
    };
    let _ = socket.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!(
        "DELETE /session/{id} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\
         content-length: 0\r\nconnection: close\r\n\r\n"
    );
    if socket.write_all(request.as_bytes()).is_ok() {
        let _ = socket.read_to_end(&mut Vec::new());
    }
}

/// Standard base64 (with or without padding; whitespace ignored) to bytes.
fn base64_decode(text: &str) -> Vec<u8> {
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut bytes = Vec::with_capacity(text.len() / 4 * 3);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for value in text.bytes().filter_map(sextet) {
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    bytes
}

#[test]
fn the_base64_decoder_decodes_padded_and_unpadded_text() {
    assert_eq!(base64_decode("aGVsbG8="), b"hello");
    assert_eq!(base64_decode("aGVsbG8h"), b"hello!");
    assert_eq!(base64_decode("5LiA\n"), "一".as_bytes());
    assert_eq!(base64_decode("+/8="), [0xfb, 0xff]);
}
