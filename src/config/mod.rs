//! Configuration: one validated `Config`, loaded by one pure function.
//!
//! Values come from an optional TOML file and from `LADLE_*` variables; the
//! environment wins. The TOML key of a setting is its variable's name without the
//! `LADLE_` prefix, in lower case (`LADLE_IDLE_TIMEOUT_MS` ↔ `idle_timeout_ms`).
//! `load` takes the environment as a function, so tests never touch the process's
//! environment, and nothing else in the crate reads a variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::engine::breaker::BreakerSettings;
use crate::engine::budget::settings::BudgetSettings;
use crate::engine::completion::attempt::AttemptTimeouts;
use crate::engine::failure::BusyKeywords;
use crate::engine::retry::RetryPolicy;
use crate::engine::upstream::settings::SetupError;
use crate::ops::telemetry::LogFormat;

use self::settings::{Millis, Sources, invalid};

mod jobs;
mod proxy;
mod redis;
mod resilience;
pub mod settings;
mod upstreams;

pub use crate::engine::secret::Secret;
pub use crate::engine::upstream::settings::{UpstreamProxy, UpstreamSettings};
pub use jobs::JobSettings;
pub use redis::RedisSettings;
pub use resilience::BreakerMode;

/// The most worker threads `serve` may run (`LADLE_WORKERS`): each has its own
/// runtime, client pool and stacks.
pub const MAX_WORKERS: usize = 256;

/// The default busy keywords of the contract.
pub const DEFAULT_BUSY_KEYWORDS: &str = "访问量较大,访问量过大,请求过多,稍后重试,稍后再试,暂时不可用,繁忙,overloaded,unavailable,busy,rate limit,too many requests";

/// The whole validated configuration, in the shapes that run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to serve on.
    pub listen: SocketAddr,
    /// Every upstream, in listing order: `LADLE_UPSTREAMS`, or the single-upstream
    /// settings as one named `default`; empty when neither is given (`serve`
    /// needs one, `demo` brings its own).
    pub upstreams: Vec<UpstreamSettings>,
    /// The proxy setting (`LADLE_UPSTREAM_PROXY`), for `check` without upstreams.
    pub upstream_proxy: UpstreamProxy,
    /// Extra CA certificates (PEM) trusted for an `https` upstream (not in the
    /// contract; `LADLE_UPSTREAM_CA_FILE`).
    pub upstream_ca_file: Option<PathBuf>,
    /// TCP + TLS connect timeout.
    pub connect_timeout: Duration,
    /// Model used when a request names none.
    pub model: Option<String>,
    /// Folder of prompt templates.
    pub prompts_dir: PathBuf,
    /// Bearer token for `/admin/*`; `None` turns the admin API off.
    pub admin_token: Option<Secret>,
    /// An attempt's idle and first-output timeouts.
    pub timeouts: AttemptTimeouts,
    /// Whole-request deadline for `/v1/chat/completions`, from arrival.
    pub deadline: Duration,
    /// The retry policy (a task brings its own `min_remaining`).
    pub retry: RetryPolicy,
    /// Silence after which a streaming chat request gets its head and comments;
    /// `None` = off.
    pub stream_keepalive: Option<Duration>,
    /// How long kept idempotent results live, and how many memory keeps.
    pub idempotency: crate::idempotency::limits::Limits,
    /// Which upstreams get a circuit breaker (`LADLE_BREAKER`).
    pub breaker: BreakerMode,
    /// When a breaker opens and for how long.
    pub breaker_settings: BreakerSettings,
    /// Each upstream's retry budget.
    pub budget: BudgetSettings,
    /// The Redis that replicas share state through (`LADLE_REDIS_URL`), if any.
    pub redis: Option<RedisSettings>,
    /// Background jobs and their webhooks.
    pub jobs: JobSettings,
    /// `LADLE_CACHE_MAX_ENTRIES`: kept answers (contract 7.3), at least 1.
    pub cache_max_entries: usize,
    /// `LADLE_CLIENT_KEYS_FILE`: with it, every `/v1/*` request needs a client key.
    pub client_keys_file: Option<PathBuf>,
    /// Substrings that mark an upstream error as busy.
    pub busy_keywords: BusyKeywords,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Largest answer ladle assembles itself (content and reasoning, per choice).
    pub max_answer_bytes: usize,
    /// Concurrent upstream calls.
    pub max_inflight: usize,
    /// Longest wait for an upstream slot.
    pub queue_timeout: Duration,
    /// Log line format.
    pub log_format: LogFormat,
    /// How often the prompts folder is looked at again (not in the contract).
    pub prompt_reload: Duration,
    /// Longest wait for a whole request head, also for the next one on an idle
    /// keep-alive connection (not in the contract; hyper's own default).
    pub header_read_timeout: Duration,
    /// Longest time from a request's arrival to the end of its body (not in the
    /// contract).
    pub body_read_timeout: Duration,
    /// Worker threads of `serve`, each with its own runtime and accept loop (not
    /// in the contract; 0: one per CPU core).
    pub workers: usize,
}

