//! A real `redis-server` (Debian package `redis-server`; `.ci/run` installs it) on
//! a free loopback port, with a password, a data folder of its own and no
//! persistence, stopped by PID when dropped. No mock stands in for it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("ladle-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("redis data folder");
        let mut server = RedisServer {
            port,
            dir,
            child: None,
        };
        server.restart().await;
        server
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

    /// Starts the server (again) on its port, with empty data.
    pub async fn restart(&mut self) {
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
        self.child = Some(child);
        for _ in 0..300 {
            if self.ping().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("redis-server did not answer on {} within 3 s", self.port);
    }

    /// A connection for looking at what ladle wrote.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis")
    }

    async fn ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut connection) = client.get_multiplexed_async_connection().await else {
            return false;
        };
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
            .is_ok()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}
