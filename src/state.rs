//! The shared state every handler may use, and how a request becomes a job for
//! the attempt loop.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::background::Background;
use crate::budget::redis::RedisBudget;
use crate::budget::redis::RedisBudgets;
use crate::cache::AnswerCache;
use crate::cache::redis::RedisCache;
use crate::cache::sqlite::SqliteCache;
use crate::clients::Clients;
use crate::config::settings::invalid;
use crate::config::{Config, ConfigError, StartError};
use crate::engine::breaker::{Breaker, State};
use crate::engine::budget::{Budget, RetryBudget};
use crate::engine::bulkhead::{Bulkhead, Bulkheads};
use crate::engine::completion::recent::Recent;
use crate::engine::completion::{SharedUpstreams, UpstreamGuards};
use crate::engine::metrics::Metrics;
use crate::engine::upstream::{ClientOptions, Upstream};
use crate::fleet::Redis;
use crate::idempotency::{IdempotencyStore, MemoryStore, RedisIdempotency};
use crate::jobs::JobStore;
use crate::jobs::events::JobEvents;
use crate::jobs::redis::RedisJobs;
use crate::jobs::runner::Runner;
use crate::jobs::sqlite::SqliteJobs;
use crate::prompts::{FileStore, PromptStore, RedisPrompts};
use crate::relay::CompletionRoute;
use crate::state_file::StateFile;

/// Everything a handler may use, shared: every request clones it (the router,
/// the middleware), and one count beats one per field.
#[derive(Clone)]
pub struct AppState(Arc<App>);

impl std::ops::Deref for AppState {
    type Target = App;

    fn deref(&self) -> &App {
        &self.0
    }
}

/// What [`AppState`] shares.
pub struct App {
    /// The validated configuration.
    pub config: Arc<Config>,
    /// Upstreams, limits and metrics shared by all completions.
    pub upstreams: Arc<SharedUpstreams>,
    /// The live prompts.
    pub prompts: Arc<dyn PromptStore>,
    /// The app's metrics.
    pub metrics: Metrics,
    /// Idempotency records.
    pub idempotency: Arc<dyn IdempotencyStore>,
    /// The fleet's Redis (`LADLE_REDIS_URL`), if replicas share state.
    pub redis: Option<Arc<Redis>>,
    /// The owner of every background task, drained at shutdown.
    pub background: Background,
    /// Background jobs: their store and this replica's runs of them.
    pub jobs: Runner,
    /// Kept task answers (contract 7.3).
    pub cache: Arc<dyn AnswerCache>,
    /// Client keys (`LADLE_CLIENT_KEYS_FILE`), when `/v1/*` needs them.
    pub clients: Option<Arc<Clients>>,
    /// The tasks' bulkheads (a prompt's `max_inflight`).
    pub tasks: Arc<Bulkheads>,
    /// With the fleet's Redis: the upstreams' shared budgets, for their rounds.
    pub redis_budgets: RedisBudgets,
}

/// The app, held without keeping it alive: what a loop the app owns holds of it.
pub struct WeakApp(std::sync::Weak<App>);

impl WeakApp {
    /// The app, while it is there.
    pub fn upgrade(&self) -> Option<AppState> {
        self.0.upgrade().map(AppState)
    }
}

impl axum::extract::FromRef<AppState> for Metrics {
    fn from_ref(app: &AppState) -> Metrics {
        app.metrics.clone()
    }
}

impl AppState {
    /// A handle on the app that does not keep it alive.
    pub fn downgrade(&self) -> WeakApp {
        WeakApp(Arc::downgrade(&self.0))
    }

    /// State for a config: its upstreams (`LADLE_UPSTREAMS`, or the single-upstream
    /// settings) with their clients built, and prompts from `LADLE_PROMPTS_DIR`.
    /// Nothing runs yet: `start` starts the background loops.
    pub fn new(config: Config) -> Result<Self, StartError> {
        let metrics = Metrics::new();
        // The completion routes' latency series show from the start.
        metrics.time_routes(&[
            CompletionRoute::CHAT,
            CompletionRoute::TASK,
            CompletionRoute::RESPONSES,
        ]);
        let background = Background::new();
        let redis = match &config.redis {
            Some(settings) => Some(Redis::new(settings, metrics.clone())?),
            None => None,
        };
        let (upstreams, redis_budgets) = shared_upstreams(&config, &metrics, redis.is_some())?;
        let (prompts, idempotency): (Arc<dyn PromptStore>, Arc<dyn IdempotencyStore>) = match &redis
        {
            Some(redis) => {
                let idempotency =
                    RedisIdempotency::new(redis.clone(), config.idempotency, &background);
                (
                    Arc::new(RedisPrompts::open(redis.clone(), &config.prompts_dir)),
                    Arc::new(idempotency),
                )
            }
            None => (
                Arc::new(FileStore::open(&config.prompts_dir)),
                Arc::new(MemoryStore::new(config.idempotency)),
            ),
        };
        let (jobs, cache) = kept_state(&config, &metrics, redis.as_ref())?;
        let metrics_for_tasks = metrics.clone();
        let clients = match &config.client_keys_file {
            Some(path) => Some(Arc::new(Clients::open(path, metrics.clone())?)),
            None => None,
        };
        Ok(AppState(Arc::new(App {
            config: Arc::new(config),
            upstreams,
            prompts,
            metrics,
            idempotency,
            redis,
            background,
            jobs,
            cache,
            clients,
            tasks: Arc::new(Bulkheads::new("task", metrics_for_tasks)),
            redis_budgets,
        })))
    }
}

