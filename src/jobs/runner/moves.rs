//! A change of a job's status, as this replica made it: its log line, its
//! `job` event (contract 11.1) and, for a job that just finished, its count.

use super::Shared;
use crate::jobs::{JobStatus, Moved};
use crate::ops::telemetry::NULL;

/// Counts a job that just finished.
pub(super) fn note_finished(shared: &Shared, moved: &Moved) {
    if moved.job.status.finished() && moved.from.is_some_and(|from| !from.finished()) {
        let job = &moved.job;
        shared
            .metrics
            .job_finished(&job.request.task, job.status.name());
    }
}

/// A change of a job's status: its log line and its `job` event. A run cut by a
/// crash and queued again makes no event: the re-run's `running` event follows
/// the cut run's events directly (contract 11.1).
pub(super) async fn note_move(shared: &Shared, moved: &Moved) {
    log_move(moved);
    let cut = moved.from == Some(JobStatus::Running) && moved.job.status == JobStatus::Queued;
    if !cut {
        shared.events.job_changed(&moved.job).await;
    }
}

/// One log line per change of a job's status.
fn log_move(moved: &Moved) {
    let job = &moved.job;
    let to = job.status.name();
    match moved.from {
        Some(from) => {
            tracing::info!(job_id = %job.id, task = %job.request.task, from = from.name(), to, runs = job.runs, "job status changed")
        }
        None => {
            tracing::info!(job_id = %job.id, task = %job.request.task, from = NULL, to, runs = job.runs, "job status changed")
        }
    }
}
