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
use crate::load::{self, Load, quantile};
use crate::procs;

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

/// What the cache benchmark measured.
pub struct Cache {
    relay_per_s: f64,
    hits: usize,
    hits_per_s: f64,
    hit_ms: [f64; 2],
    errors: usize,
    kept: usize,
    /// RSS (MiB) of a fresh ladle on an empty state file, and of one on a file of
    /// `kept` answers after reading each once.
    rss: (f64, f64),
}

/// Runs it against the fast mock at `mock`.
pub async fn run(mock: SocketAddr, scale: f64) -> Result<Cache, String> {
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

    let relay = Load {
        concurrency: 50,
        requests,
        chunks: 1,
        gap_ms: 0,
        keyed: false,
        bearer: None,
    };
    let chat = format!("http://{}/v1/chat/completions", ladle.addr);
    load::run(
        &client,
        std::slice::from_ref(&chat),
        Load {
            requests: 1_000,
            ..relay
        },
    )
    .await;
    let relay_per_s = load::run(&client, std::slice::from_ref(&chat), relay)
        .await
        .rps();

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
    concurrently(50, 0..1_000, &hit).await;
    let started = Instant::now();
    let (mut times, errors) = concurrently(50, 0..requests, &hit).await;
    let hits_per_s = times.len() as f64 / started.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);

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
        relay_per_s,
        hits: requests,
        hits_per_s,
        hit_ms: [quantile(&times, 0.5), quantile(&times, 0.99)],
        errors,
        kept,
        rss,
    })
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
        let _ = writeln!(
            out,
            "At c=50, ladle with {} worker thread(s): its TTFT-only relay {:.0} req/s; the same \
             kept answer (3.2 KB of text) asked {} times: {:.0} hits/s (**{:.2}×** the \
             relay), p50 {:.3} ms, p99 **{:.3} ms**, {} errors. With {} answers kept \
             (each its own miss, by another ladle), a fresh ladle on that file that \
             has read every one of them once: RSS {:.1} MiB, against {:.1} MiB for a \
             fresh ladle on an empty file: **{:+.1} MiB**.",
            crate::env_or("LADLE_BENCH_WORKERS", 1u32),
            self.relay_per_s,
            self.hits,
            self.hits_per_s,
            self.hits_per_s / self.relay_per_s,
            self.hit_ms[0],
            self.hit_ms[1],
            self.errors,
            self.kept,
            self.rss.1,
            self.rss.0,
            self.rss.1 - self.rss.0
        );
        out
    }
}
