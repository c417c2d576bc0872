//! Starting an attempt: the slots the request needs first (an in-flight one and
//! its task's), the upstream it goes to (one with a free slot, if upstreams have
//! a `max_inflight`), and that upstream's breaker's admission.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::time::{Instant, timeout_at};

use super::answer::{Answer, Gather};
use super::attempt::{Attempt, Timers};
use super::{Completion, GaveUp, Phase, Progress, QueueWait};
use crate::engine::breaker::{Admission, Counted};
use crate::engine::bulkhead::{Entry, Slot, Slots};
use crate::engine::upstream::Outgoing;
use crate::engine::upstream::order::UpstreamOrder;

impl Completion {
    /// Where the request's slots come from: its task's bulkhead and the global one.
    fn entry(&self) -> Entry {
        Entry {
            task: self.spec.task_bulkhead.clone(),
            global: self.shared.inflight.clone(),
        }
    }

    /// The slots the request needs if they are free now; else the task's slot
    /// if it was taken.
    pub(super) fn try_slots(&self) -> Result<Slots, Option<Slot>> {
        self.entry().try_now()
    }

    /// The wait for the slots the request lacks (oldest first), bounded by the
    /// queue timeout and the deadline.
    pub(super) fn queue_wait(&self, task: Option<Slot>) -> QueueWait {
        let limit = (Instant::now() + self.shared.queue_timeout).min(self.spec.deadline.at);
        let (deadline, retry_after) = (self.spec.deadline.at, self.shared.queue_timeout);
        let entry = self.entry();
        Box::pin(async move {
            entry
                .wait(task, Some(limit))
                .await
                .map_err(|_| match limit == deadline {
                    true => GaveUp::Deadline,
                    false => GaveUp::Overloaded { retry_after },
                })
        })
    }

    /// Starts the next attempt; `None` when it must first wait for an upstream's
    /// slot (the phase is then that wait).
    pub(super) fn start_attempt(&mut self) -> Option<Progress> {
        let now = Instant::now();
        if self.order.is_none() {
            let candidates = self.shared.candidates(now);
            self.order = UpstreamOrder::start(&candidates, rand::random::<f64>());
        }
        if self.upstream_slot.is_none()
            && let Err(full) = self.take_upstream_slot(now)
        {
            self.phase = Phase::UpstreamFull(self.upstream_wait(full));
            return None;
        }
        Some(self.start_admitted(now))
    }

    /// A slot on the current upstream if it has a `max_inflight`; when it is
    /// full, the order moves on to the next usable upstream with room (no
    /// attempt, no retry). `Err` with the usable upstreams, every one full.
    fn take_upstream_slot(&mut self, now: Instant) -> Result<(), Vec<usize>> {
        let shared = &self.shared;
        let Some(order) = self.order.as_mut() else {
            return Ok(());
        };
        let mut full = Vec::new();
        for _ in 0..shared.upstreams.len() {
            let index = order.current();
            let Some(bulkhead) = &shared.guards[index].bulkhead else {
                return Ok(());
            };
            if let Some(slot) = bulkhead.try_enter() {
                self.upstream_slot = Some((index, slot));
                return Ok(());
            }
            full.push(index);
            let next = order.next(true, |i| !full.contains(&i) && shared.usable(i, now));
            match next {
                Some(next) => order.move_to(next),
                None => break,
            }
        }
        Err(full)
    }

