//! The processes under test (mock upstream, nginx, ladle) and what `/proc` says
//! about them: CPU time from the scheduler's count per thread
//! (`/proc/PID/task/TID/schedstat`, in nanoseconds; `/proc/PID/stat`'s utime +
//! stime, in 10 ms ticks, where that is missing) and memory from
//! `/proc/PID/status` (`VmHWM`, `VmRSS`).
//!
//! Every child is started through `sh -c 'ulimit -n …; exec …'`, so it gets a high
//! file-descriptor limit and keeps the shell's pid. A [`Proc`] stops its process
//! when dropped, so a failed run leaves nothing behind.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::procfs::{children_of, cpu_ticks, schedstat_ns, status_kib};

/// The raising prelude every child runs through.
const RAISE_FDS: &str =
    "ulimit -n 65536 2>/dev/null || ulimit -n \"$(ulimit -Hn)\"; exec \"$0\" \"$@\"";

/// A running child process (for nginx: its master) and the pids that make it up.
pub struct Proc {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    pids: Vec<u32>,
    /// A directory to remove when the process is gone.
    scratch: Option<PathBuf>,
}

impl Proc {
    /// A started child listening on `addr`, with its scratch folder.
    pub fn new(addr: SocketAddr, child: Child, scratch: PathBuf) -> Proc {
        let pids = vec![child.id()];
        let scratch = Some(scratch);
        Proc {
            addr,
            child,
            pids,
            scratch,
        }
    }

    /// CPU time of all its processes, in nanoseconds. A thread that ended takes
    /// its time with it, so a measurement spans no thread's exit: nginx's processes
    /// are single-threaded, and ladle's threads live as long as it does.
    pub fn cpu_ns(&self, ticks_per_second: u64) -> u64 {
        self.pids
            .iter()
            .filter_map(|&pid| {
                schedstat_ns(pid)
                    .or_else(|| Some(cpu_ticks(pid)? * 1_000_000_000 / ticks_per_second))
            })
            .sum()
    }

    /// Peak resident memory (`VmHWM`) of all its processes, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.pids
            .iter()
            .filter_map(|&pid| status_kib(pid, "VmHWM:"))
            .sum()
    }

    /// Current resident memory (`VmRSS`) of all its processes, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.pids
            .iter()
            .filter_map(|&pid| status_kib(pid, "VmRSS:"))
            .sum()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // nginx's master takes its worker down on TERM; the others just stop.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Clock ticks per second (`getconf CLK_TCK`, else 100).
pub fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100)
}

/// The soft limit on open files of this process.
pub fn open_files_limit() -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|soft| soft.parse().ok())
        .unwrap_or(0)
}

/// Re-executes this binary with a raised file-descriptor limit; returns its status.
pub fn reexec_with_more_fds() -> Result<bool, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let status = Command::new("sh")
        .arg("-c")
        .arg(RAISE_FDS)
        .arg(me)
        .args(std::env::args().skip(1))
        .env("LADLE_BENCH_FDS_RAISED", "1")
        .status()
        .map_err(|e| e.to_string())?;
    Ok(status.success())
}

pub fn spawn(program: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command.arg("-c").arg(RAISE_FDS).arg(program).args(args);
    command.stdin(Stdio::null()).stdout(Stdio::null());
    // The benchmark's own knobs are not ladle's settings.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("LADLE_BENCH_") {
            command.env_remove(key);
        }
    }
    command
}

