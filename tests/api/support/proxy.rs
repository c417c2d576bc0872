//! Debian's `tinyproxy` as a real forward proxy: started on a free loopback port
//! with a config and log of its own, killed by PID when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::eventually::eventually;
use super::free_port;

/// A tinyproxy process on a free loopback port, killed when dropped.
pub struct Tinyproxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    child: Child,
    dir: PathBuf,
}

impl Tinyproxy {
    /// Starts tinyproxy with `extra` config lines; panics, naming the package, if it
    /// is not installed (`.ci/run` installs it).
    pub async fn start(extra: &str) -> Tinyproxy {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("ladle-tinyproxy-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("proxy folder");
        let config = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 50\nAllow 127.0.0.1\n\
             LogFile \"{log}\"\nLogLevel Info\nDisableViaHeader Yes\n{extra}",
            log = dir.join("tinyproxy.log").display()
        );
        let config_path = dir.join("tinyproxy.conf");
        std::fs::write(&config_path, config).expect("proxy config");
        let child = Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tinyproxy is installed (Debian package `tinyproxy`; .ci/run installs it)");
        // Made at once, so that a failed wait below still kills it.
        let proxy = Tinyproxy {
            url: format!("http://127.0.0.1:{port}"),
            child,
            dir,
        };
        let what = format!("tinyproxy to listen on {port}");
        eventually(Duration::from_secs(2), what, async || {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        proxy
    }

    /// What tinyproxy logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("tinyproxy.log")).unwrap_or_default()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
