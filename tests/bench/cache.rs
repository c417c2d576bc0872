//! The answer cache's benchmark (issue 21): at c=50, kept answers served per
//! second against ladle's own TTFT-only relay rate in the same run, and a hit's
//! latency; then the RSS that 10,000 kept recipe-sized answers cost.
//!
//! The cached task is a text task whose params ask the fast mock for 800 chunks
//! (3.2 KB of text, about a recipe's size); its answers live in a SQLite state
//! file, as they do by default.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::jobs::concurrently;
use crate::load::{self, quantile};
use crate::{lean, procfs, procs};

/// How a relayed chat stream ends.
const DONE: &[u8] = b"data: [DONE]\n\n";

/// A text task whose answers are kept a day, each about a recipe's size.
const CACHED_PROMPT: &str = r#"description = "benchmark, kept"
output = "text"

[params]
n_chunks = 800
gap_ms = 0

[cache]
ttl_ms = 86400000

[variables.q]
required = true

[messages]
user = "{{ q }}"
"#;

/// One load at c=50, as measured.
struct Figures {
    per_s: f64,
    /// p50 and p99, in ms.
    ms: [f64; 2],
    /// CPU per answer, in µs: ladle's, and the load generator's.
    ladle_us: f64,
    client_us: f64,
}

/// What the cache benchmark measured.
pub struct Cache {
    requests: usize,
    relay: Figures,
    /// The same kept answer asked again and again, with the lean client.
    hits: Figures,
    /// The same, asked with reqwest (on one thread as well).
    reqwest_hits: Figures,
    /// `GET /healthz`, which does nothing: the machine's own floor in this run.
    health: Figures,
    errors: usize,
    kept: usize,
    /// RSS (MiB) of a fresh ladle on an empty state file, and of one on a file of
    /// `kept` answers after reading each once.
    rss: (f64, f64),
}

/// Runs it against the fast mock at `mock`, its load from one thread: ladle's one
/// worker and the load generator then have a core each. (With the generator on
/// two threads as well, three busy threads share two cores, and a hit's tail is
/// the time ladle's thread waits for a core.) The relay, the hits and `/healthz`
/// are measured with the lean client (`lean`), the hits once more with reqwest.
pub fn run(mock: SocketAddr, scale: f64) -> Result<Cache, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(measure(mock, scale))
}

