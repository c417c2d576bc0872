//! The answer cache's benchmark (issue 21): at c=50, kept answers served per
//! second against ladle's own TTFT-only relay rate in the same run, a hit's
//! latency beside `GET /healthz`'s (what any answer costs here in that run), and
//! the CPU both sides spend per answer; then the RSS that 10,000 kept
//! recipe-sized answers cost.
//!
//! The cached task is a text task whose params ask the fast mock for 800 chunks
//! (3.2 KB of text, about a recipe's size); its answers live in a SQLite state
//! file, as they do by default.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::jobs::concurrently;
use crate::load::{self, Load, quantile};
use crate::{procfs, procs};

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
#[derive(Default)]
struct Figures {
    per_s: f64,
    /// p50 and p99, in ms.
    ms: [f64; 2],
    /// CPU per answer, in µs: ladle's, and the load generator's.
    ladle_us: f64,
    client_us: f64,
}

impl Figures {
    /// Each figure's median over `rounds`.
    fn median(rounds: &[Figures]) -> Figures {
        let of = |figure: fn(&Figures) -> f64| {
            let mut all: Vec<f64> = rounds.iter().map(figure).collect();
            all.sort_by(f64::total_cmp);
            quantile(&all, 0.5)
        };
        Figures {
            per_s: of(|f| f.per_s),
            ms: [of(|f| f.ms[0]), of(|f| f.ms[1])],
            ladle_us: of(|f| f.ladle_us),
            client_us: of(|f| f.client_us),
        }
    }
}

/// What the cache benchmark measured.
pub struct Cache {
    requests: usize,
    rounds: usize,
    /// The TTFT-only chat relay.
    relay: Figures,
    /// The same kept answer asked again and again.
    hits: Figures,
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
/// the time ladle's thread waits for a core.) `GET /healthz`, measured the same
/// way, is what any answer costs on this machine in this run.
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
    let rounds = crate::env_or("LADLE_BENCH_CACHE_ROUNDS", 5usize).max(1);

    let ticks = procs::clock_ticks();
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
    let health = {
        let (client, url) = (client.clone(), format!("http://{}/healthz", ladle.addr));
        move |_: usize| {
            let (client, url) = (client.clone(), url.clone());
            async move { matches!(client.get(&url).send().await, Ok(r) if r.status() == 200) }
        }
    };
    let chat = [format!("http://{}/v1/chat/completions", ladle.addr)];
    let relay = |requests| {
        let shape = Load {
            concurrency: 50,
            requests,
            chunks: 1,
            gap_ms: 0,
            keyed: false,
            bearer: None,
        };
        let (client, chat) = (client.clone(), chat.clone());
        async move {
            let sample = load::run(&client, &chat, shape).await;
            Run {
                times: sample.total,
                errors: sample.errors,
                elapsed: sample.elapsed,
            }
        }
    };
    // Warm-ups, then the rounds: the three loads in a rotating order, each
    // figure the median of its rounds.
    relay(1_000).await;
    timed(1_000, &hit).await;
    let mut measured: [Vec<Figures>; 3] = Default::default();
    let mut errors = 0;
    for round in 0..rounds {
        for turn in 0..3 {
            let load = (round + turn) % 3;
            let (figures, failed) = match load {
                0 => figures(&ladle, ticks, relay(requests)).await,
                1 => figures(&ladle, ticks, timed(requests, &hit)).await,
                _ => figures(&ladle, ticks, timed(requests, &health)).await,
            };
            measured[load].push(figures);
            errors += failed;
        }
    }
    let [relay, hits, health] = measured.map(|rounds| Figures::median(&rounds));

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
        health,
        rounds,
        errors,
        kept,
        rss,
    })
}

/// What one load's run measured.
struct Run {
    /// Each answered request's time (ms), sorted.
    times: Vec<f64>,
    errors: usize,
    elapsed: Duration,
}

/// Runs `each` for `count` requests at c=50, timed.
async fn timed<F, Fut>(count: usize, each: &F) -> Run
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let started = Instant::now();
    let (mut times, errors) = concurrently(50, 0..count, each).await;
    times.sort_by(f64::total_cmp);
    Run {
        times,
        errors,
        elapsed: started.elapsed(),
    }
}

/// Runs `load` against `ladle`, timing it and the CPU both sides spend on it
/// (this process is the load generator): its figures and errors.
async fn figures(
    ladle: &procs::Proc,
    ticks: u64,
    load: impl Future<Output = Run>,
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
        per_s: run.times.len() as f64 / run.elapsed.as_secs_f64(),
        ms: [quantile(&run.times, 0.5), quantile(&run.times, 0.99)],
        ladle_us: us(before.0, after.0),
        client_us: us(before.1, after.1),
    };
    (figures, run.errors)
}

/// Asks the cached task with `q` = `n`: whether it answered `200`.
async fn cached(client: &reqwest::Client, task: &str, n: usize) -> bool {
    let answer = load::post_json(client, task, format!(r#"{{"q": "第{n}问"}}"#))
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
            "At c=50 from a load generator on one thread, ladle with {} worker thread(s); \
             {} requests a load in each of {} rounds, medians. Hits: **{:.2}×** the relay's \
             rate; {} errors.\n",
            crate::env_or("LADLE_BENCH_WORKERS", 1u32),
            self.requests,
            self.rounds,
            self.hits.per_s / self.relay.per_s,
            self.errors,
        );
        out.push_str(
            "| load | per s | p50 / p99 ms | ladle µs CPU each | client µs CPU each |\n\
             |---|---|---|---|---|\n",
        );
        out.push_str(&line("TTFT-only chat relay", &self.relay));
        out.push_str(&line("a kept answer, 3.2 KB", &self.hits));
        out.push_str(&line("`GET /healthz`", &self.health));
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
