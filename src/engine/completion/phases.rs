//! Where an attempt's time went (contract 9): connected, the response head, the
//! first SSE event, the first output, the end, each from the attempt's start.
//!
//! Each timeout covers one phase, and each phase points somewhere else when it is
//! slow: connecting is the network or the proxy, the head is the upstream's
//! queue, the first output is the model thinking. The clock is read once per
//! phase, never per chunk: the per-chunk path only checks whether its first
//! event is already marked.

use std::sync::Arc;

use tokio::time::Instant;

use crate::engine::metrics::{Metrics, Phase};
use crate::engine::upstream::dial::Dialed;

/// The points of one attempt, as far as it got.
#[derive(Debug, Clone)]
pub struct Phases {
    started: Instant,
    /// Written by the connector when a connection is made for this attempt.
    dialed: Arc<Dialed>,
    head: Option<Instant>,
    first_event: Option<Instant>,
    first_output: Option<Instant>,
}

/// The phases in milliseconds from the attempt's start, as its log line says them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PhaseMillis {
    /// Absent when a pooled connection was reused (or none was made).
    pub connect_ms: Option<u64>,
    pub head_ms: Option<u64>,
    pub first_event_ms: Option<u64>,
    pub first_output_ms: Option<u64>,
    /// Whether the attempt went out on a pooled connection; absent when it never
    /// had one.
    pub reused: Option<bool>,
}

impl Phases {
    /// An attempt starting now, its connection recorded in `dialed`.
    pub fn start(dialed: Arc<Dialed>) -> Self {
        Phases {
            started: Instant::now(),
            dialed,
            head: None,
            first_event: None,
            first_output: None,
        }
    }

    /// When the attempt started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The response head is in.
    pub fn head(&mut self) {
        self.head = Some(Instant::now());
    }

    /// An event arrived (its time is kept only for the first).
    #[inline]
    pub fn event(&mut self, now: Instant) {
        if self.first_event.is_none() {
            self.first_event = Some(now);
        }
    }

    /// The first output arrived.
    pub fn output(&mut self) {
        if self.first_output.is_none() {
            self.first_output = Some(Instant::now());
        }
    }

    /// The points as milliseconds from the start.
    pub fn millis(&self) -> PhaseMillis {
        let ms = |at: Option<Instant>| at.map(|at| (at - self.started).as_millis() as u64);
        let dialed = self.dialed.at();
        PhaseMillis {
            connect_ms: ms(dialed),
            head_ms: ms(self.head),
            first_event_ms: ms(self.first_event),
            first_output_ms: ms(self.first_output),
            reused: match (dialed, self.head) {
                (Some(_), _) => Some(false),
                (None, Some(_)) => Some(true),
                (None, None) => None,
            },
        }
    }

    /// Observes each phase reached in `ladle_upstream_phase_seconds`, and the
    /// attempt's end (now).
    pub fn record(&self, metrics: &Metrics, upstream: &str) {
        let points = [
            (Phase::Connect, self.dialed.at()),
            (Phase::Head, self.head),
            (Phase::FirstEvent, self.first_event),
            (Phase::FirstOutput, self.first_output),
            (Phase::End, Some(Instant::now())),
        ];
        metrics.phases(upstream, |observe| {
            for (phase, at) in points {
                if let Some(at) = at {
                    observe(phase, (at - self.started).as_secs_f64());
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_point_is_millis_from_the_start_and_a_pooled_connection_has_no_connect() {
        let mut phases = Phases::start(Arc::default());
        assert_eq!(
            phases.millis(),
            PhaseMillis::default(),
            "nothing reached yet"
        );
        tokio::time::advance(Duration::from_millis(120)).await;
        phases.head();
        tokio::time::advance(Duration::from_millis(30)).await;
        phases.event(Instant::now());
        tokio::time::advance(Duration::from_millis(50)).await;
        phases.event(Instant::now());
        phases.output();
        tokio::time::advance(Duration::from_millis(50)).await;
        phases.output();
        assert_eq!(
            phases.millis(),
            PhaseMillis {
                connect_ms: None,
                head_ms: Some(120),
                first_event_ms: Some(150),
                first_output_ms: Some(200),
                reused: Some(true),
            }
        );
    }
}
