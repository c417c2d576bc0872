//! The tests' settings: the fast config (every timeout scaled down to
//! milliseconds), the secrets the tests configure, and the upstream, breaker and
//! Redis settings that tests of several upstreams or replicas build on.

use std::path::Path;
use std::time::Duration;

use ladle::config::{Config, RedisSettings, Secret, UpstreamProxy, UpstreamSettings};
use ladle::engine::breaker::BreakerSettings;

use super::redis::RedisServer;

/// The API key the tests configure; it must never come back out.
pub const API_KEY: &str = "sk-test-abcdef123456";

/// The admin token a gateway started with the admin API has.
pub const ADMIN_TOKEN: &str = "admin-test-token-4242";

/// Config with timeouts scaled down so no test waits for seconds.
pub fn fast_config(prompts_dir: &Path) -> Config {
    let env = |key: &str| -> Option<String> {
        let value = match key {
            "LADLE_LISTEN" => "127.0.0.1:0",
            "LADLE_MODEL" => "test-model",
            "LADLE_UPSTREAM_API_KEY" => API_KEY,
            "LADLE_CONNECT_TIMEOUT_MS" => "300",
            "LADLE_IDLE_TIMEOUT_MS" => "300",
            "LADLE_DEADLINE_MS" => "3000",
            "LADLE_MIN_REMAINING_MS" => "500",
            "LADLE_BACKOFF_BASE_MS" => "20",
            "LADLE_BACKOFF_MAX_MS" => "100",
            "LADLE_EARLY_RETRY_WINDOW_MS" => "1000",
            "LADLE_CONTINUE_MIN_REMAINING_MS" => "300",
            "LADLE_QUEUE_TIMEOUT_MS" => "200",
            "LADLE_PROMPT_RELOAD_MS" => "50",
            // Every gateway of the test process keeps its jobs in memory.
            "LADLE_STATE_DB" => ":memory:",
            // The machine's own proxy variables never steer a test's upstream.
            "LADLE_UPSTREAM_PROXY" => "none",
            _ => return None,
        };
        Some(value.to_owned())
    };
    let mut config = Config::load(None, &env).expect("test config is valid");
    config.prompts_dir = prompts_dir.to_path_buf();
    config
}

/// An upstream of a list, with the tests' key and no proxy.
pub fn upstream(name: &str, url: &str, priority: u32, weight: u32) -> UpstreamSettings {
    UpstreamSettings {
        name: name.to_owned(),
        priority,
        weight,
        ..UpstreamSettings::single(url, Secret::new(API_KEY), UpstreamProxy::Off)
    }
}

/// Upstream `a` first (priority 0) and `b` behind it (priority 1).
pub fn primary_and_backup(a: &str, b: &str) -> Vec<UpstreamSettings> {
    vec![upstream("a", a, 0, 1), upstream("b", b, 1, 1)]
}

/// A breaker that opens after `failures` in a row (never on the failed share)
/// and stays open `open_ms` every time.
pub fn breaker(failures: u32, open_ms: u64) -> BreakerSettings {
    BreakerSettings {
        failures,
        error_ratio: 1.0,
        min_attempts: 1000,
        window: Duration::from_secs(30),
        open_base: Duration::from_millis(open_ms),
        open_max: Duration::from_millis(open_ms),
    }
}

/// The settings every replica of a test shares: the Redis, a short claim lease.
pub fn redis_settings(redis: &RedisServer) -> RedisSettings {
    RedisSettings {
        url: Secret::new(redis.url()),
        prefix: "ladle:".into(),
        lease: Duration::from_millis(600),
    }
}

/// Back-offs of `ms` each, base and cap alike.
pub fn back_offs(ms: u64) -> impl FnOnce(&mut Config) + Send + 'static {
    move |config| {
        config.retry.backoff_base = Duration::from_millis(ms);
        config.retry.backoff_max = Duration::from_millis(ms);
    }
}

/// Back-offs long enough (300 ms) that a fallback made at once is plain to see,
/// with 500 ms kept for the last attempt.
pub fn long_back_offs(config: &mut Config) {
    back_offs(300)(config);
    config.retry.min_remaining = Duration::from_millis(500);
}
