//! The real `ladle` binary as a child process: `ladle serve` on port 0, its
//! address read from the `listening on ADDR` log line, its stderr kept line by
//! line; and the bare command for the CLI's tests. Everything waits
//! asynchronously, so the mock upstream on the test's runtime keeps answering. A
//! child still running when the test ends is killed.

use std::io::{BufRead, BufReader};
use std::ops::Deref;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::eventually::{Lazy, eventually, within};
use super::fixtures::prompts_copy;
use super::http::Endpoint;

/// The `ladle` binary with an empty environment but for `PATH`.
pub fn ladle_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ladle"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    command
}

/// `ladle serve` on any free port in front of a closed one, serving a fresh copy
/// of the shipped prompts; more settings to add before it runs.
pub fn serve_before_a_closed_port() -> Command {
    let mut command = ladle_command();
    command
        .arg("serve")
        .env("LADLE_LISTEN", "127.0.0.1:0")
        .env("LADLE_UPSTREAM_URL", "http://127.0.0.1:9/v1")
        .env("LADLE_PROMPTS_DIR", prompts_copy());
    command
}

/// A running `ladle serve`; its requests are `Endpoint`'s (it derefs to one).
pub struct LadleProcess {
    child: Child,
    endpoint: Endpoint,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Deref for LadleProcess {
    type Target = Endpoint;
    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl LadleProcess {
    /// Starts `ladle serve` in front of `upstream_url` with scaled-down timeouts,
    /// JSON logs, and `env` on top. Nothing else from the test's environment
    /// reaches the child.
    pub async fn start(upstream_url: &str, env: &[(&str, &str)]) -> LadleProcess {
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
        // Made at once, so that a failed wait below still kills the child.
        let mut gateway = LadleProcess {
            child,
            endpoint: Endpoint::new(String::new()),
            lines,
            reader: Some(reader),
        };
        let what = Lazy(|| format!("a `listening on` line; stderr: {:?}", gateway.lines()));
        let address = eventually(Duration::from_secs(10), what, async || {
            gateway.lines().iter().find_map(|l| listening_on(l))
        })
        .await;
        gateway.endpoint = Endpoint::new(format!("http://{address}"));
        gateway
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's resident memory (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// Its time on CPU so far (user and system), in clock ticks (1/100 s).
    pub fn cpu_ticks(&self) -> u64 {
        let path = format!("/proc/{}/stat", self.pid());
        let stat = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // After the command's closing parenthesis, utime and stime are the 12th
        // and 13th fields.
        let after = &stat[stat.rfind(')').expect("a command name") + 1..];
        let fields: Vec<u64> = after
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        fields[11] + fields[12]
    }

    /// The most resident memory the process has had (`VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let path = format!("/proc/{}/status", self.pid());
        let status = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("a {field} line"))
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
        let child = &mut self.child;
        eventually(limit, "the gateway to exit", async || {
            child.try_wait().expect("try_wait")
        })
        .await
    }

    /// Every stderr line so far; after exit, once the pipe is drained, all of them.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("stderr lines lock").clone()
    }

    /// The JSON log lines so far for one request id and message.
    pub fn logged(&self, request_id: &str, message: &str) -> Vec<Value> {
        self.lines()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|l| l["request_id"] == request_id && l["message"] == message)
            .collect()
    }

    /// The JSON log lines for one request id and message, after the process has
    /// exited.
    pub fn lines_of(&mut self, request_id: &str, message: &str) -> Vec<Value> {
        self.all_lines();
        self.logged(request_id, message)
    }

    /// All stderr lines, after the process has exited.
    pub fn all_lines(&mut self) -> Vec<String> {
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the stderr reader ends");
        }
        self.lines()
    }
}

impl Drop for LadleProcess {
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

/// Runs `command` to its end; a command still running after 10 s is killed and
/// fails the test (a `serve` that should have refused to start).
pub async fn finished(mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ladle binary starts");
    let limit = Duration::from_secs(10);
    let ended = within(limit, async || child.try_wait().expect("try_wait")).await;
    if ended.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("ladle was still running after 10 s");
    }
    child.wait_with_output().expect("its output")
}

/// Everything a finished command wrote, stdout then stderr.
pub fn text_of(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
