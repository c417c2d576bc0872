//! The README's quick start, as a new user pastes it: every shell line, in order,
//! in a folder laid out as a fresh clone (the shipped `prompts/`), with the built
//! binary for `cargo run --release --`. Four things are filled in as a user
//! would: the port each server bound for `localhost:8080`, the job id of the line
//! before for `job_…`, the key `keys add` printed for `lk_…` (its `[[keys]]`
//! lines pasted into `keys.toml`, as its comment says), and, for the one line
//! that names a real upstream, a mock upstream's URL. `cargo test` is what runs
//! this, so it is the one line left out. Also: `demo` started where there is no
//! prompts folder serves the built-in ones, and `serve` says its folder is
//! missing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::mock_upstream::MockUpstream;
use crate::support::process::LadleProcess;
use crate::support::raw::blocking_get;
use crate::support::scripts::recipe_answer;
use crate::support::*;

const BINARY: &str = env!("CARGO_BIN_EXE_ladle");

/// The shell lines of the README's quick start (continued lines joined).
fn quick_start_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("the README");
    let section = readme
        .split("\n## Quick start")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a quick start section");
    let mut lines = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in section.lines() {
        match (in_block, line.trim_start().starts_with("```")) {
            (false, true) => in_block = line.trim() == "```sh",
            (true, true) => in_block = false,
            (true, false) => match line.strip_suffix('\\') {
                Some(start) => pending.push_str(start),
                None => lines.push(std::mem::take(&mut pending) + line),
            },
            (false, false) => {}
        }
    }
    lines
}

/// The servers the lines started, stopped at the end of the test.
#[derive(Default)]
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a user has in hand while pasting: the folder, the last server's port,
/// the last job id and the key `keys add` printed.
struct Session {
    folder: PathBuf,
    port: u16,
    job: String,
    key: String,
    upstream: String,
    servers: Servers,
}

impl Session {
    fn filled(&self, line: &str) -> String {
        line.replace("cargo run --release --", BINARY)
            .replace("localhost:8080", &format!("127.0.0.1:{}", self.port))
            .replace("job_…", &self.job)
            .replace("lk_…", &self.key)
            .replace("https://api.example.com/v1", &self.upstream)
    }

    fn shell(&self, line: &str) -> Command {
        let mut command = Command::new("sh");
        command.arg("-c").arg(line).current_dir(&self.folder);
        command
    }

    /// A `demo` or `serve` line: started in the background on a free port, once
    /// its health check answers.
    async fn start_server(&mut self, line: &str) {
        self.port = free_port();
        let child = self
            .shell(&format!("exec env {line}"))
            .env("LADLE_LISTEN", format!("127.0.0.1:{}", self.port))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh starts the server");
        self.servers.0.push(child);
        let health = format!("http://127.0.0.1:{}/healthz", self.port);
        let what = format!("`{line}` to serve /healthz");
        eventually(Duration::from_secs(10), what, async || {
            let answer = reqwest::get(&health).await.ok()?;
            answer.status().is_success().then_some(())
        })
        .await;
    }

    /// A `keys add` line: its key kept, its `[[keys]]` lines pasted into keys.toml.
    async fn add_key(&mut self, line: &str) {
        let output = run(self.shell(line)).await;
        let printed = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "`{line}`: {printed}");
        self.key = printed
            .split_whitespace()
            .find(|word| word.starts_with("lk_"))
            .expect("a key")
            .to_owned();
        let entry = &printed[printed.find("[[keys]]").expect("its lines")..];
        std::fs::write(self.folder.join("keys.toml"), entry).expect("paste keys.toml");
    }

    /// A `curl` line: its answer must be JSON and no error.
    async fn call(&mut self, line: &str) {
        let output = run(self.shell(line)).await;
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "`{line}` answered {:?}",
                String::from_utf8_lossy(&output.stdout)
            )
        });
        assert!(answer.get("error").is_none(), "`{line}` failed: {answer}");
        if let Some(id) = answer["id"].as_str().filter(|id| id.starts_with("job_")) {
            self.job = id.to_owned();
        }
        if answer["object"] == "job"
            && answer["status"] != "queued"
            && answer["status"] != "running"
        {
            assert_eq!(answer["status"], "succeeded", "`{line}`: {answer}");
        }
    }
}

/// Runs a command to its end off the runtime's thread (a server it calls may be
/// this process's mock upstream).
async fn run(mut command: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the wait ends")
        .expect("sh runs")
}

fn fresh_clone_folder() -> PathBuf {
    let folder = temp_dir("readme");
    std::fs::rename(prompts_copy(), folder.join("prompts")).expect("the shipped prompts");
    folder
}

#[tokio::test]
async fn every_shell_line_of_the_quick_start_works_as_written() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(recipe_answer());
    let mut session = Session {
        folder: fresh_clone_folder(),
        port: 8080,
        job: String::new(),
        key: String::new(),
        upstream: upstream.url.clone(),
        servers: Servers::default(),
    };
    let lines = quick_start_lines();
    assert!(lines.len() >= 8, "{lines:?}");
    let mut ran = Vec::new();
    for line in lines.iter().filter(|l| l.trim() != "cargo test") {
        let filled = session.filled(line);
        if line.contains("-- demo") || line.contains("-- serve") {
            session.start_server(&filled).await;
        } else if line.contains("-- keys add") {
            session.add_key(&filled).await;
        } else {
            assert!(
                line.starts_with("curl "),
                "a line this test does not know: {line}"
            );
            session.call(&filled).await;
        }
        ran.push(line.clone());
    }
    assert!(ran.iter().any(|l| l.contains("lk_…")), "{ran:?}");
    assert!(ran.iter().any(|l| l.contains("job_…")), "{ran:?}");
}

fn wait_for_line(child: &mut Child, wanted: &str) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .take_while(|line| !line.contains(wanted))
        .collect()
}

#[test]
fn demo_started_without_a_prompts_folder_serves_the_built_in_prompts_and_says_so() {
    let empty = temp_dir("no-prompts");
    let port = free_port();
    let mut child = Command::new(BINARY)
        .arg("demo")
        .current_dir(&empty)
        .env_remove("LADLE_PROMPTS_DIR")
        .env("LADLE_LISTEN", format!("127.0.0.1:{port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ladle demo starts");
    let printed = wait_for_line(&mut child, "/metrics");
    let ready = blocking_get(&format!("127.0.0.1:{port}"), "/readyz");
    let _ = child.kill();
    let _ = child.wait();
    let said = printed.join("\n");
    assert!(
        said.contains("serving the prompts built into ladle"),
        "{said}"
    );
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    assert!(ready.ends_with(r#"{"prompts":2}"#), "{ready}");
    assert!(
        !Path::new(&empty).join("prompts").exists(),
        "nothing written where it ran"
    );
}

#[tokio::test]
async fn serve_says_in_one_line_that_its_prompts_folder_does_not_exist() {
    let upstream = MockUpstream::start().await;
    let mut gateway = LadleProcess::start(
        &upstream.url,
        &[("LADLE_PROMPTS_DIR", "/nonexistent/prompts")],
    )
    .await;
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    let warned: Vec<String> = gateway
        .all_lines()
        .into_iter()
        .filter(|line| line.contains("the prompts folder does not exist"))
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("\"level\":\"WARN\""), "{warned:?}");
}
