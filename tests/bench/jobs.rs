//! The jobs benchmark (issue 20): durable submits per second at c=50 into a real
//! SQLite file (and into a real `redis-server`), what the queued jobs cost in RSS,
//! and a job's end-to-end time (submit, run against the fast mock, a `wait_ms`
//! read that answers when it is done) against the same synchronous request.
//!
//! Submits go to a ladle whose upstream accepts connections and never answers,
//! with one job run at a time: every job but the first stays queued, so the
//! submits measure the store and the memory figure is the queue's.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::load::{self, quantile};
use crate::procs::{self, Proc};

/// A prompt the fast mock's `tok tok …` answers satisfy.
const BENCH_PROMPT: &str = r#"description = "benchmark"
output = "text"

[variables.q]
required = true

[messages]
user = "{{ q }}"
"#;

/// What one store measured under the submit load.
struct Submits {
    store: &'static str,
    submits: usize,
    per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: usize,
    idle_mib: f64,
    queued_mib: f64,
}

/// The job's end-to-end time against the synchronous request, in ms.
struct EndToEnd {
    requests: usize,
    sync: [f64; 2],
    job: [f64; 2],
    errors: usize,
}

/// What the jobs benchmark measured.
pub struct Jobs {
    submits: Vec<Submits>,
    waiting: Option<crate::waiting::Waiting>,
    end_to_end: EndToEnd,
}

/// Runs the jobs benchmark: the fast mock is at `mock`; `redis` is the URL of a
/// running `redis-server` for the Redis row, if any.
pub async fn run(mock: SocketAddr, scale: f64, redis: Option<&str>) -> Result<Jobs, String> {
    let prompts = procs::scratch_dir("jobs-prompts")?;
    std::fs::write(prompts.join("bench.toml"), BENCH_PROMPT).map_err(|e| e.to_string())?;
    let prompts_dir = prompts.display().to_string();
    let silent = silent_upstream().await?;
    let count = ((10_000.0 * scale) as usize).max(500);

    let state = procs::scratch_dir("jobs-state")?;
    let db = state.join("state.db").display().to_string();
    let mut stores = vec![("SQLite file", ("LADLE_STATE_DB", db))];
    if let Some(url) = redis {
        stores.push(("Redis", ("LADLE_REDIS_URL", url.to_owned())));
    }
    let mut submits = Vec::new();
    let mut waiting = None;
    for (store, setting) in stores {
        let env = [
            setting,
            ("LADLE_PROMPTS_DIR", prompts_dir.clone()),
            ("LADLE_JOB_CONCURRENCY", "1".into()),
            ("LADLE_JOB_MAX_QUEUED", "10000000".into()),
        ];
        let ladle = procs::start_ladle(silent, &env)?;
        submits.push(submit_load(&ladle, store, count).await);
        if waiting.is_none() {
            waiting = Some(crate::waiting::long_polls(&ladle, 2_000).await?);
        }
    }

    let env = [
        ("LADLE_PROMPTS_DIR", prompts_dir),
        ("LADLE_STATE_DB", state.join("e2e.db").display().to_string()),
    ];
    let ladle = procs::start_ladle(mock, &env)?;
    let end_to_end = end_to_end(&ladle, ((300.0 * scale) as usize).max(50)).await;
    Ok(Jobs {
        submits,
        waiting,
        end_to_end,
    })
}

/// An upstream that takes every connection and never answers.
async fn silent_upstream() -> Result<SocketAddr, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    Ok(addr)
}

/// The request body of job `n`.
pub fn body(n: usize) -> String {
    format!(r#"{{"q": "第{n}道菜"}}"#)
}

/// `count` submits at c=50 (after a warm-up of 200): their rate and latency, and
/// the RSS before and after.
async fn submit_load(ladle: &Proc, store: &'static str, count: usize) -> Submits {
    let client = load::client();
    let url = format!("http://{}/v1/tasks/bench?async=true", ladle.addr);
    let submit = move |n: usize| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let sent = load::post_json(&client, &url, body(n)).send().await;
            matches!(sent, Ok(r) if r.status() == 202)
        }
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = ladle.rss_kib();
    concurrently(50, 0..200, &submit).await;
    let started = Instant::now();
    let (mut times, errors) = concurrently(50, 200..200 + count, &submit).await;
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let queued = ladle.rss_kib();
    times.sort_by(f64::total_cmp);
    Submits {
        store,
        submits: count,
        per_s: times.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: quantile(&times, 0.5),
        p99_ms: quantile(&times, 0.99),
        errors,
        idle_mib: idle as f64 / 1024.0,
        queued_mib: queued as f64 / 1024.0,
    }
}

