//! The relay benchmark of issue 6: the same load, in one run, straight to a fast
//! mock upstream, through nginx (`proxy_buffering off`, the reference relay) and
//! through ladle's release binary; then micro-benchmarks of the per-chunk path and
//! a memory check with thousands of slow streams open.
//!
//! Run it with `cargo bench --bench relay`. Knobs (environment):
//! - `LADLE_BENCH_QUICK=1`: one round, a tenth of the requests, 1,000 slow streams;
//! - `LADLE_BENCH_ROUNDS` (3, for the 20-chunk loads), `LADLE_BENCH_TTFT_ROUNDS`
//!   (7, for the TTFT-only loads, whose rounds take a second or two each:
//!   their added TTFT is a difference of two small times, so it needs more
//!   rounds for a steady median), `LADLE_BENCH_SCALE` (1.0, multiplies request
//!   counts), `LADLE_BENCH_STREAMS` (5000), `LADLE_BENCH_GAP_MS` (1, the gap
//!   between the chunks of a 20-chunk stream), `LADLE_BENCH_NGINX` (/usr/sbin/nginx),
//!   `LADLE_BENCH_WORKERS` (1: ladle's worker threads, as nginx runs one worker),
//!   `LADLE_BENCH_UPSTREAMS` (1; 3 = ladle with three upstreams, one of them down),
//!   `LADLE_BENCH_FLEET_ONLY=1` (only the two-replica run with and without Redis,
//!   which otherwise comes after the memory check; it needs `redis-server`),
//!   `LADLE_BENCH_JOBS_ONLY=1` (only the jobs: durable submits into SQLite and
//!   Redis, the queue's memory, a job's end-to-end time; they otherwise come after
//!   the fleet), `LADLE_BENCH_CACHE_ONLY=1` (only the answer cache: hits against the
//!   relay and `/healthz`, and the memory of 10,000 kept answers; otherwise after
//!   the jobs; `LADLE_BENCH_CACHE_ROUNDS`, 5, its rounds),
//!   `LADLE_BENCH_KEYS_ONLY=1` (only ladle without and with client keys, side by
//!   side; otherwise after the cache), `LADLE_BENCH_STREAMS_ONLY=1` (only the job
//!   event streams: a job read live against a task stream, many readers, resumes,
//!   kept events; otherwise last), `LADLE_BENCH_CUT_ONLY=1` (only a stream cut at
//!   chunk 10 of 20 and continued: cut to next delta, against the mock's own first
//!   chunk), `LADLE_BENCH_RESPONSES_ONLY=1` (only a streamed Responses create
//!   against the chat route: CPU per stream, first delta), `LADLE_BENCH_BEFORE=path` (only an earlier build's binary at `path`
//!   against this one, the same loads side by side).
//!
//! Everything listens on 127.0.0.1 only, and every run is bounded in requests.
//! The table goes to stdout and to `target/bench-report.md`.

mod cache;
mod cut;
mod fleet;
mod jobs;
mod keys;
mod load;
mod micro;
mod mock;
mod procfs;
mod procs;
mod report;
mod responses;
mod side;
mod streams;
mod waiting;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use load::{Load, Sample};
use procs::Proc;
use report::{Block, Memory, Row, Setup};

fn main() -> ExitCode {
    // `cargo bench` adds `--bench`; it means nothing here.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let result = if args.first().map(String::as_str) == Some("--mock-upstream") {
        mock::run(&args[1..])
    } else if args.first().map(String::as_str) == Some("--drive") {
        drive(&args[1..])
    } else {
        bench()
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench: {error}");
            ExitCode::FAILURE
        }
    }
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

