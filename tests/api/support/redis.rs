//! A real `redis-server` (Debian package `redis-server`; `.ci/run` installs it) on
//! a free loopback port, with a password, a data folder of its own and no
//! persistence, stopped by PID when dropped (no mock stands in for it); and ways
//! to look at what ladle wrote there.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::answers::json_of;
use super::eventually::eventually;
use super::free_port;
use super::http::Endpoint;

/// The password every test Redis asks for: it must never come out of ladle.
pub const REDIS_PASSWORD: &str = "r3dis-s3cret-pw";

/// A running redis-server.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts redis-server on a free port; panics, naming the package, if it is
    /// not installed.
    pub async fn start() -> RedisServer {
        // A port found free may be taken by another test's server before ours
        // binds it; then ours exits, and we try another port.
        for _ in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("ladle-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("redis data folder");
            let mut server = RedisServer {
                port,
                dir,
                child: None,
            };
            if server.launch().await {
                return server;
            }
        }
        panic!("redis-server found no free port in 5 tries");
    }

    /// `redis://:password@127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://:{REDIS_PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// Stops the server by PID (SIGKILL: an outage, not a tidy shutdown).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): an outage that keeps its data, as a network
    /// partition or a long stall would.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("the server runs");
        let sent = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill {signal} failed");
    }

    /// Starts the server again on its port, with empty data.
    pub async fn restart(&mut self) {
        assert!(
            self.launch().await,
            "redis-server could not take its port again"
        );
    }

    /// Starts the server on its port; whether it is ours that answers there.
    async fn launch(&mut self) -> bool {
        self.stop();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--requirepass", REDIS_PASSWORD])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server is installed (Debian package `redis-server`; .ci/run installs it)",
            );
        let pid = child.id();
        self.child = Some(child);
        let what = format!("redis-server to answer on {}", self.port);
        eventually(Duration::from_secs(3), what, async || {
            let exited = self
                .child
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited {
                self.child = None;
                return Some(false);
            }
            self.pid().await.map(|answering| answering == pid)
        })
        .await
    }

    /// A connection for looking at what ladle wrote.
    pub async fn connection(&self) -> ::redis::aio::MultiplexedConnection {
        ::redis::Client::open(self.url())
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis")
    }

    /// Waits (up to 2 s) until `key` exists.
    pub async fn wait_for_key(&self, key: &str) {
        let mut connection = self.connection().await;
        eventually(Duration::from_secs(2), format!("`{key}`"), async || {
            ::redis::cmd("EXISTS")
                .arg(key)
                .query_async::<bool>(&mut connection)
                .await
                .expect("EXISTS")
        })
        .await;
    }

    /// How many times Redis has run `command` (`INFO commandstats`), for all
    /// its clients together.
    pub async fn calls(&self, command: &str) -> u64 {
        let mut connection = self.connection().await;
        let info: String = ::redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut connection)
            .await
            .expect("INFO commandstats");
        let prefix = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// The first attempts and retries the fleet has shared for `upstream` (every
    /// replica's fields of every `ladle:budget:{upstream}:*` bucket, summed).
    pub async fn shared_budget(&self, upstream: &str) -> (u64, u64) {
        let mut connection = self.connection().await;
        let buckets: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("ladle:budget:{upstream}:*"))
            .query_async(&mut connection)
            .await
            .expect("KEYS");
        let (mut firsts, mut retries) = (0, 0);
        for bucket in buckets {
            let fields: Vec<(String, u64)> = ::redis::cmd("HGETALL")
                .arg(&bucket)
                .query_async(&mut connection)
                .await
                .expect("HGETALL");
            for (field, count) in fields {
                if field.ends_with(":f") {
                    firsts += count;
                } else if field.ends_with(":r") {
                    retries += count;
                }
            }
        }
        (firsts, retries)
    }

    /// The process id of the server answering on the port, if one does.
    async fn pid(&self) -> Option<u32> {
        let client = ::redis::Client::open(self.url()).ok()?;
        let mut connection = client.get_multiplexed_async_connection().await.ok()?;
        let info: String = ::redis::cmd("INFO")
            .arg("server")
            .query_async(&mut connection)
            .await
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `replica` serves Redis's copy of prompt `name` (its time of change is
/// Redis's), not the folder's copy it started with.
pub async fn follows_redis(
    replica: &Endpoint,
    connection: &mut ::redis::aio::MultiplexedConnection,
    name: &str,
) -> bool {
    let updated: Option<u64> = ::redis::cmd("HGET")
        .arg("ladle:prompts:updated")
        .arg(name)
        .query_async(connection)
        .await
        .expect("HGET");
    let Some(updated) = updated else {
        return false;
    };
    let list = replica.admin(Method::GET, "/admin/prompts").send();
    let list: Value = json_of(list.await.expect("answers")).await;
    list.as_array()
        .into_iter()
        .flatten()
        .any(|p| p["name"] == name && p["updated_at"] == ladle::prompts::rfc3339(updated))
}