/// Why the configuration cannot be used; always names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value that does not parse or is out of range.
    #[error("{key}: {problem}")]
    Invalid {
        /// The environment name of the setting.
        key: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The configuration file is not valid TOML.
    #[error("config file: {0}")]
    File(String),
    /// The configuration file names a setting that does not exist (a typo would
    /// otherwise be accepted and do nothing).
    #[error("config file: unknown key `{0}`")]
    UnknownKey(String),
}

impl From<SetupError> for ConfigError {
    fn from(error: SetupError) -> Self {
        ConfigError::Invalid {
            key: error.key,
            problem: error.problem,
        }
    }
}

/// Why the app could not be built from a valid configuration.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting that cannot be used after all (a CA file that does not read, a
    /// proxy URL the client refuses); names the key.
    #[error(transparent)]
    Setting(#[from] ConfigError),
    /// A thread or runtime of ladle's own could not start.
    #[error("cannot start {what}: {source}")]
    Runtime {
        /// What could not start.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

impl Config {
    /// Loads and validates the configuration from an optional TOML text and an
    /// environment lookup. Pure: the caller reads the file and the process environment.
    pub fn load(
        toml_text: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let src = Sources {
            file: file_table(toml_text)?,
            env,
            asked: Default::default(),
        };
        let (upstreams, upstream_proxy) = upstreams::load(&src)?;
        let (breaker, breaker_settings, budget) = resilience::load(&src)?;
        let config = Config {
            listen: src.get("LADLE_LISTEN")?,
            upstreams,
            upstream_proxy,
            upstream_ca_file: src.optional("LADLE_UPSTREAM_CA_FILE")?,
            connect_timeout: src.get::<Millis>("LADLE_CONNECT_TIMEOUT_MS")?.0,
            model: src.optional("LADLE_MODEL")?,
            prompts_dir: src.get("LADLE_PROMPTS_DIR")?,
            admin_token: src
                .optional::<String>("LADLE_ADMIN_TOKEN")?
                .map(Secret::new),
            timeouts: AttemptTimeouts {
                idle: src.get::<Millis>("LADLE_IDLE_TIMEOUT_MS")?.0,
                first_output: src.millis_or_off("LADLE_FIRST_OUTPUT_TIMEOUT_MS")?,
            },
            deadline: src.get::<Millis>("LADLE_DEADLINE_MS")?.0,
            retry: retry_policy(&src)?,
            stream_keepalive: src.millis_or_off("LADLE_STREAM_KEEPALIVE_MS")?,
            idempotency: crate::idempotency::limits::Limits {
                ttl: src.get::<Millis>("LADLE_IDEMPOTENCY_TTL_MS")?.0,
                max_entries: src.get("LADLE_IDEMPOTENCY_MAX_ENTRIES")?,
                max_bytes: src.get("LADLE_IDEMPOTENCY_MAX_BYTES")?,
            },
            breaker,
            breaker_settings,
            budget,
            redis: redis::load(&src)?,
            jobs: jobs::load(&src, src.get::<Millis>("LADLE_REDIS_LEASE_MS")?.0)?,
            cache_max_entries: src.get("LADLE_CACHE_MAX_ENTRIES")?,
            client_keys_file: src.optional("LADLE_CLIENT_KEYS_FILE")?,
            busy_keywords: BusyKeywords::parse(&src.get::<String>("LADLE_BUSY_KEYWORDS")?),
            max_body_bytes: src.get("LADLE_MAX_BODY_BYTES")?,
            max_answer_bytes: src.get("LADLE_MAX_ANSWER_BYTES")?,
            max_inflight: src.get("LADLE_MAX_INFLIGHT")?,
            queue_timeout: src.get::<Millis>("LADLE_QUEUE_TIMEOUT_MS")?.0,
            log_format: src.get("LADLE_LOG_FORMAT")?,
            prompt_reload: src.get::<Millis>("LADLE_PROMPT_RELOAD_MS")?.0,
            header_read_timeout: src.get::<Millis>("LADLE_HEADER_READ_TIMEOUT_MS")?.0,
            body_read_timeout: src.get::<Millis>("LADLE_BODY_READ_TIMEOUT_MS")?.0,
            workers: src.get("LADLE_WORKERS")?,
        };
        if let Some(unknown) = src
            .file
            .keys()
            .find(|key| !src.asked.borrow().contains(key))
        {
            return Err(ConfigError::UnknownKey(unknown.clone()));
        }
        config.validate()?;
        Ok(config)
    }

    /// What is worth a warning at start, though it does not stop start-up: the
    /// `LADLE_*` variables among `variables` that are no setting (all named in one
    /// line), and an admin token shorter than 16 characters.
    pub fn warnings(&self, variables: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut warnings = Vec::new();
        let unknown = settings::unknown_variables(variables);
        if !unknown.is_empty() {
            warnings.push(format!(
                "unknown LADLE_ variables (typos?), ignored: {}",
                unknown.join(", ")
            ));
        }
        if let Some(token) = &self.admin_token
            && token.expose().chars().count() < 16
        {
            warnings.push(
                "LADLE_ADMIN_TOKEN is shorter than 16 characters: anyone who can reach \
                 the admin API could guess it"
                    .to_owned(),
            );
        }
        warnings
    }

    /// Worker threads `serve` runs: `LADLE_WORKERS`, or one per CPU core for 0.
    pub fn worker_threads(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        }
    }

    /// Checks fields against each other and against sane ranges.
    fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("LADLE_CONNECT_TIMEOUT_MS", self.connect_timeout),
            ("LADLE_IDLE_TIMEOUT_MS", self.timeouts.idle),
            ("LADLE_DEADLINE_MS", self.deadline),
            ("LADLE_BACKOFF_BASE_MS", self.retry.backoff_base),
            ("LADLE_PROMPT_RELOAD_MS", self.prompt_reload),
            ("LADLE_HEADER_READ_TIMEOUT_MS", self.header_read_timeout),
            ("LADLE_BODY_READ_TIMEOUT_MS", self.body_read_timeout),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, value)| value.is_zero()) {
            return Err(invalid(key, "must be greater than 0"));
        }
        let at_least_one = [
            ("LADLE_MAX_ATTEMPTS", self.retry.max_attempts as usize),
            ("LADLE_MAX_INFLIGHT", self.max_inflight),
            ("LADLE_MAX_BODY_BYTES", self.max_body_bytes),
            ("LADLE_MAX_ANSWER_BYTES", self.max_answer_bytes),
            ("LADLE_CACHE_MAX_ENTRIES", self.cache_max_entries),
        ];
        if let Some((key, _)) = at_least_one.iter().find(|(_, value)| *value == 0) {
            return Err(invalid(key, "must be at least 1"));
        }
        if self.workers > MAX_WORKERS {
            return Err(invalid(
                "LADLE_WORKERS",
                format!("must be at most {MAX_WORKERS}"),
            ));
        }
        if !(0.0..=1.0).contains(&self.retry.jitter) {
            return Err(invalid("LADLE_BACKOFF_JITTER", "must be between 0 and 1"));
        }
        if self.retry.backoff_base > self.retry.backoff_max {
            return Err(invalid(
                "LADLE_BACKOFF_MAX_MS",
                "must not be less than LADLE_BACKOFF_BASE_MS",
            ));
        }
        if self.retry.min_remaining >= self.deadline {
            return Err(invalid(
                "LADLE_MIN_REMAINING_MS",
                "must be less than LADLE_DEADLINE_MS",
            ));
        }
        Ok(())
    }
}

