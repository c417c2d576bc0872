//! Which upstream an attempt goes to (contract 6.1), pure: the order of one
//! request, fixed when it starts, where the request is in it and what each upstream
//! did in it, and the next usable upstream after the one that failed. Breaker state
//! and randomness come in as arguments, so every rule is a unit test.

use std::time::Duration;

use crate::engine::retry::NextUpstream;

/// What the order needs to know of one upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Lower is tried first.
    pub priority: u32,
    /// Shares first attempts among usable upstreams of one priority.
    pub weight: u32,
    /// Not open, and not half-open with its probe in flight.
    pub usable: bool,
    /// Attempts in a row a request gives it before a retry moves on.
    pub attempts: u32,
}

/// The order of one request, as indexes into `candidates`: first a usable upstream
/// of the lowest priority number among usable ones, picked by weight with `draw`
/// (uniform in [0, 1)); then every other upstream by priority, then higher weight,
/// then listing order. `None` when no upstream is usable.
pub fn request_order(candidates: &[Candidate], draw: f64) -> Option<Vec<usize>> {
    let best = candidates
        .iter()
        .filter(|c| c.usable)
        .map(|c| c.priority)
        .min()?;
    let group: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].usable && candidates[i].priority == best)
        .collect();
    let total: u64 = group.iter().map(|&i| u64::from(candidates[i].weight)).sum();
    let target = (draw.clamp(0.0, 1.0) * total as f64) as u64;
    let mut passed = 0;
    let first = group
        .iter()
        .copied()
        .find(|&i| {
            passed += u64::from(candidates[i].weight);
            passed > target
        })
        .or(group.last().copied())?;
    let mut rest: Vec<usize> = (0..candidates.len()).filter(|&i| i != first).collect();
    rest.sort_by_key(|&i| {
        (
            candidates[i].priority,
            std::cmp::Reverse(candidates[i].weight),
            i,
        )
    });
    let mut order = Vec::with_capacity(candidates.len());
    order.push(first);
    order.extend(rest);
    Some(order)
}

/// The position in `order` of the next usable upstream after position `from`,
/// wrapping round and ending with `from` itself (with one upstream, that same one).
pub fn next_after(order: &[usize], from: usize, usable: impl Fn(usize) -> bool) -> Option<usize> {
    (1..=order.len())
        .map(|step| (from + step) % order.len())
        .find(|&position| usable(order[position]))
}

/// One request's way through the upstreams.
#[derive(Debug)]
pub struct UpstreamOrder {
    /// Upstream indexes, in the order of this request.
    order: Vec<usize>,
    /// Where in `order` the current (or next) attempt goes.
    position: usize,
    /// Per upstream index: what happened there in this request.
    visits: Vec<Visit>,
    /// Per upstream index: its attempts in a row.
    attempts: Vec<u32>,
    /// Attempts in a row on the current upstream, counted afresh each time the
    /// request comes to it.
    streak: u32,
}

#[derive(Debug, Default, Clone, Copy)]
struct Visit {
    tried: bool,
    /// Never to be called again in this request (its TLS cannot be trusted).
    excluded: bool,
    /// The `Retry-After` it sent in this request, if it did.
    retry_after: Option<Duration>,
}

/// Where the next attempt would go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    /// Its position in the request's order.
    pub position: usize,
    /// Its upstream's index.
    pub index: usize,
    /// What the retry policy sees of it.
    pub upstream: NextUpstream,
}

