//! A keyed request's run, detached from its client: it goes on for the repeats
//! that wait on it if its own client leaves, and stops once neither its client nor
//! any waiter is left. The one place a completion runs as a task of its own.

use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::{Kept, RunSlot};
use crate::background::Background;
use crate::engine::completion::{Finished, Progress};
use crate::error::ApiError;

/// Progress steps buffered for a slow client before the run waits for it.
const BUFFER: usize = 64;

/// Runs `progress` as a task of `background` (so a shutdown waits for it); the
/// returned stream relays its steps to this request's client. `keep` turns a
/// success into what is kept for repeats, or the error they get when it
/// cannot be kept whole.
pub fn detached(
    progress: impl Stream<Item = Progress> + Send + 'static,
    slot: Box<dyn RunSlot>,
    keep: impl FnOnce(&Finished) -> Result<Kept, ApiError> + Send + 'static,
    background: &Background,
) -> impl Stream<Item = Progress> + Send + 'static {
    let (to_client, from_run) = mpsc::channel(BUFFER);
    let watcher = to_client.clone();
    let unwatched = slot.unwatched();
    drop(background.spawn(async move {
        // Resolves once the client has left and no repeat waits.
        let nobody = async move {
            watcher.closed().await;
            unwatched.await;
        };
        let mut nobody = std::pin::pin!(nobody);
        let mut progress = std::pin::pin!(progress);
        let (mut slot, mut keep, mut to_client) = (Some(slot), Some(keep), Some(to_client));
        let mut attempts = 0;
        loop {
            let step = tokio::select! {
                step = progress.next() => step,
                () = &mut nobody => break,
            };
            let Some(step) = step else { break };
            match &step {
                Progress::Attempt(n) => attempts = *n,
                Progress::Finished(finished) => {
                    if let (Some(slot), Some(keep)) = (slot.take(), keep.take()) {
                        match keep(finished) {
                            Ok(body) => slot.succeed(Arc::new(body)).await,
                            Err(error) => slot.fail(error, attempts).await,
                        }
                    }
                }
                Progress::Failed(gave_up) => {
                    if let Some(slot) = slot.take() {
                        slot.fail(ApiError::from(gave_up.clone()), attempts).await;
                    }
                }
                _ => {}
            }
            if let Some(client) = &to_client
                && client.send(step).await.is_err()
            {
                to_client = None;
            }
        }
    }));
    futures_util::stream::unfold(from_run, |mut from_run| async move {
        from_run.recv().await.map(|step| (step, from_run))
    })
}