/// The configuration file as a table; an error gives the parser's message and
/// line, not its quote of the line: that line may hold an upstream's `api_key`.
fn file_table(toml_text: Option<&str>) -> Result<toml::Table, ConfigError> {
    let Some(text) = toml_text else {
        return Ok(toml::Table::new());
    };
    text.parse::<toml::Table>().map_err(|e| {
        let line = e.span().map_or(0, |span| {
            text[..span.start.min(text.len())].matches('\n').count() + 1
        });
        ConfigError::File(format!("line {line}: {}", e.message()))
    })
}

/// The retry settings, as the policy that runs them.
fn retry_policy(src: &Sources<'_>) -> Result<RetryPolicy, ConfigError> {
    Ok(RetryPolicy {
        max_attempts: src.get("LADLE_MAX_ATTEMPTS")?,
        backoff_base: src.get::<Millis>("LADLE_BACKOFF_BASE_MS")?.0,
        backoff_max: src.get::<Millis>("LADLE_BACKOFF_MAX_MS")?.0,
        early_retry_window: src.get::<Millis>("LADLE_EARLY_RETRY_WINDOW_MS")?.0,
        min_remaining: src.get::<Millis>("LADLE_MIN_REMAINING_MS")?.0,
        retry_after_output: true,
        jitter: src.get("LADLE_BACKOFF_JITTER")?,
        max_continuations: src.get("LADLE_MAX_CONTINUATIONS")?,
        continue_min_remaining: src.get::<Millis>("LADLE_CONTINUE_MIN_REMAINING_MS")?.0,
    })
}

impl settings::FromSetting for LogFormat {
    fn from_setting(text: &str) -> Result<Self, String> {
        match text.trim() {
            "pretty" => Ok(LogFormat::Pretty),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("`{other}` is not pretty or json")),
        }
    }
}

#[cfg(test)]
mod tests;
