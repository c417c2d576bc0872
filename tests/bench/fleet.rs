//! Two replicas sharing one `redis-server`, behind the load generator's round
//! robin, against two replicas without Redis, in the same run: requests per
//! second, TTFT, CPU per request (both replicas; Redis's apart) and Redis commands
//! per request, for requests without and with an `Idempotency-Key`. Also the
//! commands per second an idle fleet sends (prompt version polls, budget rounds).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::load::{self, Load};
use crate::procs::{self, Proc};

/// The median figures of one fleet under one load.
pub struct FleetRow {
    label: String,
    rps: f64,
    ttft: [f64; 2],
    ladle_cpu_ms: f64,
    redis_cpu_ms: f64,
    commands: f64,
    errors: usize,
}

/// What the fleet run measured.
pub struct Fleet {
    rows: Vec<FleetRow>,
    idle_commands_per_s: f64,
}

/// Starts redis-server on a free loopback port, without persistence.
pub fn start_redis() -> Result<Proc, String> {
    let port = procs::free_port()?;
    let dir = procs::scratch_dir("redis")?;
    let port_text = port.to_string();
    let dir_text = dir.display().to_string();
    let args = [
        "--port",
        &port_text,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir_text,
    ];
    let child = procs::spawn(Path::new("redis-server"), &args)
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server (Debian package `redis-server`): {e}"))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let proc = Proc::new(addr, child, dir);
    for _ in 0..500 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(proc);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err("redis-server did not listen within 5 s (is it installed?)".into())
}

/// Commands Redis has processed so far.
async fn commands(connection: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(connection)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Runs both fleets against the mock at `upstream`.
pub async fn run(
    upstream: SocketAddr,
    scale: f64,
    rounds: usize,
    ticks: u64,
) -> Result<Fleet, String> {
    let redis = start_redis()?;
    let url = format!("redis://{}", redis.addr);
    let with_redis = [("LADLE_REDIS_URL", url.clone())];
    let fleets = [
        [
            procs::start_ladle(upstream, &[])?,
            procs::start_ladle(upstream, &[])?,
        ],
        [
            procs::start_ladle(upstream, &with_redis)?,
            procs::start_ladle(upstream, &with_redis)?,
        ],
    ];
    let mut connection = redis::Client::open(url)
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("cannot reach the benchmark's redis: {e}"))?;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = commands(&mut connection).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_commands_per_s = commands(&mut connection).await.saturating_sub(before) as f64 / 2.0;

    let client = load::client();
    let requests = ((5_000.0 * scale) as usize).max(100);
    let mut rows = Vec::new();
    for keyed in [false, true] {
        let shape = Load {
            concurrency: 50,
            requests,
            chunks: 1,
            gap_ms: 0,
            keyed,
            bearer: None,
        };
        let mut runs: [Vec<FleetRow>; 2] = Default::default();
        for fleet in &fleets {
            load::run(
                &client,
                &urls(fleet),
                Load {
                    requests: 200,
                    ..shape
                },
            )
            .await;
        }
        for round in 0..rounds {
            for step in 0..2 {
                let mode = (round + step) % 2;
                let fleet = &fleets[mode];
                let cpu = |fleet: &[Proc; 2]| fleet.iter().map(|p| p.cpu_ns(ticks)).sum::<u64>();
                let (ladle_before, redis_before) = (cpu(fleet), redis.cpu_ns(ticks));
                let commands_before = commands(&mut connection).await;
                let sample = load::run(&client, &urls(fleet), shape).await;
                let done = (sample.total.len() + sample.errors).max(1) as f64;
                let per_request = |ns: u64| ns as f64 / 1e6 / done;
                runs[mode].push(FleetRow {
                    label: String::new(),
                    rps: sample.rps(),
                    ttft: [0.5, 0.99].map(|p| load::quantile(&sample.ttft, p)),
                    ladle_cpu_ms: per_request(cpu(fleet).saturating_sub(ladle_before)),
                    redis_cpu_ms: per_request(redis.cpu_ns(ticks).saturating_sub(redis_before)),
                    commands: commands(&mut connection)
                        .await
                        .saturating_sub(commands_before) as f64
                        / done,
                    errors: sample.errors,
                });
            }
        }
        for (mode, runs) in runs.iter().enumerate() {
            let of = |f: &dyn Fn(&FleetRow) -> f64| crate::median(runs.iter().map(f).collect());
            rows.push(FleetRow {
                label: format!(
                    "{} key, Redis {}",
                    if keyed { "with a" } else { "no" },
                    if mode == 1 { "on" } else { "off" }
                ),
                rps: of(&|r| r.rps),
                ttft: [of(&|r| r.ttft[0]), of(&|r| r.ttft[1])],
                ladle_cpu_ms: of(&|r| r.ladle_cpu_ms),
                redis_cpu_ms: of(&|r| r.redis_cpu_ms),
                commands: of(&|r| r.commands),
                errors: runs.iter().map(|r| r.errors).sum(),
            });
        }
    }
    Ok(Fleet {
        rows,
        idle_commands_per_s,
    })
}

fn urls(fleet: &[Proc; 2]) -> Vec<String> {
    fleet
        .iter()
        .map(|p| format!("http://{}/v1/chat/completions", p.addr))
        .collect()
}

impl Fleet {
    /// The fleet's table, with Redis's cost as ratios to the same load without it.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "### Two replicas, round robin, TTFT-only c=50\n\n\
             | load | req/s | TTFT p50 / p99 ms | ladle CPU ms/req (both) | vs Redis off | \
             redis CPU ms/req | Redis commands/req | errors |\n|---|---|---|---|---|---|---|---|\n",
        );
        for pair in self.rows.chunks(2) {
            let off = &pair[0];
            for row in pair {
                let _ = writeln!(
                    out,
                    "| {} | {:.0} | {:.2} / {:.2} | {:.3} | {:.2}× | {:.3} | {:.2} | {} |",
                    row.label,
                    row.rps,
                    row.ttft[0],
                    row.ttft[1],
                    row.ladle_cpu_ms,
                    row.ladle_cpu_ms / off.ladle_cpu_ms,
                    row.redis_cpu_ms,
                    row.commands,
                    row.errors
                );
            }
        }
        let _ = writeln!(
            out,
            "\nAn idle fleet of two sends Redis {:.1} commands/s (prompt version polls, budget rounds).",
            self.idle_commands_per_s
        );
        out
    }
}
