//! The cache around one task's completion (contract 7.3's table): a kept answer
//! younger than `ttl_ms` answers at once and the completion is never made (no
//! slot, no upstream call); otherwise the completion runs, its `200` is kept, and
//! a retryable error gives way to a kept answer younger than `stale_if_error_ms`.
//! Every answer says which it was (`Finished::cache`), and so do the metric and
//! the request's log line.

use std::sync::Arc;

use futures_util::future::{Either, ready};
use futures_util::stream::{self, BoxStream};
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

use super::{AnswerCache, AnswerKey, CacheControl, CachePolicy, Kept, MAX_KEPT_BYTES};
use crate::engine::completion::{Cached, Finished, Progress};
use crate::engine::metrics::Metrics;
use crate::error::ApiError;
use crate::kept::{KeptAnswer, Named};
use crate::ops::facts::LateWord;
use crate::wall::unix_millis;

/// What the cache does for one task request.
#[derive(Clone)]
pub struct CacheUse {
    /// Where kept answers live.
    pub cache: Arc<dyn AnswerCache>,
    /// What this request's answer is kept under.
    pub key: AnswerKey,
    /// The task's `[cache]`.
    pub policy: CachePolicy,
    /// The request's `Cache-Control`.
    pub control: CacheControl,
    /// Where `ladle_cache_total` is counted.
    pub metrics: Metrics,
    /// When the request arrived: a kept answer's `elapsed_ms` runs from here.
    pub arrived: Instant,
    /// The request's id: a new answer is kept under it.
    pub request_id: String,
    /// Where the request's log line learns what the cache did.
    pub seen: LateWord,
}

/// The progress of a task request under `using`: a hit, or `run`'s progress
/// with its answer kept and a stale answer instead of a retryable error.
pub fn serve<S>(
    using: CacheUse,
    run: impl FnOnce() -> S + Send + 'static,
) -> BoxStream<'static, Progress>
where
    S: Stream<Item = Progress> + Send + 'static,
{
    let looked_up = async move {
        let kept = match using.control.no_store {
            true => None,
            false => using.cache.get(&using.key).await.ok().flatten(),
        };
        let now = unix_millis();
        if let Some(kept) = &kept
            && !using.control.no_cache
            && kept.age(now) < using.policy.ttl_ms
        {
            let hit = Cached::Hit { at: kept.made_at };
            let answer = kept_answer(kept, hit, 0, using.arrived);
            using.tell(hit);
            return stream::once(ready(Progress::Finished(answer))).boxed();
        }
        let stale = kept.filter(|k| k.age(now) < using.policy.stale_if_error_ms);
        around_run(Arc::new(using), stale, run()).boxed()
    };
    stream::once(looked_up).flatten().boxed()
}

/// `run`'s progress, its end seen by the cache.
fn around_run(
    using: Arc<CacheUse>,
    stale: Option<Arc<Kept>>,
    run: impl Stream<Item = Progress> + Send + 'static,
) -> impl Stream<Item = Progress> + Send + 'static {
    let mut attempts = 0;
    run.then(move |step| match step {
        Progress::Attempt(n) => {
            attempts = n;
            Either::Left(ready(step))
        }
        Progress::Finished(finished) => {
            let using = using.clone();
            Either::Right(async move { Progress::Finished(using.keep(finished).await) })
        }
        Progress::Failed(gave_up) => {
            let retryable = ApiError::from(gave_up.clone()).retryable();
            let answer = match &stale {
                Some(kept) if retryable => {
                    let cached = Cached::Stale { at: kept.made_at };
                    using.tell(cached);
                    Progress::Finished(kept_answer(kept, cached, attempts, using.arrived))
                }
                _ => {
                    using.tell(Cached::Miss);
                    Progress::Failed(gave_up)
                }
            };
            Either::Left(ready(answer))
        }
        other => Either::Left(ready(other)),
    })
}

impl CacheUse {
    /// A new answer, kept (unless `no-store`, or it is too large) and said to be
    /// a miss.
    async fn keep(&self, mut finished: Box<Finished>) -> Box<Finished> {
        finished.cache = Some(Cached::Miss);
        self.tell(Cached::Miss);
        if finished.output.is_none() || self.control.no_store {
            return finished;
        }
        let made_at = unix_millis();
        let named = Named {
            request_id: self.request_id.clone(),
            created: made_at / 1000,
            response_id: None,
        };
        let kept = Kept {
            request: self.key.request.clone(),
            made_at,
            answer: KeptAnswer::new(&finished, named),
        };
        if kept.encode().len() <= MAX_KEPT_BYTES {
            // A store that cannot keep it loses a later hit, never this answer.
            let put = self.cache.put(&self.key, &kept, self.policy.longest());
            if let Err(down) = put.await {
                tracing::error!(task = %self.key.task, error = %down, "an answer was not kept: the cache's write was lost");
            }
        }
        finished
    }

    /// Counts what the cache did and tells the request's log line.
    fn tell(&self, cached: Cached) {
        self.metrics.cache(&self.key.task, cached.name());
        self.seen.set(cached.name());
    }
}

/// A kept answer as this request's: its output, model and upstream; this
/// request's attempts and time; no usage (this request spent no tokens on it).
fn kept_answer(kept: &Kept, cached: Cached, attempts: u32, arrived: Instant) -> Box<Finished> {
    Box::new(Finished {
        usage: None,
        attempts,
        elapsed: arrived.elapsed(),
        cache: Some(cached),
        ..kept.answer.finished()
    })
}
