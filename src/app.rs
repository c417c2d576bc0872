//! Wiring: the shared state, the router with its layers, and serving.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderName, Request, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures_util::Stream;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder};
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};

use crate::completion::{Completion, Engine, Job, Progress};
use crate::config::Config;
use crate::ops::metrics::Metrics;
use crate::ops::observe::ObserveLayer;
use crate::ops::request_body::Bounds;
use crate::ops::request_id::{HEADER, MakeIds, RequestId};
use crate::prompts::{FileStore, Prompt, PromptStore};
use crate::retry::{Deadline, RetryPolicy};
use crate::routes;
use crate::upstream::{ClientOptions, Upstream};

/// Everything a handler may use.
#[derive(Clone)]
pub struct AppState {
    /// The validated configuration.
    pub config: Arc<Config>,
    /// Upstreams, limits and metrics shared by all completions.
    pub engine: Arc<Engine>,
    /// The live prompts.
    pub prompts: Arc<dyn PromptStore>,
    /// The app's metrics.
    pub metrics: Metrics,
}

impl axum::extract::FromRef<AppState> for Metrics {
    fn from_ref(app: &AppState) -> Metrics {
        app.metrics.clone()
    }
}

impl AppState {
    /// State for a config, with the upstream from `LADLE_UPSTREAM_URL` (or the one
    /// given) and prompts from `LADLE_PROMPTS_DIR`.
    pub fn new(config: Config, upstream_url: &str) -> Result<Self, String> {
        let upstream = Upstream::new(
            "default",
            upstream_url,
            config.upstream_api_key.clone(),
            &ClientOptions::from_config(&config),
        )?;
        let metrics = Metrics::new();
        let engine = Engine {
            upstreams: vec![Arc::new(upstream)],
            idle_timeout: config.idle_timeout,
            busy_keywords: config.busy_keywords.clone(),
            inflight: Arc::new(Semaphore::new(config.max_inflight)),
            queue_timeout: config.queue_timeout,
            metrics: metrics.clone(),
        };
        let prompts: Arc<dyn PromptStore> = Arc::new(FileStore::open(&config.prompts_dir));
        Ok(AppState {
            config: Arc::new(config),
            engine: Arc::new(engine),
            prompts,
            metrics,
        })
    }

    /// A job for the attempt loop: the chat route's settings, or a task's own
    /// deadline, reserve and output kind. The deadline runs from the request's arrival.
    pub fn job(
        &self,
        arrived: Instant,
        request_id: &RequestId,
        body: Bytes,
        model: &str,
        task: Option<&Prompt>,
    ) -> Job {
        let config = &self.config;
        let policy = RetryPolicy {
            max_attempts: config.max_attempts,
            backoff_base: config.backoff_base,
            backoff_max: config.backoff_max,
            early_retry_window: config.early_retry_window,
            min_remaining: task
                .and_then(|t| t.min_remaining)
                .unwrap_or(config.min_remaining),
            retry_after_output: true,
        };
        let budget = task.and_then(|t| t.deadline).unwrap_or(config.deadline);
        Job {
            body,
            policy,
            deadline: Deadline::after(arrived, budget),
            output: task.map(|t| t.output),
            request_id: request_id.to_string(),
            task: task.map(|t| t.name.clone()),
            wants_meta: true,
            model: model.to_owned(),
        }
    }

    /// Starts a completion; it runs as its stream is polled.
    pub fn complete(&self, job: Job) -> impl Stream<Item = Progress> + Send + 'static {
        Completion::new(self.engine.clone(), job).into_stream()
    }
}

/// The whole service: the router inside the layers that need no route.
///
/// Layers given to `Router::layer` wrap each route one by one, boxed, and axum
/// clones a route's whole boxed stack for every request: with five layers that was
/// 24 allocations per request. Only the observer needs the matched route, so only
/// it is a router layer; the rest wrap the router once.
pub fn app(
    state: AppState,
) -> impl Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Send + 'static,
> + Clone
+ Send
+ 'static {
    let request_id = HeaderName::from_static(HEADER);
    ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(request_id.clone(), MakeIds::new()))
        .layer(PropagateRequestIdLayer::new(request_id))
        .service(router(state))
}

