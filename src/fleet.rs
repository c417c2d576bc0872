//! The fleet's Redis (contract 6.7): one connection handle and its health, which
//! every concept's Redis variant uses (`prompts::redis`, `idempotency::redis`,
//! `budget::redis`). Breakers, the queue and metrics stay per replica.
//!
//! Redis is never on the way of a request that does not need it, and never a
//! reason for one to fail: every call has a timeout, and each shared store keeps a
//! local copy (prompts) or falls back to memory (idempotency, budgets) while
//! Redis is unreachable. `Redis::call` is the one place calls are made, so the
//! health flag, `ladle_redis_up` and `ladle_redis_errors_total` see every one.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::background::{Background, Continue};
use crate::config::settings::invalid;
use crate::config::{RedisSettings, StartError};
use crate::engine::metrics::Metrics;
use crate::wall::unix_millis;

/// Longest wait for one Redis call: short next to any request's budget, long
/// next to a round trip on a loopback or LAN.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Why a Redis call gave nothing back.
#[derive(Debug, thiserror::Error)]
pub enum RedisDown {
    /// Redis answered with an error, or the connection failed.
    #[error("redis call failed: {0}")]
    Failed(#[from] redis::RedisError),
    /// No answer within the call's time.
    #[error("redis call timed out")]
    TimedOut,
}

/// The fleet's Redis: one multiplexed connection that reconnects by itself, with
/// a runtime thread of its own for the background loops that keep the shared
/// state in step (so they never ride on a worker serving requests) and for the
/// admin API's blocking pool. Calls are made from whichever runtime needs them;
/// the crate drives a connection from the runtime that (re)opened it, which
/// lives as long as the process serves.
pub struct Redis {
    connection: ConnectionManager,
    prefix: String,
    lease: Duration,
    up: AtomicBool,
    /// When a call last failed (Unix milliseconds).
    failed_at: AtomicU64,
    metrics: Metrics,
    runtime: tokio::runtime::Handle,
    /// Dropped with the handle, which ends the runtime's thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Redis {
    /// The metrics its calls are counted in.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// A handle that connects on first use, so an unreachable Redis does not stop
    /// start-up (6.7).
    pub fn new(settings: &RedisSettings, metrics: Metrics) -> Result<Arc<Redis>, StartError> {
        // The crate's messages may quote the URL; say what failed instead.
        let client = redis::Client::open(settings.url.expose())
            .map_err(|_| invalid("LADLE_REDIS_URL", "not a usable redis:// URL"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(CALL_TIMEOUT);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| StartError::Runtime {
                what: "the redis runtime",
                source,
            })?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("ladle-redis".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let _ = stopped.await;
                });
            })
            .map_err(|source| StartError::Runtime {
                what: "the redis thread",
                source,
            })?;
        let connection = {
            let _inside = handle.enter();
            ConnectionManager::new_lazy_with_config(client, config)
                .map_err(|_| invalid("LADLE_REDIS_URL", "cannot set up a connection"))?
        };
        metrics.redis_up(false);
        Ok(Arc::new(Redis {
            connection,
            prefix: settings.prefix.clone(),
            lease: settings.lease,
            up: AtomicBool::new(false),
            failed_at: AtomicU64::new(0),
            metrics,
            runtime: handle,
            _stop: stop,
        }))
    }

    /// The Redis runtime, where the background work that keeps shared state in
    /// step runs (spawned through `Background`, which owns it).
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// Waits for `work` from a thread outside every runtime (the blocking pool).
    pub fn block_on<T>(&self, work: impl Future<Output = T>) -> T {
        self.runtime.block_on(work)
    }

    /// A key under the fleet's prefix.
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Whether the last call got an answer.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Whether a request should ask Redis: yes while it answers, and once a
    /// second while it does not (the background loops notice its return sooner),
    /// so an outage does not cost every keyed request a timeout.
    pub fn worth_trying(&self) -> bool {
        self.is_up() || unix_millis().saturating_sub(self.failed_at.load(Ordering::Relaxed)) > 1_000
    }

    /// Whether a call failed to reach Redis within the last `span`.
    pub fn unreachable_within(&self, span: Duration) -> bool {
        let failed = self.failed_at.load(Ordering::Relaxed);
        failed != 0 && unix_millis().saturating_sub(failed) < span.as_millis() as u64
    }

    /// How long an idempotency claim lives without renewal.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Makes one call (`op` names it in metrics and logs) within `limit` (at most
    /// `CALL_TIMEOUT`), and records whether Redis answered. Only a call given the
    /// whole `CALL_TIMEOUT` can find Redis slow: one cut short by its request's
    /// deadline says nothing about Redis.
    pub async fn call<T, F, Fut>(
        &self,
        op: &'static str,
        limit: Duration,
        f: F,
    ) -> Result<T, RedisDown>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let answer =
            tokio::time::timeout(limit.min(CALL_TIMEOUT), f(self.connection.clone())).await;
        // Whether Redis was reached: a script or type error is an answer; a
        // timeout shorter than `CALL_TIMEOUT` tells nothing.
        let reached = match &answer {
            Ok(Ok(_)) => Some(true),
            Ok(Err(error)) => Some(!is_connection_error(error)),
            Err(_) => (limit >= CALL_TIMEOUT).then_some(false),
        };
        let answer = match answer {
            Ok(result) => result.map_err(RedisDown::Failed),
            Err(_) => Err(RedisDown::TimedOut),
        };
        if answer.is_err() {
            self.metrics.redis_error(op);
        }
        match reached {
            Some(true) => self.mark(op, None),
            Some(false) => {
                self.failed_at.store(unix_millis(), Ordering::Relaxed);
                self.mark(op, answer.as_ref().err());
            }
            None => {}
        }
        answer
    }

    /// Whether this Redis keeps what it is told across its own restart: its
    /// append-only file is on (`INFO persistence`). Snapshots alone lose what
    /// came after the last one, and no persistence loses every job. `None` when it
    /// cannot be asked.
    pub async fn persistent(&self) -> Option<bool> {
        let info: String = self
            .call("info_persistence", CALL_TIMEOUT, |mut c| async move {
                redis::cmd("INFO")
                    .arg("persistence")
                    .query_async(&mut c)
                    .await
            })
            .await
            .ok()?;
        Some(info.lines().any(|line| line.trim() == "aof_enabled:1"))
    }

    /// Records reachability (`down`: why Redis was not reached); a change is one
    /// log line and the gauge.
    fn mark(&self, op: &'static str, down: Option<&RedisDown>) {
        if self.up.swap(down.is_none(), Ordering::Relaxed) == down.is_none() {
            return;
        }
        self.metrics.redis_up(down.is_none());
        match down {
            None => tracing::info!(op, "redis reachable: replicas share state"),
            // The error names what failed (refused, timed out), never the URL.
            Some(error) => tracing::warn!(
                op,
                error = %error,
                "redis unreachable: serving from local copies and memory"
            ),
        }
    }
}

