//! The bulkheads' metrics (contract 8): slots held per scope and name, waits and
//! refusals per scope.

use metrics::{Gauge, Key, Label, Recorder};

use super::{METADATA, Metrics};

/// `ladle_inflight{scope,name}`: one bulkhead's slots in use.
#[derive(Clone)]
pub struct ScopedGauge(Gauge);

impl ScopedGauge {
    /// Adds `by` (negative to take away).
    pub fn add(&self, by: f64) {
        if by >= 0.0 {
            self.0.increment(by);
        } else {
            self.0.decrement(-by);
        }
    }
}

impl Metrics {
    /// The gauge of the bulkhead `name` in `scope` (shown from now on, at 0 until
    /// a slot is taken).
    pub fn scoped_inflight(&self, scope: &'static str, name: &str) -> ScopedGauge {
        let name = self.inner.bounded.value("ladle_inflight", "name", name);
        let labels = vec![Label::new("scope", scope), Label::new("name", name)];
        let key = Key::from_parts("ladle_inflight", labels);
        let gauge = self.inner.recorder.register_gauge(&key, &METADATA);
        gauge.increment(0.0);
        ScopedGauge(gauge)
    }

    /// Counts a wait for a bulkhead's slot (`task`, `upstream`).
    pub fn limit_wait(&self, scope: &'static str) {
        let labels = vec![Label::new("scope", scope)];
        self.labelled_counter("ladle_limit_waits_total", labels)
            .increment(1);
    }

    /// Counts a request a limit turned away (`client`, `task`, `upstream`).
    pub fn limit_rejection(&self, scope: &'static str) {
        let labels = vec![Label::new("scope", scope)];
        self.labelled_counter("ladle_limit_rejections_total", labels)
            .increment(1);
    }
}
