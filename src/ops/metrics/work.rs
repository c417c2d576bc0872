//! The counters of work that outlives a request (contract 7.4): jobs, their runs,
//! webhooks and the answer cache.

use metrics::{Key, Label, Recorder};

use super::{METADATA, Metrics};

impl Metrics {
    /// Sets `ladle_jobs{status}` for the unfinished statuses.
    pub fn job_counts(&self, queued: u64, running: u64, retry_wait: u64) {
        for (status, count) in [
            ("queued", queued),
            ("running", running),
            ("retry_wait", retry_wait),
        ] {
            let key = Key::from_parts("ladle_jobs", vec![Label::new("status", status)]);
            let gauge = self.inner.recorder.register_gauge(&key, &METADATA);
            gauge.set(count as f64);
        }
    }

    /// Counts a job that finished, by task and status.
    pub fn job_finished(&self, task: &str, status: &'static str) {
        self.task_counter("ladle_jobs_finished_total", task, ("status", status));
    }

    /// Counts a job's run by task and how it ended (`2xx`, `4xx`, `5xx`,
    /// `canceled`, `interrupted`).
    pub fn job_run(&self, task: &str, outcome: &'static str) {
        self.task_counter("ladle_job_runs_total", task, ("outcome", outcome));
    }

    /// Counts a cached task's answer by what the cache did (`hit`, `miss`,
    /// `stale`).
    /// The task's other outcomes are shown (at 0) from its first answer on, so
    /// a hit or stale ratio has both of its sides.
    pub fn cache(&self, task: &str, outcome: &'static str) {
        for other in ["hit", "miss", "stale"] {
            let by = u64::from(other == outcome);
            self.task_counter_by("ladle_cache_total", task, ("outcome", other), by);
        }
    }

    /// Adds one to `name{task, label}`, the task's name bounded.
    fn task_counter(&self, name: &'static str, task: &str, label: (&'static str, &'static str)) {
        self.task_counter_by(name, task, label, 1);
    }

    /// Adds `by` to `name{task, label}`, the task's name bounded.
    fn task_counter_by(
        &self,
        name: &'static str,
        task: &str,
        (key, value): (&'static str, &'static str),
        by: u64,
    ) {
        let task = self.inner.bounded.value(name, "task", task);
        let labels = vec![Label::new("task", task), Label::new(key, value)];
        self.labelled_counter(name, labels).increment(by);
    }

    /// Counts a webhook attempt by what it led to (`delivered`, `retry`, `failed`).
    pub fn webhook(&self, outcome: &'static str) {
        let labels = vec![Label::new("outcome", outcome)];
        self.labelled_counter("ladle_webhook_deliveries_total", labels)
            .increment(1);
    }
}
