//! The job event streams benchmark (issue 33): a 20-chunk job read live through
//! its event stream against the same synchronous task stream (CPU per stream and
//! time to the first `delta`, in the same run); 1,000 readers of one job (memory
//! per idle reader, CPU per delivered event); the time from a cursor to the first
//! byte of a resumed stream, without and with Redis; and the memory of 10,000
//! finished jobs' kept events.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::load::{self, quantile};
use crate::procs::{self, Proc};

/// A task whose upstream body asks the fast mock for `n_chunks` chunks `gap_ms`
/// apart (the mock reads both from the body).
fn prompt(chunks: u32, gap_ms: u64) -> String {
    format!(
        r#"description = "benchmark"
output = "text"

[params]
n_chunks = {chunks}
gap_ms = {gap_ms}

[messages]
user = "bench"
"#
    )
}

/// What the streams benchmark measured.
pub struct Streams {
    /// Per answer length (20 and 200 chunks), (sync, job): CPU ms per stream,
    /// time to first delta p50 and p99 (ms).
    live: [[[f64; 3]; 2]; 2],
    streams: usize,
    readers: usize,
    idle_kib_per_reader: f64,
    cpu_us_per_event: f64,
    delivered: u64,
    /// Resume to first byte, p50 and p99 ms: (memory, Redis).
    resume: [[f64; 2]; 2],
    finished_jobs: usize,
    rss_before_mib: f64,
    rss_after_mib: f64,
}

/// Runs every part against the fast mock at `mock`.
pub async fn run(mock: SocketAddr, scale: f64, ticks: u64) -> Result<Streams, String> {
    let prompts = procs::scratch_dir("streams-prompts")?;
    for (name, chunks, gap) in [
        ("fast", 20, 1),
        ("recipe", 200, 1),
        ("slow", 200, 20),
        ("long", 300, 0),
    ] {
        std::fs::write(prompts.join(format!("{name}.toml")), prompt(chunks, gap))
            .map_err(|e| e.to_string())?;
    }
    let dir = prompts.display().to_string();
    let env = |extra: &[(&'static str, String)]| {
        let mut all = vec![
            ("LADLE_PROMPTS_DIR", dir.clone()),
            ("LADLE_JOB_CONCURRENCY", "64".to_owned()),
            ("LADLE_JOB_MAX_QUEUED", "1000000".to_owned()),
        ];
        all.extend_from_slice(extra);
        all
    };
    let client = crate::load::client();
    let streams = ((200.0 * scale) as usize).max(40);
    let ladle = procs::start_ladle(mock, &env(&[]))?;
    let live = [
        live_against_sync(&client, &ladle, "fast", streams, ticks).await?,
        live_against_sync(&client, &ladle, "recipe", streams / 2, ticks).await?,
    ];
    let readers = ((1_000.0 * scale) as usize).max(100);
    let (idle_kib_per_reader, cpu_us_per_event, delivered) =
        many_readers(&ladle, readers, ticks).await?;
    let memory = resume_latency(&client, &ladle, ((1_000.0 * scale) as usize).max(200)).await?;
    drop(ladle);
    let redis = crate::fleet::start_redis()?;
    let url = format!("redis://{}", redis.addr);
    let fleet = procs::start_ladle(mock, &env(&[("LADLE_REDIS_URL", url)]))?;
    let with_redis = resume_latency(&client, &fleet, ((1_000.0 * scale) as usize).max(200)).await?;
    drop(fleet);
    drop(redis);
    let ladle = procs::start_ladle(mock, &env(&[]))?;
    let finished_jobs = ((10_000.0 * scale) as usize).max(1_000);
    let rss_before_mib = ladle.rss_kib() as f64 / 1024.0;
    finish_jobs(&client, &ladle, finished_jobs).await?;
    let rss_after_mib = ladle.rss_kib() as f64 / 1024.0;
    Ok(Streams {
        live,
        streams,
        readers,
        idle_kib_per_reader,
        cpu_us_per_event,
        delivered,
        resume: [memory, with_redis],
        finished_jobs,
        rss_before_mib,
        rss_after_mib,
    })
}

/// A POST of task `task` asking for events; `job`: as a job's stream.
fn task_request(
    client: &reqwest::Client,
    base: &str,
    task: &str,
    job: bool,
) -> reqwest::RequestBuilder {
    let query = if job { "?async=true" } else { "" };
    client
        .post(format!("{base}/v1/tasks/{task}{query}"))
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body("{}")
}

/// Reads an event stream to its end: when its first `delta` came, and whether
/// it ended well (a `result`).
async fn read_events(response: reqwest::Response, started: Instant) -> (Option<Duration>, bool) {
    let mut body = response.bytes_stream();
    let (mut first, mut text) = (None, String::new());
    while let Some(Ok(bytes)) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&bytes));
        if first.is_none() && text.contains("event: delta") {
            first = Some(started.elapsed());
        }
    }
    (first, text.contains("event: result"))
}