/// A scratch directory of our own under the system temp dir.
pub fn scratch_dir(what: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("ladle-bench-{}-{what}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Starts the mock upstream (this binary, re-executed) and waits for its port.
pub fn start_mock() -> Result<Proc, String> {
    start_mock_with(1, 0)
}

/// Starts the mock upstream writing `chunks` content chunks `gap_ms` apart to a
/// request that names no shape of its own.
pub fn start_mock_with(chunks: u32, gap_ms: u64) -> Result<Proc, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = scratch_dir("mock")?;
    let port_file = dir.join("port");
    let port_arg = port_file.to_string_lossy().into_owned();
    let (chunks, gap_ms) = (chunks.to_string(), gap_ms.to_string());
    let child = spawn(&me, &["--mock-upstream", &port_arg, &chunks, &gap_ms])
        .spawn()
        .map_err(|e| format!("cannot start the mock upstream: {e}"))?;
    let pid = child.id();
    let mut proc = Proc {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        child,
        pids: vec![pid],
        scratch: Some(dir),
    };
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(port) = std::fs::read_to_string(&port_file)
            && let Ok(port) = port.trim().parse::<u16>()
        {
            proc.addr.set_port(port);
            return Ok(proc);
        }
        if Instant::now() > until {
            return Err("the mock upstream did not report its port within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The upstream settings of ladle in the benchmark: the mock alone, or with
/// `LADLE_BENCH_UPSTREAMS=3` three upstreams of which one is down (a closed port,
/// listed first among equals so that it is tried and its breaker opens).
fn upstream_env(upstream: SocketAddr) -> Result<(&'static str, String), String> {
    let url = format!("http://{upstream}/v1");
    if crate::env_or("LADLE_BENCH_UPSTREAMS", 1u32) != 3 {
        return Ok(("LADLE_UPSTREAM_URL", url));
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("cannot find a closed port: {e}"))?;
    let list = serde_json::json!([
        {"name": "down", "url": format!("http://{closed}/v1"), "weight": 1},
        {"name": "mock-a", "url": url, "weight": 1},
        {"name": "mock-b", "url": url, "priority": 1},
    ]);
    Ok(("LADLE_UPSTREAMS", list.to_string()))
}

/// Starts ladle's release binary in front of the mock, with `extra` settings (over
/// the defaults here), and waits for its address.
pub fn start_ladle(upstream: SocketAddr, extra: &[(&str, String)]) -> Result<Proc, String> {
    start_ladle_from(Path::new(env!("CARGO_BIN_EXE_ladle")), upstream, extra)
}

/// Starts the ladle binary at `binary` (this build's, or an earlier one's) as
/// [`start_ladle`] does.
pub fn start_ladle_from(
    binary: &Path,
    upstream: SocketAddr,
    extra: &[(&str, String)],
) -> Result<Proc, String> {
    let (key, value) = upstream_env(upstream)?;
    let mut child = spawn(binary, &["serve"])
        .env(key, value)
        .env("LADLE_LISTEN", "127.0.0.1:0")
        .env("LADLE_MODEL", "m")
        .env(
            "LADLE_PROMPTS_DIR",
            concat!(env!("CARGO_MANIFEST_DIR"), "/prompts"),
        )
        .env("LADLE_LOG_FORMAT", "json")
        .env("LADLE_MAX_INFLIGHT", "100000")
        .env("LADLE_IDLE_TIMEOUT_MS", "120000")
        .env("LADLE_DEADLINE_MS", "300000")
        // No state file in the working directory: the jobs' run names its own.
        .env("LADLE_STATE_DB", ":memory:")
        // One thread, as nginx runs one worker: the CPU per request of the two
        // compares like with like.
        .env(
            "LADLE_WORKERS",
            crate::env_or("LADLE_BENCH_WORKERS", 1u32).to_string(),
        )
        // Warnings only, so logging stays off the hot path; the one info line we
        // need is the address it bound.
        .env("RUST_LOG", "warn,ladle::cli=info")
        // The run's own settings win over the defaults above.
        .envs(extra.iter().map(|(k, v)| (k, v)))
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let stderr = child.stderr.take().ok_or("ladle's stderr is not piped")?;
    let (found, address) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut found = Some(found);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1)
                && let Some(sender) = found.take()
            {
                let addr: String = rest.chars().take_while(|c| *c != '"').collect();
                let _ = sender.send(addr);
            } else if !line.contains(r#""level":"INFO""#) {
                eprintln!("ladle: {line}");
            }
        }
    });
    let pid = child.id();
    let addr = address
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| "ladle did not log `listening on ADDR` within 10 s")?;
    Ok(Proc {
        addr: addr
            .trim()
            .parse()
            .map_err(|e| format!("ladle logged a bad address {addr:?}: {e}"))?,
        child,
        pids: vec![pid],
        scratch: None,
    })
}

/// The nginx binary, installing Debian's `nginx-light` when it is missing.
pub fn nginx_binary() -> Result<PathBuf, String> {
    let path = PathBuf::from(
        std::env::var("LADLE_BENCH_NGINX").unwrap_or_else(|_| "/usr/sbin/nginx".into()),
    );
    if path.exists() {
        return Ok(path);
    }
    eprintln!(
        "bench: {} is missing; installing nginx-light",
        path.display()
    );
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "nginx-light"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get").args(["update", "-q"]).status();
        install();
    }
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "nginx is needed as the reference relay, but {} is missing and \
             `apt-get install -y nginx-light` did not provide it. Install Debian's \
             nginx-light (or set LADLE_BENCH_NGINX to an nginx binary) and run again.",
            path.display()
        ))
    }
}

/// Starts nginx (1 worker, `proxy_buffering off`, upstream keep-alive) in front of
/// the mock, with its own config, pid and temp files in a scratch directory.
pub fn start_nginx(binary: &Path, upstream: SocketAddr) -> Result<Proc, String> {
    let dir = scratch_dir("nginx")?;
    let port = free_port()?;
    let d = dir.display();
    let fds = open_files_limit().min(65536);
    let connections = fds.saturating_sub(64);
    let config = format!(
        "worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log stderr warn;
worker_rlimit_nofile {fds};
events {{ worker_connections {connections}; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000;
    upstream mock {{
        server {upstream};
        keepalive 1024;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"
    );
    let config_path = dir.join("nginx.conf");
    std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
    let config_arg = config_path.to_string_lossy().into_owned();
    let prefix_arg = format!("{d}/");
    let child = spawn(
        binary,
        &["-p", &prefix_arg, "-e", "stderr", "-c", &config_arg],
    )
    .spawn()
    .map_err(|e| format!("cannot start nginx: {e}"))?;
    let master = child.id();
    let mut proc = Proc {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        child,
        pids: vec![master],
        scratch: Some(dir),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(proc.addr).is_err() || children_of(master).is_empty() {
        if let Ok(Some(status)) = proc.child.try_wait() {
            return Err(format!("nginx exited at start-up ({status})"));
        }
        if Instant::now() > until {
            return Err("nginx did not start within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    proc.pids.extend(children_of(master));
    Ok(proc)
}

pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}
