//! The command line: `serve` (the default), `demo`, `check`, and `keys add`.
//!
//! This is the only place that reads the process environment and the config file;
//! everything after it works on a `Config` value.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio::net::TcpListener;

use crate::config::{Config, ConfigError, Secret, UpstreamProxy, UpstreamSettings};
use crate::demo::{self, DemoOptions};
use crate::engine::upstream;
use crate::engine::upstream::continuation::Continuation;
use crate::ops::telemetry;
use crate::prompts::{FileStore, PromptStore};
use crate::server;
use crate::state::AppState;
use crate::state::build_upstreams;

/// ladle: a streaming LLM completion gateway.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    /// TOML configuration file (default: $LADLE_CONFIG, else ./ladle.toml if it exists).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway (the default).
    Serve,
    /// Run the gateway against a built-in simulated upstream.
    Demo,
    /// Load the configuration and every prompt, report problems.
    Check,
    /// Client keys (`LADLE_CLIENT_KEYS_FILE`).
    Keys {
        #[command(subcommand)]
        action: KeysCommand,
    },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Make a new client key: prints it once, and the lines to add to the keys file.
    Add {
        /// The key's name in logs and metrics (`^[a-z0-9][a-z0-9_-]{0,31}$`).
        name: String,
    },
}

/// Runs the chosen command; the exit code tells success.
pub fn run(cli: Cli) -> ExitCode {
    // A new key needs no configuration.
    if let Some(Command::Keys {
        action: KeysCommand::Add { name },
    }) = &cli.command
    {
        return new_key(name);
    }
    let config = match load_config(cli.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("ladle: invalid configuration: {error}");
            return ExitCode::FAILURE;
        }
    };
    let warnings =
        config.warnings(std::env::vars_os().filter_map(|(name, _)| name.into_string().ok()));
    match cli.command.unwrap_or(Command::Serve) {
        Command::Check => check(&config, &warnings),
        Command::Serve => {
            telemetry::init(config.log_format);
            warn_all(&warnings);
            exit_code(serve(config))
        }
        Command::Demo => {
            telemetry::init(config.log_format);
            warn_all(&warnings);
            exit_code(run_async(run_demo(config)))
        }
        Command::Keys { .. } => ExitCode::SUCCESS,
    }
}

/// `ladle keys add NAME`: a new random key, shown once, and its entry for the
/// keys file (its SHA-256, never the key).
fn new_key(name: &str) -> ExitCode {
    use base64::Engine as _;
    use sha2::Digest as _;
    let entry = format!(
        "[[keys]]\nname = \"{name}\"\nsha256 = \"{}\"\n",
        "0".repeat(64)
    );
    if let Err(why) = crate::clients::file::KeySet::parse(&entry) {
        eprintln!("ladle: {why}");
        return ExitCode::FAILURE;
    }
    let secret: [u8; 32] = rand::random();
    let key = format!(
        "lk_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let _ = writeln!(
        std::io::stdout(),
        "A new client key for `{name}` (shown this once; ladle keeps only its SHA-256):\n\n  \
         {key}\n\nAdd these lines to the file LADLE_CLIENT_KEYS_FILE names (an edit is live \
         within 2 s):\n\n[[keys]]\nname = \"{name}\"\nsha256 = \"{hex}\"\n"
    );
    ExitCode::SUCCESS
}

/// One log line per warning of the configuration.
fn warn_all(warnings: &[String]) {
    for warning in warnings {
        tracing::warn!("{warning}");
    }
}

fn load_config(path: Option<PathBuf>) -> Result<Config, ConfigError> {
    let env = |key: &str| std::env::var(key).ok();
    let explicit = path.or_else(|| env("LADLE_CONFIG").map(PathBuf::from));
    let text = match explicit {
        Some(path) => Some(
            std::fs::read_to_string(&path)
                .map_err(|e| ConfigError::File(format!("cannot read {}: {e}", path.display())))?,
        ),
        None => std::fs::read_to_string("ladle.toml").ok(),
    };
    Config::load(text.as_deref(), &env)
}