/// What outlives a request: the job store with its runner, and the kept answers.
/// With the fleet's Redis they live there (and the state file is neither opened
/// nor locked); else both in the one state file.
fn kept_state(
    config: &Config,
    metrics: &Metrics,
    redis: Option<&Arc<Redis>>,
) -> Result<(Runner, Arc<dyn AnswerCache>), StartError> {
    let settings = &config.jobs;
    let webhooks = settings.webhook.is_some();
    let mut runner = settings.runner;
    let entries = config.cache_max_entries;
    let (jobs, cache): (Arc<dyn JobStore>, Arc<dyn AnswerCache>) = match redis {
        Some(redis) => {
            // One lease for the fleet's claims (`LADLE_REDIS_LEASE_MS`), as the
            // Redis handle has it.
            runner.lease = redis.lease();
            (
                Arc::new(RedisJobs::new(redis.clone(), webhooks, runner.ttl)),
                Arc::new(RedisCache::new(redis.clone(), entries)),
            )
        }
        None => {
            let file = StateFile::open(&settings.state_db)?;
            let (ttl, runs) = (runner.ttl, runner.max_runs);
            (
                Arc::new(SqliteJobs::in_file(
                    file.clone(),
                    webhooks,
                    ttl,
                    runs,
                    settings.state_max_bytes,
                    metrics.clone(),
                )?),
                Arc::new(SqliteCache::in_file(file, entries)?),
            )
        }
    };
    let events = JobEvents::new(jobs.clone(), settings.streams, redis.cloned());
    Ok((Runner::new(jobs, runner, metrics.clone(), events), cache))
}

/// The upstreams with their breakers and budgets (shared with the fleet when
/// `fleet`: those budgets come back too, for their sharing rounds).
fn shared_upstreams(
    config: &Config,
    metrics: &Metrics,
    fleet: bool,
) -> Result<(Arc<SharedUpstreams>, RedisBudgets), ConfigError> {
    let upstreams = build_upstreams(config)?;
    let breakers = config.breaker.applies(upstreams.len());
    let now = Instant::now();
    let mut redis_budgets = Vec::new();
    let bulkheads = Bulkheads::new("upstream", metrics.clone());
    let guards = upstreams
        .iter()
        .zip(&config.upstreams)
        .map(|(upstream, settings)| {
            metrics.register_upstream(&upstream.name);
            if breakers {
                metrics.breaker_state(&upstream.name, State::Closed.gauge());
            }
            let budget: Arc<Mutex<dyn Budget>> = if fleet {
                let shared = Arc::new(Mutex::new(RedisBudget::new(config.budget)));
                redis_budgets.push((upstream.name.clone(), shared.clone()));
                shared
            } else {
                Arc::new(Mutex::new(RetryBudget::new(config.budget)))
            };
            let breaker = breakers.then(|| Mutex::new(Breaker::new(config.breaker_settings, now)));
            let bulkhead = settings
                .max_inflight
                .map(|limit| bulkheads.of(&upstream.name, limit));
            UpstreamGuards {
                breaker,
                budget,
                bulkhead,
                recent: Recent::default(),
            }
        })
        .collect();
    let shared = SharedUpstreams {
        upstreams,
        guards,
        timeouts: config.timeouts,
        busy_keywords: config.busy_keywords.clone(),
        inflight: Bulkhead::global(
            u32::try_from(config.max_inflight).unwrap_or(u32::MAX),
            metrics.clone(),
        ),
        queue_timeout: config.queue_timeout,
        metrics: metrics.clone(),
    };
    Ok((Arc::new(shared), redis_budgets))
}

/// Every configured upstream with its client; an error names the upstream when
/// there are several, and is the setting's own message when there is one.
pub fn build_upstreams(config: &Config) -> Result<Vec<Arc<Upstream>>, ConfigError> {
    if config.upstreams.is_empty() {
        return Err(invalid(
            "LADLE_UPSTREAM_URL",
            "no upstream: set LADLE_UPSTREAM_URL or LADLE_UPSTREAMS",
        ));
    }
    let options = client_options(config);
    let several = config.upstreams.len() > 1;
    config
        .upstreams
        .iter()
        .map(|settings| {
            Upstream::new(settings, &options)
                .map(Arc::new)
                .map_err(|e| match several {
                    true => invalid(
                        "LADLE_UPSTREAMS",
                        format!("upstream `{}`: {e}", settings.name),
                    ),
                    false => ConfigError::from(e),
                })
        })
        .collect()
}

/// How the configuration says upstreams are reached, besides their URLs.
pub fn client_options(config: &Config) -> ClientOptions {
    ClientOptions {
        connect_timeout: config.connect_timeout,
        ca_file: config.upstream_ca_file.clone(),
        proxy: config.upstream_proxy.clone(),
        workers: config.worker_threads(),
        secrets: config.admin_token.iter().cloned().collect(),
    }
}
