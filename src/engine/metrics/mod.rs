//! Prometheus metrics, as a value owned by the app rather than a global recorder.
//!
//! A process-wide recorder would mix the counters of every server a test starts in
//! one process; a recorder per app keeps each app's `/metrics` its own. Handles for
//! the fixed label sets are registered once, so counting on the request path is an
//! atomic add.

use std::sync::{Arc, Mutex};
use std::time::Duration;

mod help;
mod labels;
mod limits;
mod requests;
mod timing;
mod work;

pub use limits::ScopedGauge;
pub use requests::Took;
pub use timing::Phase;

use self::help::{describe, register_known};
use self::labels::{Bounded, Totals};
use self::requests::RequestSeries;
use crate::engine::failure::outcome::{Outcome, RetryReason};
use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

/// Histogram buckets in seconds: from a fast first token to a whole recipe.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

static METADATA: Metadata<'static> = Metadata::new("ladle", Level::INFO, None);

/// One counter per attempt outcome.
type Outcomes = Vec<(&'static str, Counter)>;

/// One upstream's series: `ladle_upstream_attempts_total` by outcome and
/// `ladle_upstream_phase_seconds` by phase.
struct UpstreamSeries {
    outcomes: Outcomes,
    phases: [Histogram; 5],
}

/// Who spent the tokens of a usage report.
#[derive(Debug, Clone, Copy)]
pub struct Spent<'a> {
    /// The upstream's name.
    pub upstream: &'a str,
    /// The model sent to it.
    pub model: &'a str,
    /// The task's name; `""` for chat.
    pub task: &'a str,
    /// The client key's name; `""` without keys.
    pub client: &'a str,
}

/// The app's metrics.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Each upstream's series, registered when the upstream is (so every series
    /// renders from the start).
    upstreams: Mutex<Vec<(Box<str>, UpstreamSeries)>>,
    retries: Vec<(&'static str, Counter)>,
    /// `ladle_requests_total` handles by route and status, made on first use: a
    /// lookup here costs no allocation, registering a key costs three.
    requests: Mutex<Vec<RequestSeries>>,
    /// The task counters' handles, made on first use (`work`).
    task_series: Mutex<Vec<work::TaskSeries>>,
    first_output: Histogram,
    inflight: Gauge,
    /// Label values that come from requests or upstreams, bounded.
    bounded: Bounded,
    /// What the token counters hold, so they saturate instead of wrapping.
    token_totals: Totals,
    timing: timing::Timing,
}

