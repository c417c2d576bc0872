//! The prompt editor end to end, in Debian's headless Chromium driven through
//! chromedriver's W3C WebDriver HTTP API (plain reqwest, no WebDriver crate).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`). Without them it fails, saying what to install: a test that
//! passed without running would hide a broken editor. To leave it out on purpose,
//! name it: `cargo test -- --skip browser::`. A screenshot of the editor is left at
//! `target/admin-editor.png`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ladle::config::Secret;
use serde_json::{Value, json};

use crate::helpers::*;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const TOKEN: &str = "browser-admin-token";
/// The key under which WebDriver names an element.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Sets a textarea's value the way typing would, without typing it key by key.
const SET_VALUE: &str = "const e = document.querySelector(arguments[0]); e.value = arguments[1]; \
     e.dispatchEvent(new Event('input', {bubbles: true})); return e.value;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_edits_validates_saves_and_previews_the_recipe_prompt_in_a_browser() {
    for binary in [CHROMEDRIVER, CHROMIUM] {
        assert!(
            std::path::Path::new(binary).exists(),
            "{binary} is missing: install Debian's `chromium` and `chromium-driver` \
             (apt-get install -y chromium chromium-driver), or leave this test out with \
             `cargo test -- --skip browser::`"
        );
    }
    // Arrange
    let app = spawn_app_with(|c| c.admin_token = Some(Secret::new(TOKEN))).await;
    let recipe = std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("recipe");
    let broken = recipe.replace("max_tokens = 2400", "max_tokens = \"二千四百\" 多");
    let broken_line = broken
        .lines()
        .position(|l| l.contains('多'))
        .expect("the broken line")
        + 1;
    let fixed = recipe.replace(
        "请为「{{ dish }}」写一份",
        "浏览器里改的：请为「{{ dish }}」写一份",
    );
    assert_ne!(fixed, recipe);
    let mut browser = Browser::start().await;

    // Act and assert: the page asks for the token, then lists the prompts.
    browser.go(&format!("{}/admin", app.base)).await;
    let token = browser.find("#token").await;
    browser.type_into(&token, TOKEN).await;
    let save_token = browser.find("#token-save").await;
    browser.click(&save_token).await;
    browser
        .wait_for(
            "the recipe prompt in the list",
            "return !!document.querySelector('#prompt-list button[data-name=recipe]');",
        )
        .await;
    let stored = browser
        .run(
            "return [sessionStorage.getItem('ladle_admin_token'), localStorage.length];",
            json!([]),
        )
        .await;
    assert_eq!(
        stored,
        json!([TOKEN, 0]),
        "the token is in session storage only"
    );
    let item = browser.find("#prompt-list button[data-name=recipe]").await;
    browser.click(&item).await;
    browser
        .wait_for(
            "the recipe text in the editor",
            "return document.getElementById('editor').value.includes('[variables.dish]');",
        )
        .await;
    assert_eq!(browser.value_of("#editor").await, recipe);

    // Broken TOML is refused and the banner names the line.
    browser.set_value("#editor", &broken).await;
    let save = browser.find("#save").await;
    browser.click(&save).await;
    let banner = browser
        .wait_for(
            "a validation error",
            "const b = document.getElementById('validation-error'); \
             return !b.hidden && b.textContent.trim() ? b.textContent : null;",
        )
        .await;
    let banner = banner.as_str().expect("banner text");
    assert!(banner.contains("invalid_prompt"), "{banner}");
    assert!(banner.contains(&format!("line {broken_line}")), "{banner}");
    let marked = browser
        .run(
            "const m = document.querySelector('#gutter .error-line'); return m && m.textContent;",
            json!([]),
        )
        .await;
    assert_eq!(
        marked,
        json!(broken_line.to_string()),
        "the gutter marks the line"
    );
    assert_eq!(
        std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("recipe"),
        recipe,
        "nothing was saved"
    );

    // The fixed text saves.
    browser.set_value("#editor", &fixed).await;
    browser.click(&save).await;
    browser
        .wait_for(
            "the Saved status",
            "return document.getElementById('status').textContent.includes('Saved');",
        )
        .await;
    let banner_hidden = browser
        .run(
            "return document.getElementById('validation-error').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(banner_hidden, json!(true));
    assert_eq!(
        std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("saved recipe"),
        fixed,
        "the file on disk is what was typed"
    );

    // The preview renders the Chinese text with the variables filled in.
    browser
        .set_value("#variables", r#"{"dish": "香酥鸭", "servings": 3}"#)
        .await;
    let preview = browser.find("#preview").await;
    browser.click(&preview).await;
    let shown = browser
        .wait_for(
            "the rendered preview",
            "const t = document.getElementById('preview-output').textContent; \
             return t.includes('浏览器里改的') ? t : null;",
        )
        .await;
    let shown = shown.as_str().expect("preview text");
    assert!(
        shown.contains("浏览器里改的：请为「香酥鸭」写一份 3 人份"),
        "{shown}"
    );
    assert!(
        app.upstream.requests().is_empty(),
        "a preview calls no model"
    );

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG screenshot");
    let shot = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/admin-editor.png");
    std::fs::write(&shot, &png).expect("write the screenshot");
    browser.quit().await;
}

#[test]
fn the_base64_decoder_decodes_padded_and_unpadded_text() {
    assert_eq!(base64_decode("aGVsbG8="), b"hello");
    assert_eq!(base64_decode("aGVsbG8h"), b"hello!");
    assert_eq!(base64_decode("5LiA\n"), "一".as_bytes());
    assert_eq!(base64_decode("+/8="), [0xfb, 0xff]);
}

/// A chromedriver process with one browser session; dropping it ends both.
struct Browser {
    driver: Child,
    port: u16,
    session: Option<String>,
    profile: PathBuf,
    log: PathBuf,
    http: reqwest::Client,
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless Chromium session.
    async fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
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

    async fn wait_until_ready(&mut self) {
        for _ in 0..200 {
            if let Ok(Some(status)) = self.driver.try_wait() {
                panic!(
                    "chromedriver exited with {status}; see {}",
                    self.log.display()
                );
            }
            let url = format!("http://127.0.0.1:{}/status", self.port);
            if let Ok(response) = self.http.get(url).send().await
                && let Ok(body) = response.json::<Value>().await
                && body["value"]["ready"] == true
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("chromedriver did not get ready; see {}", self.log.display());
    }

    /// One WebDriver command; its `value`, or a panic naming the error.
    async fn command(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
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

    fn session_path(&self, rest: &str) -> String {
        let id = self.session.as_deref().expect("an open session");
        format!("/session/{id}{rest}")
    }

    async fn go(&self, url: &str) {
        let path = self.session_path("/url");
        self.command(reqwest::Method::POST, &path, json!({"url": url}))
            .await;
    }

    /// The element for a CSS selector, as WebDriver's element reference.
    async fn find(&self, selector: &str) -> String {
        let path = self.session_path("/element");
        let body = json!({"using": "css selector", "value": selector});
        let found = self.command(reqwest::Method::POST, &path, body).await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element for {selector}: {found}"))
            .to_owned()
    }

    async fn click(&self, element: &str) {
        let path = self.session_path(&format!("/element/{element}/click"));
        self.command(reqwest::Method::POST, &path, json!({})).await;
    }

    async fn type_into(&self, element: &str, text: &str) {
        let path = self.session_path(&format!("/element/{element}/value"));
        self.command(reqwest::Method::POST, &path, json!({"text": text}))
            .await;
    }

    /// Runs a script in the page and returns what it returned.
    async fn run(&self, script: &str, args: Value) -> Value {
        let path = self.session_path("/execute/sync");
        let body = json!({"script": script, "args": args});
        self.command(reqwest::Method::POST, &path, body).await
    }

    async fn set_value(&self, selector: &str, text: &str) {
        let value = self.run(SET_VALUE, json!([selector, text])).await;
        assert_eq!(value, json!(text), "{selector} holds the text");
    }

    async fn value_of(&self, selector: &str) -> String {
        let script = "return document.querySelector(arguments[0]).value;";
        let value = self.run(script, json!([selector])).await;
        value.as_str().expect("a text value").to_owned()
    }

    /// Polls a script until it returns something other than null, false or "".
    async fn wait_for(&self, what: &str, script: &str) -> Value {
        for _ in 0..300 {
            let value = self.run(script, json!([])).await;
            if !matches!(&value, Value::Null | Value::Bool(false)) && value.as_str() != Some("") {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let status = self
            .run(
                "return document.getElementById('status').textContent;",
                json!([]),
            )
            .await;
        panic!("timed out waiting for {what}; the page's status says {status}");
    }

    async fn screenshot(&self) -> Vec<u8> {
        let path = self.session_path("/screenshot");
        let encoded = self.command(reqwest::Method::GET, &path, json!(null)).await;
        base64_decode(encoded.as_str().expect("base64 text"))
    }

    /// Closes the session (and with it the browser).
    async fn quit(&mut self) {
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
