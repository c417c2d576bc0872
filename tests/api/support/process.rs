//! The real `ladle` binary as a child process: started with `serve` on port 0,
//! its address read from the `listening on ADDR` log line, its stderr kept line
//! by line. Everything waits asynchronously, so the mock upstream on the test's
//! runtime keeps answering. A child still running when the test ends is killed.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::gateway::prompts_copy;

/// A running gateway process.
pub struct Gateway {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// `127.0.0.1:PORT`.
    pub address: String,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Gateway {
    /// Starts `ladle serve` in front of `upstream_url` with scaled-down timeouts,
    /// JSON logs, and `env` on top. Nothing else from the test's environment
    /// reaches the child.
    pub async fn start(upstream_url: &str, env: &[(&str, &str)]) -> Gateway {
        let prompts = prompts_copy();
        let mut command = Command::new(env!("CARGO_BIN_EXE_ladle"));
        command
            .arg("serve")
            .env_clear()
            .current_dir(&prompts)
            .env("LADLE_LISTEN", "127.0.0.1:0")
            .env("LADLE_UPSTREAM_URL", upstream_url)
            .env("LADLE_PROMPTS_DIR", &prompts)
            .env("LADLE_MODEL", "test-model")
            .env("LADLE_LOG_FORMAT", "json")
            .env("LADLE_IDLE_TIMEOUT_MS", "1000")
            .env("LADLE_DEADLINE_MS", "4000")
            .env("LADLE_MIN_REMAINING_MS", "500")
            .env("LADLE_BACKOFF_BASE_MS", "20")
            .env("LADLE_BACKOFF_MAX_MS", "100")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the ladle binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().expect("stderr lines lock").push(line);
            }
        });
        let mut gateway = Gateway {
            child,
            base: String::new(),
            address: String::new(),
            lines,
            reader: Some(reader),
        };
        let give_up = Instant::now() + Duration::from_secs(10);
        while gateway.address.is_empty() {
            assert!(
                Instant::now() < give_up,
                "no `listening on` line; stderr so far: {:?}",
                gateway.lines()
            );
            if let Some(address) = gateway.lines().iter().find_map(|l| listening_on(l)) {
                gateway.address = address;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        gateway.base = format!("http://{}", gateway.address);
        gateway
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM, as an orchestrator would.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Kills the process outright (SIGKILL), as a crashed host would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits (up to `limit`) for the process to exit.
    pub async fn exited(&mut self, limit: Duration) -> ExitStatus {
        let give_up = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < give_up, "the gateway did not exit in time");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every stderr line so far; after exit, once the pipe is drained, all of them.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("stderr lines lock").clone()
    }

    /// A chat request with one user message, under `request_id`.
    pub async fn chat(&self, request_id: &str, stream: bool) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", self.base))
            .header("x-request-id", request_id)
            .json(&serde_json::json!({
                "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
            }))
            .send()
            .await
            .expect("answer")
    }

    /// The JSON log lines for one request id and message, after the process has
    /// exited.
    pub fn lines_of(&mut self, request_id: &str, message: &str) -> Vec<serde_json::Value> {
        self.all_lines()
            .iter()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|l| l["request_id"] == request_id && l["message"] == message)
            .collect()
    }

    /// All stderr lines, after the process has exited.
    pub fn all_lines(&mut self) -> Vec<String> {
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the stderr reader ends");
        }
        self.lines()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The address in a `listening on ADDR` line.
fn listening_on(line: &str) -> Option<String> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    let end = rest
        .find(|c: char| c == '"' || c.is_whitespace())
        .unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}
