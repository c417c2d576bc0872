//! Configuration: one validated `Config`, loaded by one pure function.
//!
//! Values come from an optional TOML file and from `LADLE_*` variables; the
//! environment wins. The TOML key of a setting is its variable's name without the
//! `LADLE_` prefix, in lower case (`LADLE_IDLE_TIMEOUT_MS` ↔ `idle_timeout_ms`).
//! `load` takes the environment as a function, so tests never touch the process's
//! environment, and nothing else in the crate reads a variable.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::failure::BusyKeywords;

mod fleet;
mod proxy;
mod resilience;
mod secret;
mod upstreams;

pub use fleet::RedisSettings;
pub use proxy::UpstreamProxy;
pub use resilience::BreakerMode;
pub use secret::Secret;
pub use upstreams::UpstreamSettings;

/// The default busy keywords of the contract.
pub const DEFAULT_BUSY_KEYWORDS: &str = "访问量较大,访问量过大,请求过多,稍后重试,稍后再试,暂时不可用,繁忙,overloaded,unavailable,busy,rate limit,too many requests";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// For people at a terminal.
    Pretty,
    /// One JSON object per line, for machines.
    Json,
}

/// The whole validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to serve on.
    pub listen: SocketAddr,
    /// Upstream base URL; required by `serve`, not by `demo`.
    pub upstream_url: Option<String>,
    /// Sent as a bearer token to the upstream.
    pub upstream_api_key: Secret,
    /// The proxy to the upstream.
    pub upstream_proxy: UpstreamProxy,
    /// Every upstream, in listing order: `LADLE_UPSTREAMS`, or the single-upstream
    /// settings as one named `default`; empty when neither is given.
    pub upstreams: Vec<UpstreamSettings>,
    /// Model used when a request names none.
    pub model: Option<String>,
    /// Folder of prompt templates.
    pub prompts_dir: PathBuf,
    /// Bearer token for `/admin/*`; `None` turns the admin API off.
    pub admin_token: Option<Secret>,
    /// TCP + TLS connect timeout.
    pub connect_timeout: Duration,
    /// Longest wait for the upstream's next SSE event.
    pub idle_timeout: Duration,
    /// Whole-request budget for `/v1/chat/completions`.
    pub deadline: Duration,
    /// Budget a busy/not-started retry must leave after its wait.
    pub min_remaining: Duration,
    /// Upstream attempts per request, first included.
    pub max_attempts: u32,
    /// First back-off.
    pub backoff_base: Duration,
    /// Back-off cap.
    pub backoff_max: Duration,
    /// Window in which an `Other` failure of attempt 1 is retried once.
    pub early_retry_window: Duration,
    /// `j` in [0, 1]: each back-off is multiplied by a uniform factor in [1−j, 1+j].
    pub backoff_jitter: f64,
    /// Longest time from an attempt's start to its first output; `None` = off.
    pub first_output_timeout: Option<Duration>,
    /// Silence after which a streaming chat request gets its head and comments;
    /// `None` = off.
    pub stream_keepalive: Option<Duration>,
    /// How long kept idempotent results live, and how many memory keeps.
    pub idempotency: crate::idempotency::Limits,
    /// Which upstreams get a circuit breaker (`LADLE_BREAKER`).
    pub breaker: BreakerMode,
    /// When a breaker opens and for how long.
    pub breaker_settings: crate::breaker::BreakerSettings,
    /// Each upstream's retry budget.
    pub retry_budget: crate::budget::BudgetSettings,
    /// The Redis that replicas share state through (`LADLE_REDIS_URL`), if any.
    pub redis: Option<RedisSettings>,
    /// Substrings that mark an upstream error as busy.
    pub busy_keywords: BusyKeywords,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Concurrent upstream calls.
    pub max_inflight: usize,
    /// Longest wait for an upstream slot.
    pub queue_timeout: Duration,
    /// Log line format.
    pub log_format: LogFormat,
    /// How often the prompts folder is looked at again (not in the contract;
    /// `LADLE_PROMPT_RELOAD_MS`, default 1000).
    pub prompt_reload: Duration,
    /// Longest wait for a whole request head, also for the next one on an idle
    /// keep-alive connection (not in the contract; `LADLE_HEADER_READ_TIMEOUT_MS`,
    /// default 30000, hyper's own default).
    pub header_read_timeout: Duration,
    /// Longest time from a request's arrival to the end of its body (not in the
    /// contract; `LADLE_BODY_READ_TIMEOUT_MS`, default 30000).
    pub body_read_timeout: Duration,
    /// Worker threads of `serve`, each with its own runtime and accept loop (not
    /// in the contract; `LADLE_WORKERS`, default 0: one per CPU core).
    pub workers: usize,
    /// Extra CA certificates (PEM) trusted for an `https` upstream (not in the
    /// contract; `LADLE_UPSTREAM_CA_FILE`).
    pub upstream_ca_file: Option<PathBuf>,
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

