//! Every setting ladle reads, with its default, in one table; and the reader of
//! raw values (the environment first, then the file).
//!
//! The table is the one place defaults are written. It also tells which `LADLE_*`
//! variables are unknown (a typo is named at start), and a tidy test checks that
//! `docs/configuration.md` documents every name in it.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::ConfigError;

/// Every setting: its variable's name and its default as text (empty: unset).
pub const SETTINGS: &[(&str, &str)] = &[
    ("LADLE_CONFIG", ""),
    ("LADLE_LISTEN", "127.0.0.1:8080"),
    ("LADLE_UPSTREAM_URL", ""),
    ("LADLE_UPSTREAM_API_KEY", ""),
    ("LADLE_UPSTREAM_PROXY", ""),
    ("LADLE_UPSTREAM_CONTINUATION", ""),
    ("LADLE_UPSTREAMS", ""),
    ("LADLE_UPSTREAM_CA_FILE", ""),
    ("LADLE_MODEL", ""),
    ("LADLE_PROMPTS_DIR", "./prompts"),
    ("LADLE_PROMPT_RELOAD_MS", "1000"),
    ("LADLE_ADMIN_TOKEN", ""),
    ("LADLE_CONNECT_TIMEOUT_MS", "5000"),
    ("LADLE_IDLE_TIMEOUT_MS", "30000"),
    ("LADLE_FIRST_OUTPUT_TIMEOUT_MS", "0"),
    ("LADLE_DEADLINE_MS", "120000"),
    ("LADLE_MIN_REMAINING_MS", "30000"),
    ("LADLE_MAX_ATTEMPTS", "5"),
    ("LADLE_BACKOFF_BASE_MS", "2000"),
    ("LADLE_BACKOFF_MAX_MS", "10000"),
    ("LADLE_BACKOFF_JITTER", "0"),
    ("LADLE_EARLY_RETRY_WINDOW_MS", "20000"),
    ("LADLE_MAX_CONTINUATIONS", "2"),
    ("LADLE_CONTINUE_MIN_REMAINING_MS", "10000"),
    ("LADLE_BUSY_KEYWORDS", super::DEFAULT_BUSY_KEYWORDS),
    ("LADLE_STREAM_KEEPALIVE_MS", "0"),
    ("LADLE_MAX_BODY_BYTES", "262144"),
    ("LADLE_MAX_ANSWER_BYTES", "4194304"),
    ("LADLE_MAX_INFLIGHT", "512"),
    ("LADLE_QUEUE_TIMEOUT_MS", "2000"),
    ("LADLE_LOG_FORMAT", "pretty"),
    ("LADLE_HEADER_READ_TIMEOUT_MS", "30000"),
    ("LADLE_BODY_READ_TIMEOUT_MS", "30000"),
    ("LADLE_WORKERS", "0"),
    ("LADLE_BREAKER", "auto"),
    ("LADLE_BREAKER_FAILURES", "5"),
    ("LADLE_BREAKER_ERROR_RATIO", "0.5"),
    ("LADLE_BREAKER_MIN_ATTEMPTS", "20"),
    ("LADLE_BREAKER_WINDOW_MS", "30000"),
    ("LADLE_BREAKER_OPEN_BASE_MS", "5000"),
    ("LADLE_BREAKER_OPEN_MS", "30000"),
    ("LADLE_RETRY_BUDGET_RATIO", "0.2"),
    ("LADLE_RETRY_BUDGET_MIN_PER_S", "10"),
    ("LADLE_RETRY_BUDGET_WINDOW_MS", "10000"),
    ("LADLE_IDEMPOTENCY_TTL_MS", "3600000"),
    ("LADLE_IDEMPOTENCY_MAX_ENTRIES", "10000"),
    ("LADLE_IDEMPOTENCY_MAX_BYTES", "67108864"),
    ("LADLE_REDIS_URL", ""),
    ("LADLE_REDIS_PREFIX", "ladle:"),
    ("LADLE_REDIS_LEASE_MS", "10000"),
    ("LADLE_STATE_DB", "ladle-state.db"),
    ("LADLE_STATE_MAX_BYTES", "1073741824"),
    ("LADLE_JOB_CONCURRENCY", "4"),
    ("LADLE_JOB_MAX_QUEUED", "10000"),
    ("LADLE_JOB_MAX_RUNS", "3"),
    ("LADLE_JOB_RETRY_MS", "300000"),
    ("LADLE_JOB_TTL_MS", "86400000"),
    ("LADLE_JOB_WEBHOOK_URL", ""),
    ("LADLE_JOB_WEBHOOK_SECRET", ""),
    ("LADLE_JOB_WEBHOOK_BACKOFF_MS", "1000"),
    ("LADLE_JOB_WEBHOOK_ATTEMPTS", "16"),
    ("LADLE_JOB_WEBHOOK_CONCURRENCY", "16"),
    ("LADLE_MAX_WAITERS", "10000"),
    ("LADLE_STREAM_TTL_MS", "900000"),
    ("LADLE_STREAM_MAX_BYTES", "67108864"),
    ("LADLE_STREAM_PROGRESS_MS", "2000"),
    ("LADLE_STREAM_STALL_MS", "45000"),
    ("LADLE_CACHE_MAX_ENTRIES", "10000"),
    ("LADLE_CLIENT_KEYS_FILE", ""),
];