impl Metrics {
    /// A fresh set of metrics with every series of the contract registered.
    pub fn new() -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)
            .map(PrometheusBuilder::build_recorder)
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        describe(&recorder);
        let labelled = |name: &'static str, label: &'static str, values: &[&'static str]| {
            values
                .iter()
                .map(|v| {
                    (
                        *v,
                        recorder.register_counter(
                            &Key::from_parts(name, vec![Label::new(label, *v)]),
                            &METADATA,
                        ),
                    )
                })
                .collect::<Vec<_>>()
        };
        let reasons = RetryReason::ALL.map(RetryReason::name);
        let retries = labelled("ladle_retries_total", "reason", &reasons);
        let first_output = recorder.register_histogram(
            &Key::from_name("ladle_time_to_first_output_seconds"),
            &METADATA,
        );
        let inflight =
            recorder.register_gauge(&Key::from_name("ladle_inflight_requests"), &METADATA);
        inflight.set(0.0);
        recorder
            .register_gauge(&Key::from_name("ladle_job_streams"), &METADATA)
            .set(0.0);
        let handle = recorder.handle();
        let timing = timing::Timing::new(&recorder);
        register_known(&recorder);
        Metrics {
            inner: Arc::new(Inner {
                recorder,
                handle,
                upstreams: Mutex::default(),
                retries,
                requests: Mutex::default(),
                task_series: Mutex::default(),
                first_output,
                inflight,
                bounded: Bounded::default(),
                token_totals: Totals::default(),
                timing,
            }),
        }
    }

    /// Registers an upstream's series, so they render before its first attempt.
    pub fn register_upstream(&self, upstream: &str) {
        self.with_upstream(upstream, |_| ());
        self.throttled_counter(upstream).increment(0);
    }

    /// Folds the histograms' samples into their buckets, freeing them.
    pub fn upkeep(&self) {
        self.inner.handle.run_upkeep();
    }

    /// Counts an ended attempt by outcome and upstream.
    pub fn attempt(&self, outcome: Outcome, upstream: &str) {
        self.with_upstream(upstream, |series| count(&series.outcomes, outcome.name()));
    }

    /// Counts what an `Idempotency-Key` led to: `executed`, `replayed`, `joined`
    /// (waited for a run in progress) or `reused` (422).
    pub fn idempotency(&self, outcome: &'static str) {
        self.labelled_counter(
            "ladle_idempotency_total",
            vec![Label::new("outcome", outcome)],
        )
        .increment(1);
    }

    /// Counts a retry the upstream's budget refused.
    pub fn retry_throttled(&self, upstream: &str) {
        self.throttled_counter(upstream).increment(1);
    }

    fn throttled_counter(&self, upstream: &str) -> Counter {
        let labels = vec![Label::new("upstream", upstream.to_owned())];
        self.labelled_counter("ladle_retries_throttled_total", labels)
    }

    /// Sets an upstream's breaker gauge (0 closed, 1 open, 2 half-open).
    pub fn breaker_state(&self, upstream: &str, gauge: f64) {
        let key = Key::from_parts(
            "ladle_breaker_state",
            vec![Label::new("upstream", upstream.to_owned())],
        );
        self.inner
            .recorder
            .register_gauge(&key, &METADATA)
            .set(gauge);
    }

    /// Counts a breaker's change of state (`to`: open, half_open, closed).
    pub fn breaker_transition(&self, upstream: &str, to: &'static str) {
        self.labelled_counter(
            "ladle_breaker_transitions_total",
            vec![
                Label::new("upstream", upstream.to_owned()),
                Label::new("to", to),
            ],
        )
        .increment(1);
    }

    /// Sets `ladle_redis_up` (1 reachable, 0 not).
    pub fn redis_up(&self, up: bool) {
        let key = Key::from_name("ladle_redis_up");
        let gauge = self.inner.recorder.register_gauge(&key, &METADATA);
        gauge.set(if up { 1.0 } else { 0.0 });
    }

    /// Counts a Redis call that failed or timed out, by what it was for.
    pub fn redis_error(&self, op: &'static str) {
        self.labelled_counter("ladle_redis_errors_total", vec![Label::new("op", op)])
            .increment(1);
    }

    /// A counter with labels, registered as it comes: for rare events only.
    fn labelled_counter(&self, name: &'static str, labels: Vec<Label>) -> Counter {
        let key = Key::from_parts(name, labels);
        self.inner.recorder.register_counter(&key, &METADATA)
    }

    /// Counts a retry sent to another upstream than the attempt before.
    pub fn fallback(&self, from: &str, to: &str) {
        let labels = vec![
            Label::new("from", from.to_owned()),
            Label::new("to", to.to_owned()),
        ];
        self.labelled_counter("ladle_fallbacks_total", labels)
            .increment(1);
    }

    /// Counts a continuation by how it ended (contract 11.3): `ok`, `rejected`
    /// (refused with a final 4xx), `failed` (anything else).
    pub fn continuation(&self, upstream: &str, outcome: Outcome) {
        let ended = match outcome {
            Outcome::Ok => "ok",
            Outcome::Rejected => "rejected",
            _ => "failed",
        };
        let labels = vec![
            Label::new("upstream", upstream.to_owned()),
            Label::new("outcome", ended),
        ];
        self.labelled_counter("ladle_continuations_total", labels)
            .increment(1);
    }

    /// Runs `f` with the upstream's series, registering them on first use.
    fn with_upstream<T>(&self, upstream: &str, f: impl FnOnce(&UpstreamSeries) -> T) -> T {
        // A poisoned lock only means another request panicked mid-lookup.
        let mut known = self
            .inner
            .upstreams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, series)) = known.iter().find(|(name, _)| **name == *upstream) {
            return f(series);
        }
        let recorder = &self.inner.recorder;
        let outcomes: Outcomes = Outcome::ALL
            .iter()
            .map(|outcome| {
                let outcome = outcome.name();
                let labels = vec![
                    Label::new("outcome", outcome),
                    Label::new("upstream", upstream.to_owned()),
                ];
                let key = Key::from_parts("ladle_upstream_attempts_total", labels);
                (outcome, recorder.register_counter(&key, &METADATA))
            })
            .collect();
        let series = UpstreamSeries {
            outcomes,
            phases: timing::phase_histograms(recorder, upstream),
        };
        let answer = f(&series);
        known.push((upstream.into(), series));
        answer
    }

    /// Counts a retry by reason.
    pub fn retry(&self, reason: RetryReason) {
        count(&self.inner.retries, reason.name());
    }

    /// Counts the tokens of one usage report (`prompt_tokens`, `completion_tokens`)
    /// by who spent them. Rare (once per answer at most), so its handles are
    /// registered as it comes. The model comes from the request: its label holds
    /// the first 100 values, then `other` (tasks and client keys are the
    /// operator's, named in files); the counters saturate.
    pub fn tokens(&self, spent: &Spent<'_>, usage: &serde_json::Value) {
        let model = self
            .inner
            .bounded
            .value("ladle_tokens_total", "model", spent.model);
        for (kind, field) in [
            ("prompt", "prompt_tokens"),
            ("completion", "completion_tokens"),
        ] {
            let Some(count) = usage.get(field).and_then(serde_json::Value::as_u64) else {
                continue;
            };
            let labels = vec![
                Label::new("upstream", spent.upstream.to_owned()),
                Label::new("model", model.clone()),
                Label::new("kind", kind),
                Label::new("task", spent.task.to_owned()),
                Label::new("client", spent.client.to_owned()),
            ];
            let key = Key::from_parts("ladle_tokens_total", labels);
            let added = self.inner.token_totals.add(&key, count);
            self.inner
                .recorder
                .register_counter(&key, &METADATA)
                .increment(added);
        }
    }

    /// Records a request's first output.
    pub fn first_output(&self, elapsed: Duration) {
        self.inner.first_output.record(elapsed.as_secs_f64());
    }

    /// Marks a request as started; the guard marks it finished when dropped.
    pub fn inflight(&self) -> InflightGuard {
        self.inner.inflight.increment(1.0);
        InflightGuard(self.inner.inflight.clone())
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.inner.handle.render()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Decrements the in-flight gauge when the request is over.
pub struct InflightGuard(Gauge);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

fn count(counters: &[(&'static str, Counter)], label: &str) {
    if let Some((_, counter)) = counters.iter().find(|(name, _)| *name == label) {
        counter.increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_series_is_rendered_from_the_start() {
        let metrics = Metrics::new();
        metrics.register_upstream("default");
        metrics.attempt(Outcome::Busy, "default");
        let took = |timed| Took {
            elapsed: Duration::from_millis(3),
            timed,
        };
        metrics.request("/healthz", 200, None, took(false));
        metrics.request("/v1/chat/completions", 200, None, took(true));
        let text = metrics.render();
        assert!(
            !text.contains("ladle_request_duration_seconds_count{route=\"/healthz\"}"),
            "an untimed route is only counted:\n{text}"
        );
        for series in [
            "ladle_upstream_attempts_total{outcome=\"busy\",upstream=\"default\"} 1",
            "ladle_upstream_attempts_total{outcome=\"ok\",upstream=\"default\"} 0",
            "ladle_retries_total{reason=\"not_started\"} 0",
            "ladle_requests_total{route=\"/healthz\",code=\"200\"} 1",
            "ladle_request_duration_seconds_count{route=\"/v1/chat/completions\"} 1",
            "ladle_inflight_requests 0",
        ] {
            assert!(text.contains(series), "missing {series} in\n{text}");
        }
    }
}