/// Where raw setting values come from: the environment first, then the file.
struct Sources<'a> {
    file: toml::Table,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// The file keys asked for, so that any other key can be refused.
    asked: std::cell::RefCell<Vec<String>>,
}

impl Sources<'_> {
    fn raw(&self, key: &'static str) -> Result<Option<String>, ConfigError> {
        let file_key = key.trim_start_matches("LADLE_").to_ascii_lowercase();
        let value = self.file.get(&file_key);
        self.asked.borrow_mut().push(file_key);
        if let Some(value) = (self.env)(key) {
            return Ok(Some(value));
        }
        match value {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(toml::Value::Integer(i)) => Ok(Some(i.to_string())),
            Some(toml::Value::Boolean(b)) => Ok(Some(b.to_string())),
            Some(other) => Err(invalid(key, format!("unsupported value {other}"))),
        }
    }

    fn string(&self, key: &'static str, default: &str) -> Result<String, ConfigError> {
        Ok(self.raw(key)?.unwrap_or_else(|| default.to_owned()))
    }

    fn parsed<T: std::str::FromStr>(&self, key: &'static str, default: T) -> Result<T, ConfigError>
    where
        T::Err: fmt::Display,
    {
        match self.raw(key)? {
            None => Ok(default),
            Some(text) => text
                .trim()
                .parse()
                .map_err(|e| invalid(key, format!("`{text}`: {e}"))),
        }
    }

    fn millis(&self, key: &'static str, default_ms: u64) -> Result<Duration, ConfigError> {
        self.parsed::<u64>(key, default_ms)
            .map(Duration::from_millis)
    }

    /// A list setting: JSON text in the environment, an array in the file.
    fn list(&self, key: &'static str) -> Result<Option<serde_json::Value>, ConfigError> {
        let file_key = key.trim_start_matches("LADLE_").to_ascii_lowercase();
        let in_file = self.file.get(&file_key);
        self.asked.borrow_mut().push(file_key);
        if let Some(text) = (self.env)(key) {
            return serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| invalid(key, format!("not JSON: {e}")));
        }
        in_file
            .map(|value| serde_json::to_value(value).map_err(|e| invalid(key, e.to_string())))
            .transpose()
    }

    fn optional(&self, key: &'static str) -> Result<Option<String>, ConfigError> {
        Ok(self.raw(key)?.filter(|v| !v.trim().is_empty()))
    }
}

fn invalid(key: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        problem: problem.into(),
    }
}