/// Sequential streams of `task`, alternating a synchronous task stream and a
/// job's stream: CPU per stream and time to the first delta.
async fn live_against_sync(
    client: &reqwest::Client,
    ladle: &Proc,
    task: &str,
    count: usize,
    ticks: u64,
) -> Result<[[f64; 3]; 2], String> {
    let base = format!("http://{}", ladle.addr);
    let mut firsts: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut cpu = [0u64; 2];
    for n in 0..count * 2 {
        let job = n % 2 == 1;
        let before = ladle.cpu_ns(ticks);
        let started = Instant::now();
        let response = task_request(client, &base, task, job)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let (first, ended) = read_events(response, started).await;
        if !ended {
            return Err("a benchmark stream did not end with its result".into());
        }
        // The job's run ends a moment after its stream: let it settle.
        if job {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cpu[usize::from(job)] += ladle.cpu_ns(ticks) - before;
        firsts[usize::from(job)].push(first.unwrap_or_default().as_secs_f64() * 1e3);
    }
    let figures = |i: usize| {
        let mut sorted = firsts[i].clone();
        sorted.sort_by(f64::total_cmp);
        [
            cpu[i] as f64 / 1e6 / count as f64,
            quantile(&sorted, 0.5),
            quantile(&sorted, 0.99),
        ]
    };
    Ok([figures(0), figures(1)])
}

/// `readers` readers of one job: RSS per reader while they wait idle (the job
/// is queued behind a silent one), then CPU per event delivered while the job
/// streams 200 chunks to all of them.
async fn many_readers(ladle: &Proc, readers: usize, ticks: u64) -> Result<(f64, f64, u64), String> {
    let base = format!("http://{}", ladle.addr);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| e.to_string())?;
    let id = submit(&client, &base, "slow").await?;
    // Wait until its run has begun writing, so each reader starts live.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_before = ladle.rss_kib();
    let cpu_before = ladle.cpu_ns(ticks);
    let mut tasks = Vec::new();
    for _ in 0..readers {
        let (client, url) = (client.clone(), format!("{base}/v1/jobs/{id}/events"));
        tasks.push(tokio::spawn(async move {
            let response = client
                .get(url)
                .header("last-event-id", "1.40")
                .send()
                .await
                .ok()?;
            let mut body = response.bytes_stream();
            let mut events = 0u64;
            while let Some(Ok(bytes)) = body.next().await {
                events += bytes
                    .windows(4)
                    .filter(|w| w == b"\nid:" || w == b"id: ")
                    .count() as u64;
            }
            Some(events)
        }));
    }
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let rss_open = ladle.rss_kib();
    let mut delivered = 0;
    for task in tasks {
        delivered += task.await.ok().flatten().unwrap_or(0);
    }
    let cpu = ladle.cpu_ns(ticks) - cpu_before;
    let per_reader = rss_open.saturating_sub(rss_before) as f64 / readers as f64;
    Ok((
        per_reader,
        cpu as f64 / 1e3 / delivered.max(1) as f64,
        delivered,
    ))
}