/// Runs `each` for every index at `concurrency`: the times (ms) of those that
/// succeeded, and how many failed.
pub async fn concurrently<F, Fut>(
    concurrency: usize,
    indexes: std::ops::Range<usize>,
    each: &F,
) -> (Vec<f64>, usize)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let next = Arc::new(AtomicUsize::new(indexes.start));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (next, each, end) = (next.clone(), each.clone(), indexes.end);
            tokio::spawn(async move {
                let (mut times, mut errors) = (Vec::new(), 0);
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= end {
                        break;
                    }
                    let sent = Instant::now();
                    if each(n).await {
                        times.push(sent.elapsed().as_secs_f64() * 1e3);
                    } else {
                        errors += 1;
                    }
                }
                (times, errors)
            })
        })
        .collect();
    let (mut times, mut errors) = (Vec::new(), 0);
    for worker in workers {
        let (more, failed) = worker.await.unwrap_or_default();
        times.extend(more);
        errors += failed;
    }
    (times, errors)
}

/// `requests` synchronous task requests and as many jobs (submit, then one
/// `wait_ms` read), one at a time, in alternating halves.
async fn end_to_end(ladle: &Proc, requests: usize) -> EndToEnd {
    let client = load::client();
    let task = format!("http://{}/v1/tasks/bench", ladle.addr);
    let jobs = format!("http://{}/v1/jobs", ladle.addr);
    let sync = {
        let (client, task) = (client.clone(), task.clone());
        move |n: usize| {
            let (client, task) = (client.clone(), task.clone());
            async move {
                let answer = load::post_json(&client, &task, body(n)).send().await;
                match answer {
                    Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
                    _ => false,
                }
            }
        }
    };
    let job = move |n: usize| {
        let (client, task, jobs) = (client.clone(), task.clone(), jobs.clone());
        async move {
            job_round_trip(&client, &task, &jobs, n)
                .await
                .unwrap_or(false)
        }
    };
    concurrently(1, 0..20, &sync).await;
    concurrently(1, 0..20, &job).await;
    let (mut sync_times, mut job_times, mut errors) = (Vec::new(), Vec::new(), 0);
    for half in 0..2 {
        let range = half * requests / 2..(half + 1) * requests / 2;
        let (times, failed) = concurrently(1, range.clone(), &sync).await;
        sync_times.extend(times);
        let (times, failed_jobs) = concurrently(1, range, &job).await;
        job_times.extend(times);
        errors += failed + failed_jobs;
    }
    sync_times.sort_by(f64::total_cmp);
    job_times.sort_by(f64::total_cmp);
    let p = |t: &[f64]| [quantile(t, 0.5), quantile(t, 0.99)];
    EndToEnd {
        requests,
        sync: p(&sync_times),
        job: p(&job_times),
        errors,
    }
}

/// Submits job `n`, then reads it with `wait_ms`: whether it succeeded.
async fn job_round_trip(
    client: &reqwest::Client,
    task: &str,
    jobs: &str,
    n: usize,
) -> Option<bool> {
    let submitted = load::post_json(client, format!("{task}?async=true"), body(n))
        .send()
        .await
        .ok()?;
    let job: serde_json::Value = submitted.json().await.ok()?;
    let id = job["id"].as_str()?;
    let read = client
        .get(format!("{jobs}/{id}?wait_ms=60000"))
        .send()
        .await
        .ok()?;
    let job: serde_json::Value = read.json().await.ok()?;
    Some(job["status"] == "succeeded")
}

impl Jobs {
    /// The figures as Markdown.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "## Jobs\n\nDurable submits at c=50 (each answered `202` only after its commit), \
             one run at a time against an upstream that never answers, so the rest stay \
             queued; RSS before the submits and after them:\n\n\
             | store | submits | submits/s | p50 ms | p99 ms | errors | RSS idle MiB | RSS queued MiB | per queued job |\n\
             |---|---|---|---|---|---|---|---|---|\n",
        );
        for s in &self.submits {
            let per_job_kib = (s.queued_mib - s.idle_mib) * 1024.0 / s.submits as f64;
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {:.3} | {:.3} | {} | {:.1} | {:.1} | {per_job_kib:.2} KiB |",
                s.store, s.submits, s.per_s, s.p50_ms, s.p99_ms, s.errors, s.idle_mib, s.queued_mib
            );
        }
        if let Some(waiting) = &self.waiting {
            out.push_str(&waiting.render());
        }
        let e = &self.end_to_end;
        let _ = write!(
            out,
            "\nEnd to end at c=1, {} of each against the fast mock (SQLite file): \
             a synchronous `POST /v1/tasks/bench` p50 {:.3} ms, p99 {:.3} ms; a job \
             (submit, then `GET …?wait_ms=60000`) p50 {:.3} ms, p99 {:.3} ms: \
             **{:+.3} ms** at p50; {} errors.\n",
            e.requests,
            e.sync[0],
            e.sync[1],
            e.job[0],
            e.job[1],
            e.job[0] - e.sync[0],
            e.errors
        );
        out
    }
}
