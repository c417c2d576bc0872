//! The load generator: a fixed number of streaming chat requests at a fixed
//! concurrency, timing the first content chunk and the whole answer of each.
//!
//! A request counts as an error unless it answers 200 and its body ends with
//! `data: [DONE]`. The memory check opens many slow streams at once and holds them
//! until told to let go.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{Semaphore, watch};

/// One load shape.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Requests per measured run.
    pub requests: usize,
    /// Content chunks per answer.
    pub chunks: u32,
    /// Gap between content chunks, in ms.
    pub gap_ms: u64,
    /// Whether each request carries an `Idempotency-Key` of its own (so each runs).
    pub keyed: bool,
    /// A client key to send (`Authorization: Bearer …`).
    pub bearer: Option<&'static str>,
}

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Times to the first content bytes, in ms, sorted.
    pub ttft: Vec<f64>,
    /// Times to the end of the answer, in ms, sorted.
    pub total: Vec<f64>,
    /// Requests that failed.
    pub errors: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl Sample {
    /// Completed requests per second.
    pub fn rps(&self) -> f64 {
        self.total.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// The `p`-quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The client every run uses: keep-alive, no idle limit per host.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(600))
        .build()
        .expect("the load generator's client builds")
}

/// A POST of the JSON `body` to `url`, to send.
pub fn post_json(
    client: &reqwest::Client,
    url: impl reqwest::IntoUrl,
    body: impl Into<reqwest::Body>,
) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
}

/// The request body for a shape (the mock reads `n_chunks` and `gap_ms`).
pub fn body(chunks: u32, gap_ms: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"model":"m","stream":true,"messages":[{{"role":"user","content":"bench"}}],"n_chunks":{chunks},"gap_ms":{gap_ms}}}"#
    ))
}

/// Runs `load` against `urls` (round robin, request by request) and measures
/// every request.
pub async fn run(client: &reqwest::Client, urls: &[String], load: Load) -> Sample {
    let next = Arc::new(AtomicUsize::new(0));
    let body = body(load.chunks, load.gap_ms);
    let started = Instant::now();
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let workers: Vec<_> = (0..load.concurrency)
        .map(|_| {
            let (client, urls, body, next) =
                (client.clone(), urls.to_vec(), body.clone(), next.clone());
            let run_id = run_id.clone();
            tokio::spawn(async move {
                let mut timings = Vec::new();
                let mut errors = 0;
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= load.requests {
                        break;
                    }
                    let key = load.keyed.then(|| format!("bench-{run_id}-{n}"));
                    let url = &urls[n % urls.len()];
                    match one(&client, url, body.clone(), key, load.bearer).await {
                        Some(timing) => timings.push(timing),
                        None => errors += 1,
                    }
                }
                (timings, errors)
            })
        })
        .collect();
    let mut sample = Sample::default();
    for worker in workers {
        let (timings, errors) = worker.await.unwrap_or_default();
        sample.errors += errors;
        for (ttft, total) in timings {
            sample.ttft.push(ttft);
            sample.total.push(total);
        }
    }
    sample.elapsed = started.elapsed();
    sample.ttft.sort_by(f64::total_cmp);
    sample.total.sort_by(f64::total_cmp);
    sample
}

/// One request: `(ttft, total)` in ms, or `None` on any failure.
async fn one(
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
    key: Option<String>,
    bearer: Option<&str>,
) -> Option<(f64, f64)> {
    let sent = Instant::now();
    let mut request = post_json(client, url, body);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    let mut response = request.send().await.ok()?;
    if response.status() != 200 {
        return None;
    }
    let mut first = None;
    let mut tail: Vec<u8> = Vec::with_capacity(64);
    while let Some(bytes) = response.chunk().await.ok()? {
        if bytes.is_empty() {
            continue;
        }
        first.get_or_insert_with(|| sent.elapsed());
        tail.extend_from_slice(&bytes);
        if tail.len() > 32 {
            tail.drain(..tail.len() - 32);
        }
    }
    let total = sent.elapsed();
    if !tail.ends_with(b"data: [DONE]\n\n") {
        return None;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Some((ms(first?), ms(total)))
}

/// Streams held open by [`open_streams`]; dropping this lets them all go.
pub struct Held {
    /// Streams whose first chunk arrived.
    pub open: usize,
    /// Streams that failed to open.
    pub failed: usize,
    release: watch::Sender<bool>,
}

impl Held {
    /// Closes every held stream.
    pub fn release(self) {
        let _ = self.release.send(true);
    }
}

/// Opens `count` slow streams (at most 256 connecting at once), waits until each
/// has delivered its first chunk or failed, and leaves them open.
pub async fn open_streams(url: &str, count: usize, gap_ms: u64, within: Duration) -> Held {
    let client = client();
    let body = body(2, gap_ms);
    let connecting = Arc::new(Semaphore::new(256));
    let (open, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (release, released) = watch::channel(false);
    for _ in 0..count {
        let (client, url, body) = (client.clone(), url.to_owned(), body.clone());
        let (connecting, open, failed) = (connecting.clone(), open.clone(), failed.clone());
        let mut released = released.clone();
        tokio::spawn(async move {
            let permit = connecting.acquire_owned().await;
            let sent = post_json(&client, &url, body).send().await;
            let mut response = match sent {
                Ok(response) if response.status() == 200 => response,
                _ => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            match response.chunk().await {
                Ok(Some(_)) => {
                    open.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            drop(permit);
            let _ = released.wait_for(|go| *go).await;
            drop(response);
        });
    }
    let until = Instant::now() + within;
    while open.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < count
        && Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Held {
        open: open.load(Ordering::Relaxed),
        failed: count - open.load(Ordering::Relaxed),
        release,
    }
}