/// A finished job of 300 events, then `count` resumes from its middle: the time
/// from the request to the first byte of the body, p50 and p99 in ms.
async fn resume_latency(
    client: &reqwest::Client,
    ladle: &Proc,
    count: usize,
) -> Result<[f64; 2], String> {
    let base = format!("http://{}", ladle.addr);
    let response = task_request(client, &base, "long", true)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .ok_or("no Location")?
        .to_owned();
    let (_, ended) = read_events(response, Instant::now()).await;
    if !ended {
        return Err("the long job did not end".into());
    }
    let mut times = Vec::new();
    for _ in 0..count {
        let started = Instant::now();
        let response = client
            .get(format!("{base}{location}/events"))
            .header("last-event-id", "1.150")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let mut body = response.bytes_stream();
        let _ = body.next().await;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        drop(body);
    }
    times.sort_by(f64::total_cmp);
    Ok([quantile(&times, 0.5), quantile(&times, 0.99)])
}

/// The JSON answer of `request`.
async fn json_of(request: reqwest::RequestBuilder) -> Result<serde_json::Value, String> {
    let response = request.send().await.map_err(|e| e.to_string())?;
    response.json().await.map_err(|e| e.to_string())
}

/// Submits a job of `task`: its id.
async fn submit(client: &reqwest::Client, base: &str, task: &str) -> Result<String, String> {
    let job = json_of(load::post_json(
        client,
        format!("{base}/v1/tasks/{task}?async=true"),
        "{}",
    ))
    .await?;
    Ok(job["id"].as_str().ok_or("no job id")?.to_owned())
}

/// `count` fast jobs submitted and waited for.
async fn finish_jobs(client: &reqwest::Client, ladle: &Proc, count: usize) -> Result<(), String> {
    let base = format!("http://{}", ladle.addr);
    let mut ids = Vec::new();
    for _ in 0..count {
        ids.push(submit(client, &base, "fast").await?);
    }
    for id in ids {
        let job = json_of(client.get(format!("{base}/v1/jobs/{id}?wait_ms=60000"))).await?;
        if job["status"] != "succeeded" {
            return Err(format!("a job ended {}", job["status"]));
        }
    }
    Ok(())
}

impl Streams {
    /// The section of the report.
    pub fn render(&self) -> String {
        let mut out = String::from("### Job event streams\n\n");
        let _ = writeln!(
            out,
            "| streams, one at a time | CPU ms/stream | first delta p50 ms | p99 ms |\n|---|---|---|---|"
        );
        for (live, (chunks, count)) in self
            .live
            .iter()
            .zip([(20, self.streams), (200, self.streams / 2)])
        {
            let [sync, job] = live;
            let _ = writeln!(
                out,
                "| {count} synchronous task streams of {chunks} chunks | {:.3} | {:.3} | {:.3} |",
                sync[0], sync[1], sync[2]
            );
            let _ = writeln!(
                out,
                "| {count} jobs of {chunks} chunks read live (the submit's stream) | {:.3} ({:.2}×) | {:.3} ({:.2}×) | {:.3} ({:.2}×) |",
                job[0],
                job[0] / sync[0],
                job[1],
                job[1] / sync[1],
                job[2],
                job[2] / sync[2]
            );
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "* {} readers of one job: {:.1} KiB of RSS per idle reader; {} events delivered, {:.2} µs of CPU per delivered event.",
            self.readers, self.idle_kib_per_reader, self.delivered, self.cpu_us_per_event
        );
        let [memory, redis] = self.resume;
        let _ = writeln!(
            out,
            "* Resume (a cursor in the middle of a finished job's 300 events) to the first byte: p50 {:.2} ms, p99 {:.2} ms in memory; p50 {:.2} ms, p99 {:.2} ms with Redis.",
            memory[0], memory[1], redis[0], redis[1]
        );
        let _ = writeln!(
            out,
            "* {} finished jobs' events kept (LADLE_STREAM_MAX_BYTES at its default, 64 MiB): RSS {:.1} MiB before, {:.1} MiB after.",
            self.finished_jobs, self.rss_before_mib, self.rss_after_mib
        );
        out
    }
}
