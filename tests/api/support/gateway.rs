//! Starts the real server on an ephemeral loopback port, in front of a mock
//! upstream, with every timeout scaled down to milliseconds.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ladle::config::{Config, Secret, UpstreamSettings};
use ladle::server;
use ladle::state::AppState;
use serde_json::Value;

use super::mock_upstream::MockUpstream;

/// The API key the tests configure; it must never come back out.
pub const API_KEY: &str = "sk-test-abcdef123456";

/// A running gateway and its mock upstream.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The mock upstream behind it.
    pub upstream: MockUpstream,
    /// The gateway's prompts folder (a private copy).
    pub prompts_dir: PathBuf,
    /// An HTTP client for calling the gateway.
    pub client: reqwest::Client,
}

/// Config with timeouts scaled down so no test waits for seconds.
pub fn fast_config(prompts_dir: &std::path::Path) -> Config {
    let env = |key: &str| -> Option<String> {
        let value = match key {
            "LADLE_LISTEN" => "127.0.0.1:0",
            "LADLE_MODEL" => "test-model",
            "LADLE_UPSTREAM_API_KEY" => API_KEY,
            "LADLE_CONNECT_TIMEOUT_MS" => "300",
            "LADLE_IDLE_TIMEOUT_MS" => "300",
            "LADLE_DEADLINE_MS" => "3000",
            "LADLE_MIN_REMAINING_MS" => "500",
            "LADLE_BACKOFF_BASE_MS" => "20",
            "LADLE_BACKOFF_MAX_MS" => "100",
            "LADLE_EARLY_RETRY_WINDOW_MS" => "1000",
            "LADLE_QUEUE_TIMEOUT_MS" => "200",
            "LADLE_PROMPT_RELOAD_MS" => "50",
            // The machine's own proxy variables never steer a test's upstream.
            "LADLE_UPSTREAM_PROXY" => "none",
            _ => return None,
        };
        Some(value.to_owned())
    };
    let mut config = Config::load(None, &env).expect("test config is valid");
    config.prompts_dir = prompts_dir.to_path_buf();
    config
}

/// A fresh folder holding a copy of the shipped prompts.
pub fn prompts_copy() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ladle-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create prompts copy");
    for entry in
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/prompts")).expect("read prompts")
    {
        let entry = entry.expect("prompt entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy prompt");
    }
    dir
}

/// Starts a gateway with the fast config, changed by `adjust`.
pub async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_until(adjust, std::future::pending()).await.0
}

/// Starts a gateway that shuts down when `shutdown` resolves; the handle ends
/// when the server has stopped.
pub async fn spawn_app_until(
    adjust: impl FnOnce(&mut Config),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (TestApp, tokio::task::JoinHandle<std::io::Result<()>>) {
    let upstream = MockUpstream::start().await;
    let prompts_dir = prompts_copy();
    let mut config = fast_config(&prompts_dir);
    adjust(&mut config);
    let (base, server) = spawn_gateway_until(config, &upstream.url, shutdown).await;
    let app = TestApp {
        base,
        upstream,
        prompts_dir,
        client: reqwest::Client::new(),
    };
    (app, server)
}

/// Serves a gateway for `config` in front of `upstream_url`; returns its base URL.
pub async fn spawn_gateway(config: Config, upstream_url: &str) -> String {
    spawn_gateway_until(config, upstream_url, std::future::pending())
        .await
        .0
}

/// Serves a gateway until `shutdown` resolves; returns its base URL and the
/// server's handle, which ends when the server has stopped.
pub async fn spawn_gateway_until(
    mut config: Config,
    upstream_url: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    config.upstreams = vec![UpstreamSettings::single(
        upstream_url,
        Secret::new(API_KEY),
        config.upstream_proxy.clone(),
    )];
    serve_config(config, shutdown).await
}

/// Serves a gateway for `config` as it is (its own `upstreams`).
pub async fn serve_config(
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind gateway");
    let base = format!("http://{}", listener.local_addr().expect("gateway address"));
    let state = AppState::new(config).expect("state builds");
    (base, tokio::spawn(server::serve(listener, state, shutdown)))
}

/// Starts a gateway with the fast config.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

impl TestApp {
    /// POSTs a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await
            .expect("gateway answers")
    }

    /// POSTs a JSON body asking for an event stream.
    pub async fn post_events(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .header("accept", "text/event-stream")
            .json(body)
            .send()
            .await
            .expect("gateway answers")
    }

    /// GETs a path.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("gateway answers")
    }

    /// A chat request with one user message.
    pub async fn chat(&self, stream: bool) -> reqwest::Response {
        let body =
            serde_json::json!({"stream": stream, "messages": [{"role": "user", "content": "hi"}]});
        self.post("/v1/chat/completions", &body).await
    }

    /// The value of one metric series in `/metrics`, 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let text = self
            .get("/metrics")
            .await
            .text()
            .await
            .expect("metrics text");
        text.lines()
            .find_map(|line| {
                line.strip_prefix(series)
                    .and_then(|rest| rest.trim().parse().ok())
            })
            .unwrap_or(0.0)
    }
}

/// Whether an answer was taken from another request's run (`Idempotent-Replayed`).
pub fn replayed(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

/// The JSON body of a response.
pub async fn json_of(response: reqwest::Response) -> Value {
    response.json().await.expect("a JSON body")
}

/// Splits an SSE body into `(event, data)` pairs; comments are kept as `(":", text)`.
pub fn sse_events(body: &str) -> Vec<(String, String)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = String::from("message");
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(comment) = line.strip_prefix(':') {
                    return (":".to_owned(), comment.trim().to_owned());
                }
                if let Some(name) = line.strip_prefix("event:") {
                    event = name.trim().to_owned();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value));
                }
            }
            (event, data.join("\n"))
        })
        .collect()
}

/// Milliseconds between two instants.
pub fn ms(from: tokio::time::Instant, to: tokio::time::Instant) -> u128 {
    to.saturating_duration_since(from).as_millis()
}

/// A short pause, for scripts.
pub fn millis(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `127.0.0.1:PORT` of a test app.
pub fn address(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_owned()
}

/// A chat request with one user message to the gateway at `base`.
pub async fn post_chat(base: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&serde_json::json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("gateway answers")
}

/// Waits (up to a second) until `done` holds.
pub async fn wait_until(done: impl Fn() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the condition did not hold within a second");
}