fn is_connection_error(error: &redis::RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_unrecoverable_error()
}

/// How often the fleet's Redis is asked whether it persists: a Redis restarted with
/// another configuration is seen within this.
const PERSISTENCE_EVERY: Duration = Duration::from_secs(10);

/// Asks the fleet's Redis at start, and every `PERSISTENCE_EVERY`, whether it keeps
/// jobs across its own restart: `ladle_redis_persistent` says so, and a Redis
/// without its append-only file gets a `WARN` line naming the risk (once per
/// change, a reconnect to another Redis included).
pub fn watch_persistence(redis: Arc<Redis>, background: &Background) {
    let told = Arc::new(std::sync::Mutex::new(None::<bool>));
    let runtime = redis.runtime.clone();
    background.every(PERSISTENCE_EVERY, Some(&runtime), move || {
        let (redis, told) = (redis.clone(), told.clone());
        async move {
            let Some(persistent) = redis.persistent().await else {
                return Continue::Yes;
            };
            redis.metrics.redis_persistent(persistent);
            let mut told = told
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *told != Some(persistent) && !persistent {
                tracing::warn!(
                    "redis has no append-only file (appendonly no): a restart of it loses \
                     every job, idempotency key and kept answer it holds; set \
                     `appendonly yes` (docs/operations.md)"
                );
            }
            *told = Some(persistent);
            Continue::Yes
        }
    });
}