/// Every route, each observed.
fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(routes::chat::completions))
        .route("/v1/tasks/{name}", post(routes::tasks::run))
        .route("/healthz", get(routes::ops::healthz))
        .route("/readyz", get(routes::ops::readyz))
        .route("/metrics", get(routes::ops::metrics))
        .merge(routes::admin::router())
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::not_found)
        .layer(ObserveLayer::new(
            state.metrics.clone(),
            Bounds {
                budget: state.config.body_read_timeout,
                max_bytes: state.config.max_body_bytes,
            },
        ))
        .with_state(state)
}

/// Time allowed after the longest deadline for the last bytes to be written.
const DRAIN_SLACK: Duration = Duration::from_secs(5);

/// Serves until `shutdown` resolves, then stops accepting and lets running
/// requests finish, for at most the longest request deadline (plus a little).
/// Prompts are reloaded in the background meanwhile.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let prompts = state.prompts.clone();
    let every = state.config.prompt_reload;
    let reload = tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let prompts = prompts.clone();
            // File reads block; keep them off the async workers.
            let _ = tokio::task::spawn_blocking(move || prompts.refresh()).await;
        }
    });
    let result = serve_connections(listener, state, shutdown).await;
    reload.abort();
    result
}

/// Serves on `workers` threads, each with a single-threaded runtime of its own
/// and its own accept loop on the shared (non-blocking) listener, as nginx runs worker
/// processes: a connection, its request and its upstream socket stay on one
/// thread, so relaying a chunk never hands work to another thread. The calling
/// thread is worker 0; it also reloads prompts and waits for the future that
/// `shutdown` makes inside its runtime.
pub fn serve_on_threads<F>(
    listener: std::net::TcpListener,
    state: AppState,
    workers: usize,
    shutdown: impl FnOnce() -> F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut threads = Vec::new();
    for index in 1..workers.max(1) {
        let (listener, state, mut stopped) =
            (listener.try_clone()?, state.clone(), stopped.clone());
        let thread = std::thread::Builder::new()
            .name(format!("ladle-worker-{index}"))
            .spawn(move || {
                crate::upstream::on_worker_thread(index);
                single_threaded()?.block_on(async move {
                    let shutdown = async move {
                        let _ = stopped.wait_for(|stop| *stop).await;
                    };
                    serve_connections(TcpListener::from_std(listener)?, state, shutdown).await
                })
            })?;
        threads.push(thread);
    }
    let runtime = single_threaded()?;
    let signalled = {
        let _inside = runtime.enter();
        shutdown()
    };
    let result = runtime.block_on(async move {
        let shutdown = async move {
            signalled.await;
            let _ = stop.send(true);
        };
        serve(TcpListener::from_std(listener)?, state, shutdown).await
    });
    for thread in threads {
        match thread.join() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::error!(%error, "a worker thread failed"),
            Err(_) => tracing::error!("a worker thread panicked"),
        }
    }
    result
}

fn single_threaded() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// One accept loop with its graceful drain.
async fn serve_connections(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let header_read_timeout = state.config.header_read_timeout;
    let drain_limit = {
        let state = state.clone();
        move || longest_deadline(&state) + DRAIN_SLACK
    };
    crate::server::run(
        listener,
        app(state),
        header_read_timeout,
        shutdown,
        drain_limit,
    )
    .await
}

/// The longest budget any request can have now: chat's, or a task's own.
fn longest_deadline(state: &AppState) -> Duration {
    state
        .prompts
        .list()
        .iter()
        .filter_map(|(prompt, _)| prompt.deadline)
        .fold(state.config.deadline, Duration::max)
}