/// The `LADLE_*` names among `names` that are no setting (typos, or settings of
/// another version), in the order given.
pub fn unknown_variables(names: impl IntoIterator<Item = String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|name| name.starts_with("LADLE_"))
        .filter(|name| !SETTINGS.iter().any(|(known, _)| known == name))
        .collect()
}

/// A value a setting's text parses into.
pub trait FromSetting: Sized {
    /// The value, or what is wrong with the text.
    fn from_setting(text: &str) -> Result<Self, String>;
}

/// A duration given in whole milliseconds.
pub struct Millis(pub Duration);

impl FromSetting for Millis {
    fn from_setting(text: &str) -> Result<Self, String> {
        u64::from_setting(text).map(|ms| Millis(Duration::from_millis(ms)))
    }
}

macro_rules! parsed {
    ($($t:ty),*) => {$(
        impl FromSetting for $t {
            fn from_setting(text: &str) -> Result<Self, String> {
                text.trim().parse().map_err(|e| format!("`{text}`: {e}"))
            }
        }
    )*};
}
parsed!(u32, u64, usize, f64, SocketAddr);

impl FromSetting for String {
    fn from_setting(text: &str) -> Result<Self, String> {
        Ok(text.to_owned())
    }
}

impl FromSetting for PathBuf {
    fn from_setting(text: &str) -> Result<Self, String> {
        Ok(PathBuf::from(text))
    }
}

/// Where raw setting values come from: the environment first, then the file.
pub struct Sources<'a> {
    pub file: toml::Table,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The file keys asked for, so that any other key can be refused.
    pub asked: RefCell<Vec<String>>,
}

impl Sources<'_> {
    /// The value given for `key` (environment, else file), if any.
    fn given(&self, key: &'static str) -> Result<Option<String>, ConfigError> {
        let file_key = file_key(key);
        let value = self.file.get(&file_key);
        self.asked.borrow_mut().push(file_key);
        if let Some(value) = (self.env)(key) {
            return Ok(Some(value));
        }
        match value {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(toml::Value::Integer(i)) => Ok(Some(i.to_string())),
            Some(toml::Value::Float(f)) => Ok(Some(f.to_string())),
            Some(toml::Value::Boolean(b)) => Ok(Some(b.to_string())),
            Some(_) => Err(invalid(key, "must be a string, a number or a boolean")),
        }
    }

    /// The setting's value, or its default from the table.
    pub fn get<T: FromSetting>(&self, key: &'static str) -> Result<T, ConfigError> {
        let text = match self.given(key)? {
            Some(text) => text,
            None => default_of(key)?.to_owned(),
        };
        T::from_setting(&text).map_err(|problem| invalid(key, problem))
    }

    /// A setting without a default: `None` when unset or blank.
    pub fn optional<T: FromSetting>(&self, key: &'static str) -> Result<Option<T>, ConfigError> {
        default_of(key)?;
        match self.given(key)?.filter(|v| !v.trim().is_empty()) {
            None => Ok(None),
            Some(text) => T::from_setting(text.trim())
                .map(Some)
                .map_err(|problem| invalid(key, problem)),
        }
    }

    /// A duration setting where 0 means off.
    pub fn millis_or_off(&self, key: &'static str) -> Result<Option<Duration>, ConfigError> {
        let Millis(value) = self.get(key)?;
        Ok(Some(value).filter(|d| !d.is_zero()))
    }

    /// A list setting: JSON text in the environment, an array in the file.
    pub fn list(&self, key: &'static str) -> Result<Option<serde_json::Value>, ConfigError> {
        let file_key = file_key(key);
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
}

/// The file key of a setting: its name without `LADLE_`, in lower case.
fn file_key(key: &str) -> String {
    key.trim_start_matches("LADLE_").to_ascii_lowercase()
}

fn default_of(key: &'static str) -> Result<&'static str, ConfigError> {
    SETTINGS
        .iter()
        .find(|(known, _)| *known == key)
        .map(|(_, default)| *default)
        .ok_or_else(|| invalid(key, "is not in the table of settings"))
}

/// An invalid value of `key`.
pub fn invalid(key: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        problem: problem.into(),
    }
}
