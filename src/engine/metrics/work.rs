//! The counters of work that outlives a request (contract 7.4): jobs, their runs,
//! webhooks, the answer cache and the state they are kept in.

use metrics::{Counter, Key, Label, Recorder};

use super::{METADATA, Metrics};

/// The most task counter handles held; past them (only a hundred task names count
/// by name anyway), a counter is registered on each use.
const MOST_TASK_SERIES: usize = 1_000;

/// One `name{task, label}` counter's handle, found again without building its
/// labels and registering them: the cache counts three on every answer, and that
/// was a tenth of a hit's work.
pub(super) struct TaskSeries {
    name: &'static str,
    label: (&'static str, &'static str),
    task: Box<str>,
    counter: Counter,
}

impl Metrics {
    /// Sets `ladle_job_waiters`: reads waiting for a job to finish.
    pub fn job_waiters(&self, waiting: usize) {
        let key = Key::from_name("ladle_job_waiters");
        let gauge = self.inner.recorder.register_gauge(&key, &METADATA);
        gauge.set(waiting as f64);
    }

    /// A job event stream opened (`ladle_job_streams`), resumed from a cursor
    /// that met the row `from` (`ladle_job_stream_resumes_total`), if any.
    pub fn job_stream_opened(&self, from: Option<&'static str>) {
        let key = Key::from_name("ladle_job_streams");
        self.inner
            .recorder
            .register_gauge(&key, &METADATA)
            .increment(1.0);
        if let Some(from) = from {
            self.labelled_counter(
                "ladle_job_stream_resumes_total",
                vec![Label::new("from", from)],
            )
            .increment(1);
        }
    }

    /// A job event stream ended.
    pub fn job_stream_closed(&self) {
        let key = Key::from_name("ladle_job_streams");
        self.inner
            .recorder
            .register_gauge(&key, &METADATA)
            .decrement(1.0);
    }

    /// Sets `ladle_redis_persistent` (1: its append-only file is on).
    pub fn redis_persistent(&self, persistent: bool) {
        let key = Key::from_name("ladle_redis_persistent");
        let gauge = self.inner.recorder.register_gauge(&key, &METADATA);
        gauge.set(if persistent { 1.0 } else { 0.0 });
    }

    /// Sets `ladle_state_free_bytes`.
    pub fn state_free_bytes(&self, bytes: u64) {
        let key = Key::from_name("ladle_state_free_bytes");
        let gauge = self.inner.recorder.register_gauge(&key, &METADATA);
        gauge.set(bytes as f64);
    }

    /// Sets `ladle_state_file_bytes`.
    pub fn state_file_bytes(&self, bytes: u64) {
        let key = Key::from_name("ladle_state_file_bytes");
        let gauge = self.inner.recorder.register_gauge(&key, &METADATA);
        gauge.set(bytes as f64);
    }

    /// Counts what a store could not do (`read`: a record that could not be read
    /// back and was ended; `commit`: a write the state file refused).
    pub fn store_error(&self, op: &'static str) {
        self.labelled_counter("ladle_store_errors_total", vec![Label::new("op", op)])
            .increment(1);
    }

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
        label: (&'static str, &'static str),
        by: u64,
    ) {
        // A poisoned lock only means another request panicked mid-lookup.
        let mut known = self
            .inner
            .task_series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = known
            .iter()
            .find(|s| s.name == name && s.label == label && *s.task == *task);
        if let Some(series) = found {
            series.counter.increment(by);
            return;
        }
        let bounded = self.inner.bounded.value(name, "task", task);
        let labels = vec![Label::new("task", bounded), Label::new(label.0, label.1)];
        let counter = self.labelled_counter(name, labels);
        counter.increment(by);
        if known.len() < MOST_TASK_SERIES {
            known.push(TaskSeries {
                name,
                label,
                task: task.into(),
                counter,
            });
        }
    }

    /// Counts a webhook attempt by what it led to (`delivered`, `retry`, `failed`).
    pub fn webhook(&self, outcome: &'static str) {
        let labels = vec![Label::new("outcome", outcome)];
        self.labelled_counter("ladle_webhook_deliveries_total", labels)
            .increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::labels::MOST_VALUES;
    use super::*;

    #[test]
    fn task_counters_found_again_still_count_and_their_names_stay_bounded() {
        let metrics = Metrics::new();
        for _ in 0..3 {
            metrics.cache("recipe", "hit");
        }
        metrics.cache("recipe", "miss");
        metrics.job_run("recipe", "2xx");
        for i in 0..MOST_VALUES + 5 {
            metrics.cache(&format!("task-{i}"), "miss");
        }
        // `recipe` and the first 99 hold the hundred names; the other six, and
        // one of them again, count as `other`.
        metrics.cache(&format!("task-{}", MOST_VALUES + 1), "miss");
        let text = metrics.render();
        for series in [
            r#"ladle_cache_total{task="recipe",outcome="hit"} 3"#,
            r#"ladle_cache_total{task="recipe",outcome="miss"} 1"#,
            r#"ladle_cache_total{task="recipe",outcome="stale"} 0"#,
            r#"ladle_job_runs_total{task="recipe",outcome="2xx"} 1"#,
            r#"ladle_cache_total{task="other",outcome="miss"} 7"#,
        ] {
            assert!(text.contains(series), "missing {series} in\n{text}");
        }
    }
}
