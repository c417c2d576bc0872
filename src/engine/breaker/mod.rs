//! The circuit breaker of one upstream (contract 6.2), as a pure state machine:
//! time comes in as an argument, so every transition is a unit test under made-up
//! instants. The attempt loop asks it before an attempt and tells it the outcome.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// When a breaker opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerSettings {
    /// Failed attempts in a row that open it.
    pub failures: u32,
    /// Or this failed share …
    pub error_ratio: f64,
    /// … of at least this many counted attempts …
    pub min_attempts: u32,
    /// … ended within this sliding window.
    pub window: Duration,
    /// How long its first opening lasts (`LADLE_BREAKER_OPEN_BASE_MS`) …
    pub open_base: Duration,
    /// … doubling after each probe that timed out, up to this
    /// (`LADLE_BREAKER_OPEN_MS`).
    pub open_max: Duration,
}

/// The three states, as the metrics and logs name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Used.
    Closed,
    /// Skipped: nothing is sent to the upstream.
    Open,
    /// The next attempt that picks it is the one probe.
    HalfOpen,
}

impl State {
    /// The name in logs and in `ladle_breaker_transitions_total{to}`.
    pub fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
        }
    }

    /// The value of the `ladle_breaker_state` gauge.
    pub fn gauge(self) -> f64 {
        match self {
            State::Closed => 0.0,
            State::Open => 1.0,
            State::HalfOpen => 2.0,
        }
    }
}

/// How an attempt counts (section 5's outcomes): `ok` is a success; `busy`,
/// `not_started` (first-output timeout included) and `failed` except unparsable
/// output are failures; the rest count neither way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// A success.
    Success,
    /// A failure; `timed_out` when it was a connect, idle or first-output
    /// timeout (a probe that fails so costs its caller seconds).
    Failure {
        /// Whether it failed by a timeout.
        timed_out: bool,
    },
    /// Counts neither way.
    Neither,
}

/// What the breaker says to an attempt about to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead.
    Pass,
    /// Go ahead: this attempt is the half-open probe.
    Probe,
    /// Not now.
    Refused,
}

/// A change of state, for the metrics and the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The state left.
    pub from: State,
    /// The state entered.
    pub to: State,
}

/// One upstream's breaker.
#[derive(Debug)]
pub struct Breaker {
    settings: BreakerSettings,
    state: State,
    /// When an open breaker half-opens.
    until: Instant,
    /// How long the next opening lasts: the base, doubled after each probe that
    /// timed out, back to the base on a close.
    open_for: Duration,
    /// Whether the half-open probe is in flight.
    probing: bool,
    /// Failures in a row.
    in_a_row: u32,
    /// Counted attempts in the window: when each ended and whether it failed.
    recent: VecDeque<(Instant, bool)>,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(settings: BreakerSettings, now: Instant) -> Self {
        Breaker {
            settings,
            state: State::Closed,
            until: now,
            open_for: settings.open_base.min(settings.open_max),
            probing: false,
            in_a_row: 0,
            recent: VecDeque::new(),
        }
    }

    /// The state at `now`; an open breaker whose time is up half-opens here.
    pub fn state(&mut self, now: Instant) -> (State, Option<Transition>) {
        let mut moved = None;
        if self.state == State::Open && now >= self.until {
            moved = self.enter(State::HalfOpen, now);
        }
        (self.state, moved)
    }

    /// Whether an upstream may be picked at `now`: closed, or half-open with no
    /// probe in flight.
    pub fn usable(&mut self, now: Instant) -> (bool, Option<Transition>) {
        let (state, moved) = self.state(now);
        let usable = match state {
            State::Closed => true,
            State::HalfOpen => !self.probing,
            State::Open => false,
        };
        (usable, moved)
    }

    /// Asked when an attempt is about to start on this upstream.
    pub fn admit(&mut self, now: Instant) -> (Admission, Option<Transition>) {
        let (state, moved) = self.state(now);
        let admission = match state {
            State::Closed => Admission::Pass,
            State::HalfOpen if !self.probing => {
                self.probing = true;
                Admission::Probe
            }
            State::HalfOpen | State::Open => Admission::Refused,
        };
        (admission, moved)
    }

    /// Told how an attempt ended; `probe` if it was the half-open probe.
    pub fn record(&mut self, counted: Counted, probe: bool, now: Instant) -> Option<Transition> {
        if probe {
            self.probing = false;
            return match counted {
                Counted::Success => {
                    self.open_for = self.settings.open_base.min(self.settings.open_max);
                    self.enter(State::Closed, now)
                }
                Counted::Failure { timed_out } => {
                    if timed_out {
                        self.open_for = (self.open_for * 2).min(self.settings.open_max);
                    }
                    self.enter(State::Open, now)
                }
                Counted::Neither => None,
            };
        }
        if self.state != State::Closed || counted == Counted::Neither {
            return None;
        }
        let failed = matches!(counted, Counted::Failure { .. });
        self.in_a_row = if failed { self.in_a_row + 1 } else { 0 };
        self.recent.push_back((now, failed));
        while self
            .recent
            .front()
            .is_some_and(|(ended, _)| now.saturating_duration_since(*ended) > self.settings.window)
        {
            self.recent.pop_front();
        }
        let counted = self.recent.len() as u32;
        let failures = self.recent.iter().filter(|(_, failed)| *failed).count() as u32;
        let ratio_reached = counted >= self.settings.min_attempts
            && f64::from(failures) >= self.settings.error_ratio * f64::from(counted);
        if self.in_a_row >= self.settings.failures || ratio_reached {
            return self.enter(State::Open, now);
        }
        None
    }

    /// Time until an open breaker half-opens; zero when it is not open.
    pub fn opens_again_in(&self, now: Instant) -> Duration {
        match self.state {
            State::Open => self.until.saturating_duration_since(now),
            State::Closed | State::HalfOpen => Duration::ZERO,
        }
    }

    fn enter(&mut self, to: State, now: Instant) -> Option<Transition> {
        let from = self.state;
        self.state = to;
        self.in_a_row = 0;
        self.recent.clear();
        if to == State::Open {
            self.until = now + self.open_for;
        }
        (from != to).then_some(Transition { from, to })
    }
}

#[cfg(test)]
mod tests;