async fn measure(mock: SocketAddr, scale: f64) -> Result<Cache, String> {
    let prompts = procs::scratch_dir("cache-prompts")?;
    std::fs::write(prompts.join("kept.toml"), CACHED_PROMPT).map_err(|e| e.to_string())?;
    let state = procs::scratch_dir("cache-state")?;
    let env = [
        ("LADLE_PROMPTS_DIR", prompts.display().to_string()),
        (
            "LADLE_STATE_DB",
            state.join("state.db").display().to_string(),
        ),
    ];
    let ladle = procs::start_ladle(mock, &env)?;
    let client = load::client();
    let requests = ((20_000.0 * scale) as usize).max(1_000);

    let addr = ladle.addr;
    let ticks = procs::clock_ticks();
    let chat = lean::post("/v1/chat/completions", &load::body(1, 0));
    lean::run(addr, chat.clone(), DONE, 50, 1_000).await;
    let (relay, relay_errors) =
        figures(&ladle, ticks, lean::run(addr, chat, DONE, 50, requests)).await;

    let task = format!("http://{}/v1/tasks/kept", ladle.addr);
    let ask = {
        let (client, task) = (client.clone(), task.clone());
        move |n: usize| {
            let (client, task) = (client.clone(), task.clone());
            async move { cached(&client, &task, n).await }
        }
    };
    // One answer kept, then asked for again and again.
    let hit = {
        let ask = ask.clone();
        move |_: usize| ask(0)
    };
    concurrently(1, 0..1, &ask).await;
    let kept = lean::post("/v1/tasks/kept", r#"{"q": "第0问"}"#.as_bytes());
    lean::run(addr, kept.clone(), b"}", 50, 1_000).await;
    let (hits, hit_errors) =
        figures(&ladle, ticks, lean::run(addr, kept, b"}", 50, requests)).await;
    concurrently(50, 0..1_000, &hit).await;
    let with_reqwest = async {
        let started = Instant::now();
        let (mut times, errors) = concurrently(50, 0..requests, &hit).await;
        times.sort_by(f64::total_cmp);
        lean::Run {
            times,
            errors,
            elapsed: started.elapsed(),
        }
    };
    let (reqwest_hits, reqwest_errors) = figures(&ladle, ticks, with_reqwest).await;
    let health = lean::get("/healthz");
    let (health, health_errors) =
        figures(&ladle, ticks, lean::run(addr, health, b"ok", 50, requests)).await;

    drop(ladle);

    // 10,000 answers kept by one ladle; then a fresh ladle on that file reads
    // every one of them once (its decoded answers in memory fill up to their
    // bound), against a fresh ladle on an empty file, idle: what the answers
    // cost once the load that made them is gone.
    let kept = ((10_000.0 * scale) as usize).max(1_000);
    let filled = procs::scratch_dir("cache-filled")?;
    let empty = procs::scratch_dir("cache-empty")?;
    let on = |dir: &std::path::Path| {
        [
            ("LADLE_PROMPTS_DIR", prompts.display().to_string()),
            ("LADLE_STATE_DB", dir.join("state.db").display().to_string()),
        ]
    };
    let asking = |ladle: &procs::Proc| {
        let (task, client) = (
            format!("http://{}/v1/tasks/kept", ladle.addr),
            client.clone(),
        );
        move |n: usize| {
            let (client, task) = (client.clone(), task.clone());
            async move { cached(&client, &task, n).await }
        }
    };
    {
        let filler = procs::start_ladle(mock, &on(&filled))?;
        concurrently(50, 1..kept + 1, &asking(&filler)).await;
    }
    let reader = procs::start_ladle(mock, &on(&filled))?;
    concurrently(50, 1..kept + 1, &asking(&reader)).await;
    let none = procs::start_ladle(mock, &on(&empty))?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss = (
        none.rss_kib() as f64 / 1024.0,
        reader.rss_kib() as f64 / 1024.0,
    );
    Ok(Cache {
        requests,
        relay,
        hits,
        reqwest_hits,
        health,
        errors: relay_errors + hit_errors + reqwest_errors + health_errors,
        kept,
        rss,
    })
}

/// Runs `load` against `ladle`, timing it and the CPU both sides spend on it
/// (this process is the load generator): its figures and errors.
async fn figures(
    ladle: &procs::Proc,
    ticks: u64,
    load: impl Future<Output = lean::Run>,
) -> (Figures, usize) {
    let cpu = || {
        let client = procfs::schedstat_ns(std::process::id()).unwrap_or_default();
        (ladle.cpu_ns(ticks), client)
    };
    let before = cpu();
    let run = load.await;
    let after = cpu();
    let answers = run.times.len().max(1) as f64;
    let us = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1e3 / answers;
    let figures = Figures {
        per_s: run.per_s(),
        ms: [quantile(&run.times, 0.5), quantile(&run.times, 0.99)],
        ladle_us: us(before.0, after.0),
        client_us: us(before.1, after.1),
    };
    (figures, run.errors)
}

/// Asks the cached task with `q` = `n`: whether it answered `200`.
async fn cached(client: &reqwest::Client, task: &str, n: usize) -> bool {
    let answer = client
        .post(task)
        .header("content-type", "application/json")
        .body(format!(r#"{{"q": "第{n}问"}}"#))
        .send()
        .await;
    match answer {
        Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
        _ => false,
    }
}

impl Cache {
    /// The figures as Markdown.
    pub fn render(&self) -> String {
        let mut out = String::from("## The answer cache\n\n");
        let line = |what: &str, f: &Figures| {
            format!(
                "| {what} | {:.0} | {:.3} / **{:.3}** | {:.1} | {:.1} |\n",
                f.per_s, f.ms[0], f.ms[1], f.ladle_us, f.client_us
            )
        };
        let _ = writeln!(
            out,
            "At c=50 from a load generator on one thread, {} requests each, ladle with {} \
             worker thread(s). Hits: **{:.2}×** the relay's rate; {} errors.\n",
            self.requests,
            crate::env_or("LADLE_BENCH_WORKERS", 1u32),
            self.hits.per_s / self.relay.per_s,
            self.errors,
        );
        out.push_str(
            "| load | per s | p50 / p99 ms | ladle µs CPU each | client µs CPU each |\n\
             |---|---|---|---|---|\n",
        );
        out.push_str(&line("TTFT-only chat relay (lean client)", &self.relay));
        out.push_str(&line("a kept answer, 3.2 KB (lean client)", &self.hits));
        out.push_str(&line("the same with reqwest", &self.reqwest_hits));
        out.push_str(&line("`GET /healthz` (lean client)", &self.health));
        let _ = writeln!(
            out,
            "\nWith {} answers kept (each its own miss, by another ladle), a fresh ladle on \
             that file that has read every one of them once: RSS {:.1} MiB, against {:.1} MiB \
             for a fresh ladle on an empty file: **{:+.1} MiB**.",
            self.kept,
            self.rss.1,
            self.rss.0,
            self.rss.1 - self.rss.0
        );
        out
    }
}
