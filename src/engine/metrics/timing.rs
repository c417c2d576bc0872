//! Where the time goes (contract 9): each phase of an attempt per upstream, the
//! wait for an in-flight slot, and the age of the oldest queued job.

use std::time::Duration;

use metrics::{Gauge, Histogram, Key, Label, Recorder};
use metrics_exporter_prometheus::PrometheusRecorder;

use super::{METADATA, Metrics};

/// A point of an attempt, named as `ladle_upstream_phase_seconds{phase}` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Connect,
    Head,
    FirstEvent,
    FirstOutput,
    End,
}

impl Phase {
    /// Every phase, in the order an attempt reaches them.
    pub const ALL: [Phase; 5] = [
        Phase::Connect,
        Phase::Head,
        Phase::FirstEvent,
        Phase::FirstOutput,
        Phase::End,
    ];

    /// The `phase` label.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Head => "head",
            Phase::FirstEvent => "first_event",
            Phase::FirstOutput => "first_output",
            Phase::End => "end",
        }
    }
}

/// The handles of this file's series.
pub(super) struct Timing {
    queue_wait: Histogram,
    job_queue_age: Gauge,
}

impl Timing {
    pub(super) fn new(recorder: &PrometheusRecorder) -> Self {
        let queue_wait =
            recorder.register_histogram(&Key::from_name("ladle_queue_wait_seconds"), &METADATA);
        let job_queue_age =
            recorder.register_gauge(&Key::from_name("ladle_job_queue_age_seconds"), &METADATA);
        job_queue_age.set(0.0);
        Timing {
            queue_wait,
            job_queue_age,
        }
    }
}

/// One upstream's phase histograms, in `Phase::ALL`'s order.
pub(super) fn phase_histograms(recorder: &PrometheusRecorder, upstream: &str) -> [Histogram; 5] {
    Phase::ALL.map(|phase| {
        let labels = vec![
            Label::new("upstream", upstream.to_owned()),
            Label::new("phase", phase.name()),
        ];
        let key = Key::from_parts("ladle_upstream_phase_seconds", labels);
        recorder.register_histogram(&key, &METADATA)
    })
}

impl Metrics {
    /// Lets `observe` record phases of one attempt on `upstream`.
    pub fn phases(&self, upstream: &str, observe: impl FnOnce(&mut dyn FnMut(Phase, f64))) {
        self.with_upstream(upstream, |series| {
            observe(&mut |phase, seconds| series.phases[phase as usize].record(seconds));
        });
    }

    /// Observes a request's wait for its in-flight slot (and its task's).
    pub fn queue_wait(&self, waited: Duration) {
        self.inner.timing.queue_wait.record(waited.as_secs_f64());
    }

    /// Sets the age of the oldest queued job (0 with none queued).
    pub fn job_queue_age(&self, age: Duration) {
        self.inner.timing.job_queue_age.set(age.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_folded_by_upkeep_are_still_counted_and_every_phase_renders_from_the_start() {
        let metrics = Metrics::new();
        metrics.register_upstream("a");
        let text = metrics.render();
        for phase in Phase::ALL {
            let series = format!(
                "ladle_upstream_phase_seconds_count{{upstream=\"a\",phase=\"{}\"}} 0",
                phase.name()
            );
            assert!(text.contains(&series), "{series} in\n{text}");
        }
        for _ in 0..1000 {
            metrics.phases("a", |observe| observe(Phase::Head, 0.02));
            metrics.queue_wait(Duration::from_millis(3));
        }
        metrics.upkeep();
        metrics.phases("a", |observe| observe(Phase::Head, 0.02));
        let text = metrics.render();
        let head = "ladle_upstream_phase_seconds_count{upstream=\"a\",phase=\"head\"} 1001";
        assert!(text.contains(head), "{text}");
        assert!(
            text.contains("ladle_queue_wait_seconds_count 1000"),
            "{text}"
        );
        assert!(text.contains("ladle_job_queue_age_seconds 0"), "{text}");
    }
}
