//! A response made without `background` and stored (contract 12's `store`,
//! the default): kept with the jobs, as a job that is over already, when its
//! completion ends, so that it can be retrieved, named by a later
//! `previous_response_id` on any replica, and deleted. It is written before its
//! end goes out (the JSON, or the last event), so a caller that goes on from
//! it at once finds it. A store that cannot take it costs the caller nothing:
//! the answer is made and paid for, so it goes out, and the miss is logged.

use std::sync::Arc;

use futures_util::future::Either;
use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};

use super::RESPONSES_TASK;
use crate::engine::completion::Progress;
use crate::error::ApiError;
use crate::jobs::{Job, JobRequest, JobStatus, JobStore, record};
use crate::relay::responses::Made;
use crate::relay::responses::object::job_id;
use crate::wall::unix_millis;

/// A response to keep when it ends.
#[derive(Clone)]
pub struct ToKeep {
    made: Arc<Made>,
    /// What its job keeps of the request (`Made::stored`).
    stored: Value,
    /// The client key's name: the response is its own.
    client: String,
}

impl ToKeep {
    /// Keeps `made`, asked as `stored`, for `client`.
    pub fn new(made: Arc<Made>, stored: Value, client: String) -> ToKeep {
        ToKeep {
            made,
            stored,
            client,
        }
    }

    /// The finished job the response is kept as.
    fn job(&self, end: &Progress) -> Option<Job> {
        let (status, result, error) = match end {
            Progress::Finished(finished) => (
                JobStatus::Succeeded,
                Some(self.made.finished(finished)),
                None,
            ),
            Progress::Failed(gave_up) => {
                let body = ApiError::from(gave_up.clone()).body("");
                (JobStatus::Failed, None, Some(body["error"].clone()))
            }
            _ => return None,
        };
        let now = unix_millis();
        Some(Job {
            id: job_id(&self.made.id)?,
            client: self.client.clone(),
            status,
            runs: 1,
            created_at: self.made.created_at * 1000,
            updated_at: now,
            next_run_at: None,
            request: JobRequest {
                v: record::VERSION,
                task: RESPONSES_TASK.to_owned(),
                variables: Map::new(),
                timeout_ms: None,
                cache_control: None,
                response: Some(self.stored.clone()),
            },
            result,
            error,
            delivery: None,
            run_id: None,
            key: None,
            final_event: None,
        })
    }

    /// Writes the response as `end` left it.
    async fn keep(&self, store: &dyn JobStore, end: &Progress) {
        let Some(job) = self.job(end) else { return };
        let id = &self.made.id;
        match store.keep_finished(job).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                response_id = %id,
                "the response was not stored: the state file is at LADLE_STATE_MAX_BYTES"
            ),
            Err(down) => {
                tracing::warn!(response_id = %id, error = %down, "the response was not stored")
            }
        }
    }
}

/// `progress`, with `keep`'s response written before its end goes on.
pub fn keeping(
    store: Arc<dyn JobStore>,
    keep: Option<ToKeep>,
    progress: impl Stream<Item = Progress> + Send + 'static,
) -> impl Stream<Item = Progress> + Send + 'static {
    let Some(keep) = keep else {
        return Either::Left(progress);
    };
    Either::Right(progress.then(move |step| {
        // Only the end is kept: a chunk passes for the price of a match.
        let ends = matches!(step, Progress::Finished(_) | Progress::Failed(_));
        let keeping = ends.then(|| (store.clone(), keep.clone()));
        async move {
            if let Some((store, keep)) = keeping {
                keep.keep(store.as_ref(), &step).await;
            }
            step
        }
    }))
}
