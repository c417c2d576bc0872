//! Serving the app: the accept loops (one per worker thread), graceful drain on
//! shutdown, and the background work (`Background`) drained after the
//! connections. `accept` is one accept loop on hyper.

mod accept;
pub mod connection;

pub use accept::MAX_HEAD;

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::app::app;
use crate::state::AppState;

/// Time allowed after the longest deadline for the last bytes to be written.
const DRAIN_SLACK: Duration = Duration::from_secs(5);

/// Starts the app's background loops (`AppState::start`), serves until
/// `shutdown` resolves, then stops accepting and lets running requests finish,
/// for at most the longest request deadline (plus a little), and drains the
/// loops.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    state.start().map_err(std::io::Error::other)?;
    let background = state.background.clone();
    let drain = longest_deadline(&state) + DRAIN_SLACK;
    // At the signal, no job run starts here any more; the ones going finish.
    let jobs = state.jobs.clone();
    let shutdown = async move {
        shutdown.await;
        jobs.stop_claiming();
    };
    let result = serve_connections(listener, state, shutdown).await;
    // Job runs that began before the signal finish within their deadline.
    if !background.drain(drain).await {
        tracing::warn!("background work still running after the drain limit is dropped");
    }
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
                crate::engine::upstream::on_worker_thread(index);
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
    accept::run(
        listener,
        app(state),
        header_read_timeout,
        shutdown,
        drain_limit,
    )
    .await
}

/// The longest deadline any request can have now: chat's, or a task's own.
fn longest_deadline(state: &AppState) -> Duration {
    state
        .prompts
        .list()
        .iter()
        .filter_map(|(prompt, _)| prompt.deadline)
        .fold(state.config.deadline, Duration::max)
}
