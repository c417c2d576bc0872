//! `ladle_requests_total` by route, status and client, and the completion routes'
//! `ladle_request_duration_seconds` by route: handles made on first use and found
//! again without allocating.

use std::time::Duration;

use metrics::{Counter, Histogram, Key, Label, Recorder};

use super::{METADATA, Metrics};

/// How long a request took, and whether its route is timed.
#[derive(Debug, Clone, Copy)]
pub struct Took {
    /// From arrival to the end of the body.
    pub elapsed: Duration,
    /// Whether it counts in `ladle_request_duration_seconds`.
    pub timed: bool,
}

/// One `ladle_requests_total` series (an empty client when keys are off), and
/// for a completion route its route's `ladle_request_duration_seconds`.
pub(super) struct RequestSeries {
    route: Box<str>,
    code: u16,
    client: Box<str>,
    counter: Counter,
    duration: Option<Histogram>,
}

impl Metrics {
    /// Counts an answered request by route and HTTP status, and with client keys
    /// on, by `client` (`""` for a request no key was accepted for). A completion
    /// route's request (`timed`: chat, tasks, job submits) is also timed by route;
    /// scrapes, probes, reads and admin calls are not, so they never crowd the
    /// answers' latency out of its histogram.
    pub fn request(&self, route: &str, status: u16, client: Option<&str>, took: Took) {
        let (counter, duration) = self.request_series(route, status, client, took.timed);
        counter.increment(1);
        if let Some(duration) = duration {
            duration.record(took.elapsed.as_secs_f64());
        }
    }

    fn request_series(
        &self,
        route: &str,
        status: u16,
        client: Option<&str>,
        timed: bool,
    ) -> (Counter, Option<Histogram>) {
        let register = || {
            let mut labels = vec![
                Label::new("route", route.to_owned()),
                Label::new("code", status.to_string()),
            ];
            if let Some(client) = client {
                labels.push(Label::new("client", client.to_owned()));
            }
            let key = Key::from_parts("ladle_requests_total", labels);
            let counter = self.inner.recorder.register_counter(&key, &METADATA);
            let labels = vec![Label::new("route", route.to_owned())];
            let key = Key::from_parts("ladle_request_duration_seconds", labels);
            let duration = timed.then(|| self.inner.recorder.register_histogram(&key, &METADATA));
            (counter, duration)
        };
        // A poisoned lock only means another request panicked mid-lookup.
        let mut known = self
            .inner
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let client = client.unwrap_or_default();
        let found = known
            .iter()
            .find(|s| s.code == status && *s.route == *route && *s.client == *client);
        if let Some(series) = found {
            return (series.counter.clone(), series.duration.clone());
        }
        let (counter, duration) = register();
        known.push(RequestSeries {
            route: route.into(),
            code: status,
            client: client.into(),
            counter: counter.clone(),
            duration: duration.clone(),
        });
        (counter, duration)
    }

    /// Registers the duration histograms of `routes`, so they render before
    /// their first request.
    pub fn time_routes(&self, routes: &[&str]) {
        for route in routes {
            let labels = vec![Label::new("route", (*route).to_owned())];
            let key = Key::from_parts("ladle_request_duration_seconds", labels);
            let _ = self.inner.recorder.register_histogram(&key, &METADATA);
        }
    }
}