impl Config {
    /// Loads and validates the configuration from an optional TOML text and an
    /// environment lookup. Pure: the caller reads the file and the process environment.
    pub fn load(
        toml_text: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let file = match toml_text {
            // The parser's message and line, not its quote of the line: that
            // line may hold an upstream's `api_key`.
            Some(text) => text.parse::<toml::Table>().map_err(|e| {
                let line = e.span().map_or(0, |span| {
                    text[..span.start.min(text.len())].matches('\n').count() + 1
                });
                ConfigError::File(format!("line {line}: {}", e.message()))
            })?,
            None => toml::Table::new(),
        };
        let src = Sources {
            file,
            env,
            asked: Default::default(),
        };
        let log_format = match src.string("LADLE_LOG_FORMAT", "pretty")?.as_str() {
            "pretty" => LogFormat::Pretty,
            "json" => LogFormat::Json,
            other => {
                return Err(invalid(
                    "LADLE_LOG_FORMAT",
                    format!("`{other}` is not pretty or json"),
                ));
            }
        };
        let upstream_url = src.optional("LADLE_UPSTREAM_URL")?;
        let upstream_api_key = Secret::new(src.string("LADLE_UPSTREAM_API_KEY", "")?);
        let upstream_proxy = match src.optional("LADLE_UPSTREAM_PROXY")? {
            None => UpstreamProxy::FromEnvironment,
            Some(text) => UpstreamProxy::parse(&text)?,
        };
        let upstreams = match src.list("LADLE_UPSTREAMS")? {
            Some(_)
                if upstream_url.is_some()
                    || !upstream_api_key.is_empty()
                    || upstream_proxy != UpstreamProxy::FromEnvironment =>
            {
                return Err(invalid(
                    "LADLE_UPSTREAMS",
                    "is given with LADLE_UPSTREAM_URL, LADLE_UPSTREAM_API_KEY or \
                     LADLE_UPSTREAM_PROXY: use one form, the list or the single settings",
                ));
            }
            Some(list) => upstreams::parse(&list)?,
            None => upstream_url
                .iter()
                .map(|url| {
                    UpstreamSettings::single(url, upstream_api_key.clone(), upstream_proxy.clone())
                })
                .collect(),
        };
        let (breaker, breaker_settings, retry_budget) = resilience::load(&src)?;
        let config = Config {
            redis: fleet::load(&src)?,
            breaker,
            breaker_settings,
            retry_budget,
            upstreams,
            listen: src.parsed("LADLE_LISTEN", SocketAddr::from(([127, 0, 0, 1], 8080)))?,
            upstream_url,
            upstream_api_key,
            upstream_proxy,
            model: src.optional("LADLE_MODEL")?,
            prompts_dir: PathBuf::from(src.string("LADLE_PROMPTS_DIR", "./prompts")?),
            admin_token: src.optional("LADLE_ADMIN_TOKEN")?.map(Secret::new),
            connect_timeout: src.millis("LADLE_CONNECT_TIMEOUT_MS", 5_000)?,
            idle_timeout: src.millis("LADLE_IDLE_TIMEOUT_MS", 30_000)?,
            deadline: src.millis("LADLE_DEADLINE_MS", 120_000)?,
            min_remaining: src.millis("LADLE_MIN_REMAINING_MS", 30_000)?,
            max_attempts: src.parsed("LADLE_MAX_ATTEMPTS", 5)?,
            backoff_base: src.millis("LADLE_BACKOFF_BASE_MS", 2_000)?,
            backoff_max: src.millis("LADLE_BACKOFF_MAX_MS", 10_000)?,
            early_retry_window: src.millis("LADLE_EARLY_RETRY_WINDOW_MS", 20_000)?,
            backoff_jitter: src.parsed("LADLE_BACKOFF_JITTER", 0.0)?,
            first_output_timeout: Some(src.millis("LADLE_FIRST_OUTPUT_TIMEOUT_MS", 0)?)
                .filter(|timeout| !timeout.is_zero()),
            stream_keepalive: Some(src.millis("LADLE_STREAM_KEEPALIVE_MS", 0)?)
                .filter(|every| !every.is_zero()),
            idempotency: crate::idempotency::Limits {
                ttl: src.millis("LADLE_IDEMPOTENCY_TTL_MS", 3_600_000)?,
                max_entries: src.parsed("LADLE_IDEMPOTENCY_MAX_ENTRIES", 10_000)?,
            },
            busy_keywords: BusyKeywords::parse(
                &src.string("LADLE_BUSY_KEYWORDS", DEFAULT_BUSY_KEYWORDS)?,
            ),
            max_body_bytes: src.parsed("LADLE_MAX_BODY_BYTES", 262_144)?,
            max_inflight: src.parsed("LADLE_MAX_INFLIGHT", 512)?,
            queue_timeout: src.millis("LADLE_QUEUE_TIMEOUT_MS", 2_000)?,
            log_format,
            prompt_reload: src.millis("LADLE_PROMPT_RELOAD_MS", 1_000)?,
            header_read_timeout: src.millis("LADLE_HEADER_READ_TIMEOUT_MS", 30_000)?,
            body_read_timeout: src.millis("LADLE_BODY_READ_TIMEOUT_MS", 30_000)?,
            workers: src.parsed("LADLE_WORKERS", 0)?,
            upstream_ca_file: src.optional("LADLE_UPSTREAM_CA_FILE")?.map(PathBuf::from),
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
            ("LADLE_IDLE_TIMEOUT_MS", self.idle_timeout),
            ("LADLE_DEADLINE_MS", self.deadline),
            ("LADLE_BACKOFF_BASE_MS", self.backoff_base),
            ("LADLE_PROMPT_RELOAD_MS", self.prompt_reload),
            ("LADLE_HEADER_READ_TIMEOUT_MS", self.header_read_timeout),
            ("LADLE_BODY_READ_TIMEOUT_MS", self.body_read_timeout),
        ];
        for (key, value) in positive {
            if value.is_zero() {
                return Err(invalid(key, "must be greater than 0"));
            }
        }
        if !(0.0..=1.0).contains(&self.backoff_jitter) {
            return Err(invalid("LADLE_BACKOFF_JITTER", "must be between 0 and 1"));
        }
        if self.max_attempts == 0 {
            return Err(invalid("LADLE_MAX_ATTEMPTS", "must be at least 1"));
        }
        if self.max_inflight == 0 {
            return Err(invalid("LADLE_MAX_INFLIGHT", "must be at least 1"));
        }
        if self.max_body_bytes == 0 {
            return Err(invalid("LADLE_MAX_BODY_BYTES", "must be at least 1"));
        }
        if self.backoff_base > self.backoff_max {
            return Err(invalid(
                "LADLE_BACKOFF_MAX_MS",
                "must not be less than LADLE_BACKOFF_BASE_MS",
            ));
        }
        if self.min_remaining >= self.deadline {
            return Err(invalid(
                "LADLE_MIN_REMAINING_MS",
                "must be less than LADLE_DEADLINE_MS",
            ));
        }
        if let Some(url) = &self.upstream_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(
                "LADLE_UPSTREAM_URL",
                "must start with http:// or https://",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