fn bench() -> Result<(), String> {
    let quick = std::env::var("LADLE_BENCH_QUICK").is_ok_and(|v| v == "1");
    let rounds = env_or("LADLE_BENCH_ROUNDS", if quick { 1 } else { 3 }).max(1);
    let ttft_rounds = env_or("LADLE_BENCH_TTFT_ROUNDS", if quick { 1 } else { 7 }).max(1);
    let scale = env_or("LADLE_BENCH_SCALE", if quick { 0.1 } else { 1.0 });
    let streams = env_or("LADLE_BENCH_STREAMS", if quick { 1000 } else { 5000 });
    let gap_ms = env_or("LADLE_BENCH_GAP_MS", 1u64);
    let needed_fds = streams as u64 * 2 + 1024;
    if procs::open_files_limit() < needed_fds && std::env::var("LADLE_BENCH_FDS_RAISED").is_err() {
        return match procs::reexec_with_more_fds()? {
            true => Ok(()),
            false => Err("the benchmark failed (after raising the fd limit)".into()),
        };
    }

    // The runs that go alone, each against a mock of its own.
    let only =
        |name: &str| std::env::var(format!("LADLE_BENCH_{name}_ONLY")).is_ok_and(|v| v == "1");
    let alone = ["FLEET", "JOBS", "KEYS", "STREAMS", "CUT", "RESPONSES"]
        .into_iter()
        .find(|n| only(n));
    let before = std::env::var("LADLE_BENCH_BEFORE").ok();
    if alone.is_some() || before.is_some() {
        let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
        let mock = procs::start_mock()?;
        let ticks = procs::clock_ticks();
        let report = match (alone, before) {
            (Some("FLEET"), _) => runtime
                .block_on(fleet::run(mock.addr, scale, rounds, ticks))?
                .render(),
            (Some("JOBS"), _) => runtime.block_on(jobs_run(mock.addr, scale))?.render(),
            (Some("KEYS"), _) => runtime
                .block_on(keys::run(&mock, scale, rounds, ticks))?
                .render(),
            (_, Some(binary)) => {
                let binary = std::path::PathBuf::from(binary);
                let side = keys::before(&mock, &binary, scale, rounds, ticks);
                runtime.block_on(side)?.render()
            }
            (Some("STREAMS"), _) => runtime
                .block_on(streams::run(mock.addr, scale, ticks))?
                .render(),
            (Some("RESPONSES"), _) => runtime.block_on(responses::run(ticks))?.render(),
            _ => runtime.block_on(cut::run(mock.addr))?.render(),
        };
        say(&format!("\n{report}"));
        return Ok(());
    }
    if std::env::var("LADLE_BENCH_CACHE_ONLY").is_ok_and(|v| v == "1") {
        let mock = procs::start_mock()?;
        let cache = cache::run(mock.addr, scale)?;
        say(&format!("\n{}", cache.render()));
        return Ok(());
    }
    say("micro-benchmarks…");
    let micro = micro::run(if quick { 0.2 } else { 1.0 });
    let nginx_binary = procs::nginx_binary()?;
    let ticks = procs::clock_ticks();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;

    let mock = procs::start_mock()?;
    let loads = loads(scale, gap_ms);
    let blocks = {
        let nginx = procs::start_nginx(&nginx_binary, mock.addr)?;
        let ladle = procs::start_ladle(mock.addr, &[])?;
        let paths = [&mock, &nginx, &ladle];
        let client = load::client();
        let mut blocks = Vec::new();
        for (label, shape) in &loads {
            let rounds = if shape.chunks == 1 {
                ttft_rounds
            } else {
                rounds
            };
            say(&format!(
                "load: {label} ({} requests × {rounds} rounds)…",
                shape.requests
            ));
            let runs = runtime.block_on(measure(&client, &paths, *shape, rounds, ticks));
            blocks.push(aggregate(label, *shape, &runs));
        }
        blocks
    };

    say(&format!("memory check: {streams} slow streams per relay…"));
    let nginx_memory = {
        let nginx = procs::start_nginx(&nginx_binary, mock.addr)?;
        runtime.block_on(memory_check(&nginx, streams))
    };
    let ladle_memory = {
        let ladle = procs::start_ladle(mock.addr, &[])?;
        runtime.block_on(memory_check(&ladle, streams))
    };
    say("fleet: two replicas without and with Redis…");
    let fleet = runtime.block_on(fleet::run(mock.addr, scale, rounds, ticks))?;
    say("jobs: durable submits, the queue's memory, end to end…");
    let jobs = runtime.block_on(jobs_run(mock.addr, scale))?;
    say("cache: hits against the relay, the memory of kept answers…");
    let cache = cache::run(mock.addr, scale)?;
    say("keys: ladle without and with client keys…");
    let keys = runtime.block_on(keys::run(&mock, scale, rounds, ticks))?;
    say("streams: jobs read live, many readers, resumes, kept events…");
    let streams = runtime.block_on(streams::run(mock.addr, scale, ticks))?;
    drop(mock);

    let setup = Setup {
        rounds,
        ttft_rounds,
        gap_ms,
    };
    let table = report::render(&setup, &blocks, &micro, &[nginx_memory, ladle_memory])
        + "\n"
        + &fleet.render()
        + "\n"
        + &jobs.render()
        + "\n"
        + &cache.render()
        + "\n"
        + &keys.render()
        + "\n"
        + &streams.render();
    say(&format!("\n{table}"));
    let target_dir = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target").to_owned());
    let path = std::path::Path::new(&target_dir).join("bench-report.md");
    std::fs::write(&path, format!("# ladle relay benchmark\n\n{table}"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    say(&format!("written to {}", path.display()));
    Ok(())
}

/// The jobs benchmark, with a `redis-server` of its own for the Redis row.
async fn jobs_run(mock: std::net::SocketAddr, scale: f64) -> Result<jobs::Jobs, String> {
    let redis = fleet::start_redis()?;
    jobs::run(mock, scale, Some(&format!("redis://{}", redis.addr))).await
}

/// `--drive URL CONCURRENCY REQUESTS CHUNKS GAP_MS`: one load against one URL, for
/// profiling a relay by hand (`perf record -p PID` while this runs).
fn drive(args: &[String]) -> Result<(), String> {
    let [url, concurrency, requests, chunks, gap_ms] = args else {
        return Err("usage: --drive URL CONCURRENCY REQUESTS CHUNKS GAP_MS".into());
    };
    let number = |text: &str| {
        text.parse::<usize>()
            .map_err(|_| format!("`{text}` is not a number"))
    };
    let shape = Load {
        concurrency: number(concurrency)?,
        requests: number(requests)?,
        chunks: number(chunks)? as u32,
        gap_ms: number(gap_ms)? as u64,
        keyed: false,
        bearer: None,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let sample = runtime.block_on(load::run(&load::client(), std::slice::from_ref(url), shape));
    say(&format!(
        "{:.0} req/s, TTFT p50 {:.3} ms, p99 {:.3} ms, total p50 {:.3} ms, {} errors",
        sample.rps(),
        load::quantile(&sample.ttft, 0.5),
        load::quantile(&sample.ttft, 0.99),
        load::quantile(&sample.total, 0.5),
        sample.errors
    ));
    Ok(())
}

/// TTFT-only requests and 20-chunk streams at concurrency 1, 50 and 500.
fn loads(scale: f64, gap_ms: u64) -> Vec<(String, Load)> {
    let count = |n: f64| ((n * scale) as usize).max(20);
    let mut loads = Vec::new();
    for (concurrency, requests) in [(1, 5000.0), (50, 10000.0), (500, 20000.0)] {
        let shape = Load {
            concurrency,
            requests: count(requests).max(concurrency * 2),
            chunks: 1,
            gap_ms: 0,
            keyed: false,
            bearer: None,
        };
        loads.push((format!("TTFT-only c={concurrency}"), shape));
    }
    for (concurrency, requests) in [(1, 200.0), (50, 3000.0), (500, 6000.0)] {
        let shape = Load {
            concurrency,
            requests: count(requests).max(concurrency * 2),
            chunks: 20,
            gap_ms,
            keyed: false,
            bearer: None,
        };
        loads.push((format!("20 chunks c={concurrency}"), shape));
    }
    loads
}

/// One round's figures for one path.
struct Run {
    sample: Sample,
    cpu_ms_per_request: f64,
    peak_rss_kib: u64,
}

/// Warms each path up, then runs `rounds` paired rounds, rotating the order.
async fn measure(
    client: &reqwest::Client,
    paths: &[&Proc; 3],
    shape: Load,
    rounds: usize,
    ticks: u64,
) -> [Vec<Run>; 3] {
    let warm = Load {
        requests: (shape.concurrency * 2).max(50),
        ..shape
    };
    for proc in paths {
        load::run(client, &[url(proc)], warm).await;
    }
    let mut runs: [Vec<Run>; 3] = Default::default();
    for round in 0..rounds {
        for step in 0..3 {
            let path = (round + step) % 3;
            let proc = paths[path];
            let before = proc.cpu_ns(ticks);
            let sample = load::run(client, &[url(proc)], shape).await;
            let cpu_ns = proc.cpu_ns(ticks).saturating_sub(before);
            let done = (sample.total.len() + sample.errors).max(1);
            runs[path].push(Run {
                cpu_ms_per_request: cpu_ns as f64 / 1e6 / done as f64,
                peak_rss_kib: proc.peak_rss_kib(),
                sample,
            });
        }
    }
    runs
}

fn url(proc: &Proc) -> String {
    format!("http://{}/v1/chat/completions", proc.addr)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn aggregate(label: &str, shape: Load, runs: &[Vec<Run>; 3]) -> Block {
    let q = |run: &Run, p: f64| load::quantile(&run.sample.ttft, p);
    let row = |path: usize| {
        let of = |f: &dyn Fn(&Run) -> f64| median(runs[path].iter().map(f).collect());
        let added = (path > 0).then(|| {
            [0.5, 0.99].map(|p| {
                median(
                    runs[path]
                        .iter()
                        .zip(&runs[0])
                        .map(|(run, direct)| q(run, p) - q(direct, p))
                        .collect(),
                )
            })
        });
        Row {
            rps: of(&|r| r.sample.rps()),
            ttft: [of(&|r| q(r, 0.5)), of(&|r| q(r, 0.99))],
            added,
            total: [
                of(&|r| load::quantile(&r.sample.total, 0.5)),
                of(&|r| load::quantile(&r.sample.total, 0.99)),
            ],
            cpu_ms: of(&|r| r.cpu_ms_per_request),
            peak_rss_mib: of(&|r| r.peak_rss_kib as f64 / 1024.0),
            errors: runs[path].iter().map(|r| r.sample.errors).sum(),
        }
    };
    Block {
        label: label.to_owned(),
        ttft_only: shape.chunks == 1,
        concurrency: shape.concurrency,
        rows: [row(0), row(1), row(2)],
    }
}

/// Idle RSS of a fresh relay, then its RSS with `streams` slow streams open.
async fn memory_check(proc: &Proc, streams: usize) -> Memory {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = proc.rss_kib();
    let held = load::open_streams(&url(proc), streams, 60_000, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let loaded = proc.rss_kib();
    let (open, failed) = (held.open, held.failed);
    held.release();
    tokio::time::sleep(Duration::from_millis(300)).await;
    Memory {
        idle_mib: idle as f64 / 1024.0,
        open,
        failed,
        loaded_mib: loaded as f64 / 1024.0,
        per_stream_kib: loaded.saturating_sub(idle) as f64 / open.max(1) as f64,
    }
}