    /// The wait for the first slot any of the `full` upstreams frees, within the
    /// deadline (`504` past it).
    fn upstream_wait(&self, full: Vec<usize>) -> BoxFuture<'static, Result<(usize, Slot), GaveUp>> {
        self.shared.metrics.limit_wait("upstream");
        let waits: Vec<_> = full
            .into_iter()
            .filter_map(|index| {
                let bulkhead = self.shared.guards[index].bulkhead.clone()?;
                Some(Box::pin(async move { (index, bulkhead.wait().await) }))
            })
            .collect();
        let (deadline, metrics) = (self.spec.deadline.at, self.shared.metrics.clone());
        Box::pin(async move {
            if waits.is_empty() {
                return Err(GaveUp::Deadline);
            }
            match timeout_at(deadline, futures_util::future::select_all(waits)).await {
                Ok(((index, Some(slot)), _, _)) => Ok((index, slot)),
                _ => {
                    metrics.limit_rejection("upstream");
                    Err(GaveUp::Deadline)
                }
            }
        })
    }

    fn start_admitted(&mut self, now: Instant) -> Progress {
        let admitted = self.admit(now);
        // `admit` moves on when a half-open breaker's probe was taken meanwhile:
        // the slot must be the new upstream's (if it has none free, this one
        // attempt goes over its `max_inflight`: a race of two probes, rare).
        if let (Some(order), Some((index, _))) = (&self.order, &self.upstream_slot)
            && order.current() != *index
        {
            let current = order.current();
            let bulkhead = self.shared.guards[current].bulkhead.as_ref();
            self.upstream_slot = bulkhead
                .and_then(|b| b.try_enter())
                .map(|slot| (current, slot));
        }
        let Some(probe) = admitted else {
            // No upstream for this attempt: a retry ends with the failure that
            // asked for it; a first attempt with every breaker open.
            let refused = match self.last_failure.take() {
                Some((failure, classified)) => {
                    let hint = self.spec.policy.backoff(self.attempt);
                    GaveUp::Failed {
                        failure,
                        classified,
                        attempts: self.attempt,
                        retry_after: hint,
                    }
                }
                None => self.all_open(now),
            };
            return self.on_refused(refused);
        };
        self.probe = probe;
        let Some(index) = self.order.as_ref().map(UpstreamOrder::current) else {
            return self.on_refused(self.all_open(now));
        };
        let upstream = self.shared.upstreams[index].clone();
        let mut body = upstream.body_for(&self.spec.body, &self.spec.model);
        if self.prefix.pending {
            match upstream.continuation.body(&body, self.prefix.text()) {
                Some(continued) => body = continued,
                // Moved (by a breaker or a full upstream) to one that continues
                // nothing: the request ends with its first cut's code.
                None => return self.refused_continuation(index, now),
            }
        }
        if self.order.as_mut().is_some_and(UpstreamOrder::enter) {
            self.shared.first_attempt(index, now);
        }
        self.attempt += 1;
        self.prefix.start_attempt();
        match self.prefix.continuing {
            Some(chars) => {
                self.announce = Some(Progress::Continue {
                    attempt: self.attempt,
                    upstream: upstream.name.clone(),
                    chars,
                });
            }
            None => self.answer = Answer::new(self.spec.gather),
        }
        self.in_attempt = Some(self.shared.guards[index].recent.started());
        let request = Outgoing {
            body,
            traceparent: self.spec.trace.for_attempt(),
            tracestate: self.spec.trace.state().cloned(),
            dialed: Arc::default(),
        };
        let timers = Timers::new(self.shared.timeouts, self.spec.deadline);
        self.failed_open = None;
        let open = Attempt::open(
            upstream,
            request,
            timers,
            self.spec.gather != Gather::Nothing,
        );
        self.phase = Phase::Connecting(Box::pin(open));
        Progress::Attempt(self.attempt)
    }

    /// A continuation due on upstream `index`, which continues nothing: the
    /// request ends with its first cut's code, and a probe it was admitted as
    /// is given back.
    fn refused_continuation(&mut self, index: usize, now: Instant) -> Progress {
        let probe = std::mem::take(&mut self.probe);
        self.shared.record(index, Counted::Neither, probe, now);
        let refused = match self.prefix.first_cut.take() {
            Some((failure, classified)) => GaveUp::Failed {
                failure,
                classified,
                attempts: self.attempt,
                retry_after: self.spec.policy.backoff(self.attempt),
            },
            None => GaveUp::Deadline,
        };
        self.on_refused(refused)
    }

    /// Asks the current upstream's breaker to admit the attempt: whether it is the
    /// half-open probe, or `None` when no upstream admits it. A half-open breaker
    /// admits one probe, and another request may have taken it since this one
    /// chose; another upstream is taken instead only if this request has not called
    /// it yet (an immediate fallback, a first attempt for its budget).
    fn admit(&mut self, now: Instant) -> Option<bool> {
        let order = self.order.as_mut()?;
        for _ in 0..self.shared.upstreams.len() {
            match self.shared.admit(order.current(), now) {
                Admission::Pass => return Some(false),
                Admission::Probe => return Some(true),
                Admission::Refused => {
                    let next = order.next(true, |index| self.shared.usable(index, now));
                    match next {
                        Some(next) if next.upstream.untried => order.move_to(next),
                        _ => return None,
                    }
                }
            }
        }
        None
    }

    /// No upstream can be called: every breaker is open (or probing).
    fn all_open(&self, now: Instant) -> GaveUp {
        GaveUp::AllOpen {
            retry_after: self.shared.opens_again_in(now),
        }
    }
}
