//! Where one request's attempts go (contract 6.1): its order of upstreams, fixed
//! when it starts, where it is in that order, and what each upstream did in this
//! request. The choices themselves are `routing`'s pure functions.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};

use tokio::time::Instant;

use super::Engine;
use crate::upstream::order::{self, Candidate};

/// One request's way through the upstreams.
pub struct Route {
    /// Upstream indexes, in the order of this request.
    order: Vec<usize>,
    /// Where in `order` the current (or next) attempt goes.
    position: usize,
    /// Per upstream index: what happened there in this request.
    visits: Vec<Visit>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Visit {
    tried: bool,
    /// Its TLS could not be trusted: never called again in this request.
    untrusted: bool,
    /// The `Retry-After` it sent in this request, if it did.
    retry_after: Option<Duration>,
}

/// The next attempt's upstream, as the retry policy needs to see it.
#[derive(Debug, Clone, Copy)]
pub struct Next {
    /// Its position in the request's order.
    pub position: usize,
    /// Not tried yet in this request: a fallback, made at once.
    pub untried: bool,
    /// The `Retry-After` it sent earlier in this request.
    pub retry_after: Option<Duration>,
}

impl Route {
    /// The order for a new request; `None` when no upstream is usable.
    pub fn start(engine: &Engine, draw: f64, now: Instant) -> Option<Route> {
        let candidates: Vec<Candidate> = engine
            .upstreams
            .iter()
            .enumerate()
            .map(|(index, u)| Candidate {
                priority: u.priority,
                weight: u.weight,
                usable: engine.usable(index, now),
            })
            .collect();
        let order = order::request_order(&candidates, draw)?;
        Some(Route {
            visits: vec![Visit::default(); order.len()],
            order,
            position: 0,
        })
    }

    /// The index of the current attempt's upstream.
    pub fn current(&self) -> usize {
        self.order[self.position]
    }

    /// Marks the current upstream as called by this request; whether this is the
    /// first call to it (a first attempt, for its retry budget).
    pub fn enter(&mut self) -> bool {
        let current = self.current();
        !std::mem::replace(&mut self.visits[current].tried, true)
    }

    /// Remembers what the current upstream asked for in `Retry-After`.
    pub fn remember_retry_after(&mut self, retry_after: Option<Duration>) {
        if retry_after.is_some() {
            let current = self.current();
            self.visits[current].retry_after = retry_after;
        }
    }

    /// Marks the current upstream as one whose TLS cannot be trusted.
    pub fn distrust(&mut self) {
        let current = self.current();
        self.visits[current].untrusted = true;
    }

    /// The next usable upstream after the current one (wrapping round to it),
    /// leaving out those whose TLS could not be trusted and, with `leave_current`,
    /// the current one.
    pub fn next(&self, engine: &Engine, leave_current: bool, now: Instant) -> Option<Next> {
        let current = self.current();
        let position = order::next_after(&self.order, self.position, |index| {
            let left_out = self.visits[index].untrusted || (leave_current && index == current);
            !left_out && engine.usable(index, now)
        })?;
        let visit = self.visits[self.order[position]];
        Some(Next {
            position,
            untried: !visit.tried,
            retry_after: visit.retry_after.filter(|_| visit.tried),
        })
    }

    /// The upstream index at a position of the order.
    pub fn index_at(&self, position: usize) -> usize {
        self.order[position]
    }

    /// The next attempt goes to `next`.
    pub fn move_to(&mut self, next: Next) {
        self.position = next.position;
    }
}

/// The request body with its `model` replaced, for an upstream that names its own
/// model. Rare (a configuration choice), so it parses and writes the body anew.
pub fn with_model(body: &Bytes, model: &str) -> Bytes {
    let Ok(mut fields) = serde_json::from_slice::<Map<String, Value>>(body) else {
        return body.clone();
    };
    fields.insert("model".into(), Value::String(model.to_owned()));
    serde_json::to_vec(&fields).map_or_else(|_| body.clone(), Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_override_replaces_only_the_model() {
        let body = Bytes::from_static(br#"{"model":"a","stream":true,"messages":[]}"#);
        let changed: Value = serde_json::from_slice(&with_model(&body, "b")).expect("JSON");
        assert_eq!(
            changed,
            serde_json::json!({"model": "b", "stream": true, "messages": []})
        );
    }
}