/// Success, or the error on stderr and a failing exit code.
fn exit_code(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ladle: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run_async(work: impl std::future::Future<Output = Result<(), String>>) -> Result<(), String> {
    let runtime = tokio::runtime::Runtime::new()
        .map_err(|error| format!("cannot start the runtime: {error}"))?;
    runtime.block_on(work)
}

/// `serve`: the gateway on one thread per worker (`LADLE_WORKERS`, default one per
/// CPU core), each with its own runtime; see `server::serve_on_threads`.
fn serve(config: Config) -> Result<(), String> {
    if config.upstreams.is_empty() {
        return Err(
            "LADLE_UPSTREAM_URL (or LADLE_UPSTREAMS) is required for `serve` \
                    (try `ladle demo` to run without one)"
                .into(),
        );
    }
    if !config.prompts_dir.exists() {
        tracing::warn!(
            folder = %config.prompts_dir.display(),
            "the prompts folder does not exist: no task is served until it does (LADLE_PROMPTS_DIR)"
        );
    }
    let workers = config.worker_threads();
    let address = config.listen;
    // The upstream client first: a bad proxy or CA file stops start-up before
    // anything listens.
    let state = AppState::new(config).map_err(|e| e.to_string())?;
    let listener = listen(address)?;
    tracing::info!(workers, "serving");
    server::serve_on_threads(listener, state, workers, shutdown_signal).map_err(|e| e.to_string())
}

async fn run_demo(mut config: Config) -> Result<(), String> {
    let shutdown = shutdown_signal();
    let url = demo::start(DemoOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    config.model.get_or_insert_with(|| "ladle-demo".to_owned());
    // Started outside the repository: the prompts it prints lines for come with it.
    let mut built_in = None;
    if !config.prompts_dir.exists() {
        let folder = demo::built_in_prompts()
            .map_err(|e| format!("cannot write the built-in prompts: {e}"))?;
        let _ = writeln!(
            std::io::stdout(),
            "No prompts folder at {}: serving the prompts built into ladle (recipe, fridge) from {}.",
            config.prompts_dir.display(),
            folder.display()
        );
        config.prompts_dir = folder.clone();
        built_in = Some(folder);
    }
    // The demo's jobs (and kept answers) live in memory unless a file is asked for.
    if std::env::var_os("LADLE_STATE_DB").is_none() {
        config.jobs.state_db = ":memory:".into();
    }
    // The demo's own upstream, whatever upstream settings the environment holds.
    config.upstreams = vec![UpstreamSettings {
        continuation: Continuation::Prefix,
        ..UpstreamSettings::single(&url, Secret::default(), UpstreamProxy::Off)
    }];
    let requested = config.listen;
    let state = AppState::new(config).map_err(|e| e.to_string())?;
    let listener = TcpListener::from_std(listen(requested)?).map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", demo_instructions(address));
    let served = server::serve(listener, state, shutdown).await;
    if let Some(folder) = built_in {
        let _ = std::fs::remove_dir_all(folder);
    }
    served.map_err(|e| e.to_string())
}

/// Binds the listening socket (non-blocking, ready for any runtime).
fn listen(address: SocketAddr) -> Result<std::net::TcpListener, String> {
    let listener = std::net::TcpListener::bind(address)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| format!("cannot listen on {address} (LADLE_LISTEN): {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!("listening on {bound}");
    Ok(listener)
}

fn demo_instructions(address: SocketAddr) -> String {
    let base = format!("http://{address}");
    format!(
        r#"
ladle demo: the gateway is on {base}, in front of a simulated upstream that streams
canned recipes, is busy every fourth request (the second first), sometimes
writes "forty-eight 克", and cuts the recipe for 麻婆豆腐 halfway.
Paste these into another terminal (Ctrl-C here stops the demo):

# A whole recipe as normalized JSON:
curl -s {base}/v1/tasks/recipe -H 'content-type: application/json' -d '{{"dish": "香酥鸭", "servings": 2}}'

# The same request again: kept, so it answers at once ("meta": {{"cache": "hit", "attempts": 0}}):
curl -s {base}/v1/tasks/recipe -H 'content-type: application/json' -d '{{"dish": "香酥鸭", "servings": 2}}'

# Another recipe, streamed as named events; the upstream is busy at first, so
# you see attempt, retry (and the 2 s back-off), attempt, delta, result:
curl -N {base}/v1/tasks/recipe -H 'accept: text/event-stream' -H 'content-type: application/json' -d '{{"dish": "番茄炒蛋"}}'

# A recipe the upstream cuts halfway, as flaky upstreams do at second 70: ladle
# continues it from what was written (the upstream takes a `prefix`), so you see
# attempt, delta…, attempt, continue, the rest of the deltas, one whole result:
curl -N {base}/v1/tasks/recipe -H 'accept: text/event-stream' -H 'content-type: application/json' -d '{{"dish": "麻婆豆腐"}}'

# Ideas from what is in the fridge:
curl -s {base}/v1/tasks/fridge -H 'content-type: application/json' -d '{{"ingredients": ["鸡蛋", "番茄", "豆腐"]}}'

# Fridge ideas as a background job (a recipe goes the same way): submitted, answered
# 202 at once, then waited for:
JOB=$(curl -s '{base}/v1/tasks/fridge?async=true' -H 'content-type: application/json' -d '{{"ingredients": ["土豆", "青椒"]}}' | sed -E 's/.*"id":"(job_[A-Za-z0-9]+)".*/\1/')
curl -s "{base}/v1/jobs/$JOB?wait_ms=60000"

# A recipe as a job whose events you watch; the first line drops the stream after
# its 30th event (a phone in a lift), the next two pick it up from the last id seen,
# on to the final `job` event, whole:
curl -sN '{base}/v1/tasks/recipe?async=true' -H 'accept: text/event-stream' -H 'cache-control: no-cache' -H 'content-type: application/json' -d '{{"dish": "鱼香肉丝"}}' | head -n 120 > ladle-events.txt; tail -n 4 ladle-events.txt
JOB=$(grep -o 'job_[A-Za-z0-9]*' ladle-events.txt | head -n 1); LAST=$(grep '^id: ' ladle-events.txt | tail -n 1 | cut -c 5-)
curl -sN "{base}/v1/jobs/$JOB/events" -H "last-event-id: $LAST"

# The OpenAI-compatible endpoint, streaming:
curl -N {base}/v1/chat/completions -H 'content-type: application/json' -d '{{"stream": true, "messages": [{{"role": "user", "content": "红烧肉怎么做？"}}]}}'

# Metrics:
curl -s {base}/metrics | grep ladle_
"#
    )
}

fn check(config: &Config, warnings: &[String]) -> ExitCode {
    let mut out = std::io::stdout();
    for warning in warnings {
        let _ = writeln!(out, "warning {warning}");
    }
    let store = FileStore::open(&config.prompts_dir);
    let broken = store.broken();
    let loaded = store.list();
    for (prompt, _) in &loaded {
        let _ = writeln!(
            out,
            "ok      {} ({:?}, etag {})",
            prompt.name, prompt.output, prompt.etag
        );
    }
    for (name, why) in &broken {
        let _ = writeln!(out, "BROKEN  {name}: {why}");
    }
    let mut problems = broken.len();
    if loaded.is_empty() && broken.is_empty() {
        let _ = writeln!(
            out,
            "BROKEN  no prompts found in {}",
            config.prompts_dir.display()
        );
        problems += 1;
    }
    // The upstream client is built as `serve` builds it, so `check` passing means
    // the proxy, the CA file and the URL are usable.
    let client = if config.upstreams.is_empty() {
        let _ = writeln!(
            out,
            "note    LADLE_UPSTREAM_URL (or LADLE_UPSTREAMS) is unset: `serve` needs it, \
             `demo` does not"
        );
        upstream::check_options(&crate::state::client_options(config)).map_err(ConfigError::from)
    } else {
        build_upstreams(config).map(drop)
    };
    match client {
        Ok(()) => {
            let _ = writeln!(out, "ok      upstream client");
        }
        Err(why) => {
            let _ = writeln!(out, "BROKEN  {why}");
            problems += 1;
        }
    }
    if let Some(settings) = &config.redis {
        let _ = writeln!(out, "{}", redis_note(settings));
    }
    let _ = writeln!(
        out,
        "{} prompt(s) loaded, {problems} problem(s)",
        loaded.len()
    );
    if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What `check` says of the fleet's Redis: whether it keeps jobs across its own
/// restart. A warning, not a problem: `serve` runs with any Redis, or none
/// reachable.
fn redis_note(settings: &crate::config::RedisSettings) -> String {
    let Ok(redis) = crate::fleet::Redis::new(settings, crate::engine::metrics::Metrics::new())
    else {
        return "warning LADLE_REDIS_URL: cannot set up a connection".to_owned();
    };
    match redis.block_on(redis.persistent()) {
        Some(true) => "ok      redis keeps jobs across its restart (appendonly yes)".to_owned(),
        Some(false) => "warning redis has no append-only file (appendonly no): a restart of it \
                         loses every job it holds; set `appendonly yes`"
            .to_owned(),
        None => "warning redis is unreachable: jobs, prompts and keys wait for it".to_owned(),
    }
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is called,
/// not when the future is first polled, so a signal that arrives while the server
/// is still starting is kept rather than killing the process. Call it inside the
/// runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let (mut interrupt, mut terminate) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        tokio::select! {
            () = received(&mut interrupt) => {},
            () = received(&mut terminate) => {},
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down: no new connections; running requests may finish");
    }
}

/// Waits for a signal; forever when its handler could not be installed.
#[cfg(unix)]
async fn received(signal: &mut Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}
