//! A lean HTTP/1.1 load client, as `wrk` is: one prepared request written again
//! and again on each of `concurrency` keep-alive connections, and each response
//! read to its end (by `content-length`, or to the last chunk), timed.
//!
//! The cache's latency is a closed loop at c=50: each client sends its next
//! request when its answer is in, so a hit's time is ladle's share plus the load
//! generator's. reqwest (its pool, its connection tasks and the channel between
//! them) costs about as much per request as ladle's hit itself, and doubles the
//! figure; this client costs a fraction of it, so what it measures is ladle's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A `POST` of `body` (JSON) to `path`, prepared once.
pub fn post(path: &str, body: &[u8]) -> Arc<[u8]> {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request.into()
}

/// A `GET` of `path`, prepared once.
pub fn get(path: &str) -> Arc<[u8]> {
    format!("GET {path} HTTP/1.1\r\nhost: bench\r\n\r\n")
        .into_bytes()
        .into()
}

/// What one run measured.
pub struct Run {
    /// Each answered request's time (ms), sorted.
    pub times: Vec<f64>,
    /// Requests that failed (not `200`, or not ending as `ends_with` says).
    pub errors: usize,
    /// The run's wall time.
    pub elapsed: Duration,
}

impl Run {
    /// Answered requests per second.
    pub fn per_s(&self) -> f64 {
        self.times.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// Sends `request` `count` times to `addr` on `concurrency` connections; an
/// answer counts when it is a `200` whose body ends with `ends_with`.
pub async fn run(
    addr: SocketAddr,
    request: Arc<[u8]>,
    ends_with: &'static [u8],
    concurrency: usize,
    count: usize,
) -> Run {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (next, request) = (next.clone(), request.clone());
            tokio::spawn(async move {
                let (mut times, mut errors) = (Vec::new(), 0);
                let mut connection = None;
                while next.fetch_add(1, Ordering::Relaxed) < count {
                    let sent = Instant::now();
                    if connection.is_none() {
                        connection = Connection::open(addr).await.ok();
                    }
                    let answered = match connection.as_mut() {
                        Some(open) => open.exchange(&request, ends_with).await,
                        None => None,
                    };
                    match answered {
                        Some(true) => times.push(sent.elapsed().as_secs_f64() * 1e3),
                        Some(false) => errors += 1,
                        None => {
                            errors += 1;
                            connection = None;
                        }
                    }
                }
                (times, errors)
            })
        })
        .collect();
    let mut run = Run {
        times: Vec::with_capacity(count),
        errors: 0,
        elapsed: Duration::ZERO,
    };
    for worker in workers {
        let (times, errors) = worker.await.unwrap_or_default();
        run.times.extend(times);
        run.errors += errors;
    }
    run.elapsed = started.elapsed();
    run.times.sort_by(f64::total_cmp);
    run
}

/// One keep-alive connection and what it has read past the last answer.
struct Connection {
    stream: TcpStream,
    read: Vec<u8>,
}

impl Connection {
    async fn open(addr: SocketAddr) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            read: Vec::with_capacity(16 << 10),
        })
    }

    /// Writes `request` and reads its answer: whether it is a `200` whose body
    /// ends with `ends_with`. `None` when the connection fails or the answer
    /// cannot be read (the connection is then not used again).
    async fn exchange(&mut self, request: &[u8], ends_with: &[u8]) -> Option<bool> {
        self.stream.write_all(request).await.ok()?;
        let head_end = loop {
            if let Some(at) = find(&self.read, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill().await?;
        };
        let head = std::str::from_utf8(&self.read[..head_end]).ok()?;
        let ok = head.split(' ').nth(1) == Some("200");
        let header = |name: &str| {
            head.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case(name).then(|| value.trim())
            })
        };
        let length = match header("content-length") {
            Some(length) => Some(length.parse::<usize>().ok()?),
            None if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) => None,
            None => return None,
        };
        self.read.drain(..head_end);
        let ends = match length {
            Some(length) => {
                self.fill_to(length).await?;
                let ends = self.read[..length].ends_with(ends_with);
                self.read.drain(..length);
                ends
            }
            None => self.chunks(ends_with).await?,
        };
        Some(ok && ends)
    }

    /// Reads a chunked body to its end: whether the body ends with `ends_with`.
    async fn chunks(&mut self, ends_with: &[u8]) -> Option<bool> {
        let mut tail = Vec::with_capacity(64);
        loop {
            let line_end = loop {
                if let Some(at) = find(&self.read, b"\r\n") {
                    break at;
                }
                self.fill().await?;
            };
            let size_text = std::str::from_utf8(&self.read[..line_end]).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            self.read.drain(..line_end + 2);
            self.fill_to(size + 2).await?;
            tail.extend_from_slice(&self.read[..size]);
            if tail.len() > 32 {
                tail.drain(..tail.len() - 32);
            }
            self.read.drain(..size + 2);
            if size == 0 {
                return Some(tail.ends_with(ends_with));
            }
        }
    }

    /// Reads until at least `n` bytes are in.
    async fn fill_to(&mut self, n: usize) -> Option<()> {
        while self.read.len() < n {
            self.fill().await?;
        }
        Some(())
    }

    /// Reads more; `None` at the end of the stream or on an error.
    async fn fill(&mut self) -> Option<()> {
        self.read.reserve(16 << 10);
        match self.stream.read_buf(&mut self.read).await {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(()),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