impl UpstreamOrder {
    /// The order for a new request (`candidates` by upstream index); `None` when
    /// no upstream is usable.
    pub fn start(candidates: &[Candidate], draw: f64) -> Option<UpstreamOrder> {
        let order = request_order(candidates, draw)?;
        Some(UpstreamOrder {
            visits: vec![Visit::default(); order.len()],
            attempts: candidates.iter().map(|c| c.attempts.max(1)).collect(),
            order,
            position: 0,
            streak: 0,
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
        self.streak += 1;
        !std::mem::replace(&mut self.visits[current].tried, true)
    }

    /// Remembers how the current upstream's attempt failed: what it asked for in
    /// `Retry-After`, and whether it may never be called again in this request.
    pub fn note_failure(&mut self, retry_after: Option<Duration>, exclude: bool) {
        let visit = &mut self.visits[self.order[self.position]];
        if retry_after.is_some() {
            visit.retry_after = retry_after;
        }
        visit.excluded |= exclude;
    }

    /// Where a retry goes: the current upstream while it has attempts left in a
    /// row and `usable` (by index) admits it; else the next one after it that
    /// `usable` admits, wrapping round to it, leaving out the excluded ones and,
    /// with `leave_current`, the current one.
    pub fn next(&self, leave_current: bool, usable: impl Fn(usize) -> bool) -> Option<Next> {
        let current = self.current();
        let visit = self.visits[current];
        let stays = !leave_current && !visit.excluded && self.streak < self.attempts[current];
        if stays && usable(current) {
            return Some(self.at(self.position));
        }
        let position = next_after(&self.order, self.position, |index| {
            let left_out = self.visits[index].excluded || (leave_current && index == current);
            !left_out && usable(index)
        })?;
        Some(self.at(position))
    }

    /// Where a retry after a failure goes (6.1 as amended): after a timeout, an
    /// upstream this request has not tried, at once, when one is usable
    /// (asking the silent one again is the wrong bet, whatever its `attempts`);
    /// else as `next` says.
    pub fn next_after(&self, timed_out: bool, usable: impl Fn(usize) -> bool) -> Option<Next> {
        if timed_out && let Some(untried) = self.next(true, &usable).filter(|n| n.upstream.untried)
        {
            return Some(untried);
        }
        self.next(false, usable)
    }

    /// Where a continuation of a cut goes (11.4): the current upstream if
    /// `usable` admits it, whatever its `attempts`; else the next one after it
    /// that `usable` admits.
    pub fn stay_or_next(&self, usable: impl Fn(usize) -> bool) -> Option<Next> {
        let current = self.current();
        if !self.visits[current].excluded && usable(current) {
            return Some(self.at(self.position));
        }
        self.next(true, usable)
    }

    /// Whether every attempt so far went to the current upstream.
    pub fn stayed(&self) -> bool {
        let current = self.current();
        self.visits
            .iter()
            .enumerate()
            .all(|(index, visit)| index == current || !visit.tried)
    }

    /// The upstream at `position`, as a retry would see it.
    fn at(&self, position: usize) -> Next {
        let index = self.order[position];
        let visit = self.visits[index];
        Next {
            position,
            index,
            upstream: NextUpstream {
                untried: !visit.tried,
                retry_after: visit.retry_after.filter(|_| visit.tried),
            },
        }
    }

    /// The next attempt goes to upstream `index` (one of the order's), which had
    /// the first free slot.
    pub fn go_to(&mut self, index: usize) {
        if let Some(position) = self.order.iter().position(|i| *i == index)
            && position != self.position
        {
            self.position = position;
            self.streak = 0;
        }
    }

    /// The next attempt goes to `next`.
    pub fn move_to(&mut self, next: Next) {
        if next.position != self.position {
            self.streak = 0;
        }
        self.position = next.position;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn up(priority: u32, weight: u32) -> Candidate {
        Candidate {
            priority,
            weight,
            usable: true,
            attempts: 1,
        }
    }

    /// Where the retries after failures of `order`'s attempts go, for `n` attempts.
    fn walk(candidates: &[Candidate], n: usize) -> Vec<usize> {
        let mut order = UpstreamOrder::start(candidates, 0.0).expect("usable");
        let mut visited = Vec::new();
        for _ in 0..n {
            order.enter();
            visited.push(order.current());
            let next = order.next(false, |_| true).expect("a next upstream");
            order.move_to(next);
        }
        visited
    }

    #[test]
    fn a_retry_stays_on_an_upstream_while_it_has_attempts_in_a_row_left() {
        let primary = Candidate {
            attempts: 2,
            ..up(0, 1)
        };
        assert_eq!(walk(&[primary, up(1, 1)], 6), [0, 0, 1, 0, 0, 1]);
        assert_eq!(
            walk(&[up(0, 1), up(1, 1)], 4),
            [0, 1, 0, 1],
            "the default moves on"
        );
        let lone = Candidate {
            attempts: 3,
            ..up(0, 1)
        };
        assert_eq!(
            walk(&[lone], 4),
            [0, 0, 0, 0],
            "with one upstream, that same one"
        );
    }

    #[test]
    fn a_timeout_moves_on_to_an_untried_upstream_whatever_the_attempts_left() {
        let primary = Candidate {
            attempts: 2,
            ..up(0, 1)
        };
        let mut order = UpstreamOrder::start(&[primary, up(1, 1)], 0.0).expect("usable");
        order.enter();
        assert!(order.stayed());
        let next = order.next_after(false, |_| true).expect("a retry");
        assert_eq!(next.index, 0, "any other failure stays");
        let next = order.next_after(true, |_| true).expect("a retry");
        assert_eq!((next.index, next.upstream.untried), (1, true));
        order.move_to(next);
        order.enter();
        assert!(!order.stayed());
        order.move_to(order.next(false, |_| true).expect("back"));
        order.enter();
        let next = order.next_after(true, |_| true).expect("a retry");
        assert_eq!(next.index, 0, "no untried upstream left: as before");
    }

    #[test]
    fn a_continuation_stays_whatever_the_attempts_unless_it_cannot() {
        let mut order = UpstreamOrder::start(&[up(0, 1), up(1, 1)], 0.0).expect("usable");
        order.enter();
        assert_eq!(order.next(false, |_| true).expect("a retry").index, 1);
        assert_eq!(order.stay_or_next(|_| true).expect("same").index, 0);
        let next = order.stay_or_next(|index| index == 1).expect("the next");
        assert_eq!((next.index, next.upstream.untried), (1, true));
        assert_eq!(order.stay_or_next(|_| false), None);
    }

    #[test]
    fn an_excluded_or_unusable_upstream_is_left_however_many_attempts_it_has() {
        let primary = Candidate {
            attempts: 5,
            ..up(0, 1)
        };
        let mut order = UpstreamOrder::start(&[primary, up(1, 1)], 0.0).expect("usable");
        order.enter();
        let next = order.next(false, |index| index != 0).expect("the backup");
        assert_eq!((next.index, next.upstream.untried), (1, true));
        order.note_failure(None, true);
        let next = order.next(false, |_| true).expect("the backup");
        assert_eq!(next.index, 1, "excluded: never again in this request");
    }

    #[test]
    fn the_first_is_picked_by_weight_among_the_lowest_priority() {
        let all = [up(1, 1), up(0, 1), up(0, 3)];
        assert_eq!(request_order(&all, 0.0), Some(vec![1, 2, 0]));
        assert_eq!(request_order(&all, 0.24), Some(vec![1, 2, 0]));
        assert_eq!(request_order(&all, 0.25), Some(vec![2, 1, 0]));
        assert_eq!(request_order(&all, 0.99), Some(vec![2, 1, 0]));
    }

    #[test]
    fn the_rest_follow_by_priority_then_higher_weight_then_listing() {
        let all = [up(2, 1), up(1, 1), up(1, 5), up(0, 1), up(2, 1)];
        assert_eq!(request_order(&all, 0.5), Some(vec![3, 2, 1, 0, 4]));
    }

    #[test]
    fn unusable_upstreams_are_never_first_and_none_usable_is_none() {
        let mut all = [up(0, 9), up(1, 1)];
        all[0].usable = false;
        assert_eq!(request_order(&all, 0.0), Some(vec![1, 0]));
        all[1].usable = false;
        assert_eq!(request_order(&all, 0.5), None);
    }

    #[test]
    fn the_next_usable_wraps_round_to_the_same_one() {
        let order = [2, 0, 1];
        assert_eq!(next_after(&order, 0, |_| true), Some(1));
        assert_eq!(next_after(&order, 2, |_| true), Some(0));
        assert_eq!(next_after(&order, 0, |i| i == 1), Some(2));
        assert_eq!(next_after(&order, 1, |i| i == 0), Some(1), "only itself");
        assert_eq!(next_after(&order, 1, |_| false), None);
        assert_eq!(next_after(&[0], 0, |_| true), Some(0));
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config(256))]

        /// Over evenly spread draws, each upstream of the lowest priority comes
        /// first in proportion to its weight, exactly.
        #[test]
        fn first_attempts_are_shared_by_weight(
            weights in proptest::collection::vec(1u32..10, 1..6),
        ) {
            let all: Vec<Candidate> = weights.iter().map(|&w| up(0, w)).collect();
            let total: u32 = weights.iter().sum();
            let draws = total * 100;
            let mut firsts = vec![0u32; weights.len()];
            for k in 0..draws {
                let draw = (f64::from(k) + 0.5) / f64::from(draws);
                let order = request_order(&all, draw).expect("all usable");
                prop_assert_eq!(order.len(), all.len());
                firsts[order[0]] += 1;
            }
            for (i, &w) in weights.iter().enumerate() {
                prop_assert_eq!(firsts[i], w * 100);
            }
        }
    }
}
