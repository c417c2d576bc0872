//! Retry budgets shared by a fleet (contract 6.3, 6.7).
//!
//! Attempts never wait for Redis: each replica decides on its own budget, which
//! also holds the rest of the fleet's counts as last shared. Every `SHARE_EVERY`
//! one pipeline per replica adds the counts made here since the last round to
//! per-second buckets (`{prefix}budget:{upstream}:{second}:f|r`, expiring after
//! the window) and reads the window's buckets back; the fleet's sums less this
//! replica's own additions are the others' counts. So the fleet's retries are
//! capped within one round of staleness, and Redis sees one round trip per
//! replica per round, whatever the request rate. While Redis is unreachable the
//! others' counts are zero: each replica keeps its own budget.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{CALL_TIMEOUT, Redis, unix_millis};
use crate::budget::Counts;
use crate::completion::Engine;

/// How often counts are shared: well within the contract's 1 s.
pub const SHARE_EVERY: Duration = Duration::from_millis(250);

/// What this replica added to one upstream's buckets, by second.
#[derive(Default)]
struct Ledger(VecDeque<(u64, Counts)>);

impl Ledger {
    fn add(&mut self, second: u64, counts: Counts) {
        match self.0.back_mut() {
            Some((at, sum)) if *at == second => {
                sum.firsts += counts.firsts;
                sum.retries += counts.retries;
            }
            _ => self.0.push_back((second, counts)),
        }
    }

    /// This replica's additions from `since` on; older entries are forgotten.
    fn since(&mut self, since: u64) -> Counts {
        while self.0.front().is_some_and(|(at, _)| *at < since) {
            self.0.pop_front();
        }
        self.0.iter().fold(Counts::default(), |sum, (_, c)| Counts {
            firsts: sum.firsts + c.firsts,
            retries: sum.retries + c.retries,
        })
    }
}

/// Shares `engine`'s budgets through `redis` until the engine is gone.
pub fn share(engine: &Arc<Engine>, redis: Arc<Redis>, window: Duration) {
    let engine = Arc::downgrade(engine);
    redis.clone().spawn(async move {
        let mut ledgers: Vec<Ledger> = Vec::new();
        let seconds = window.as_secs().max(1);
        loop {
            tokio::time::sleep(SHARE_EVERY).await;
            let Some(engine) = Weak::upgrade(&engine) else {
                return;
            };
            ledgers.resize_with(engine.upstreams.len(), Ledger::default);
            round(&engine, &redis, &mut ledgers, seconds).await;
        }
    });
}

/// One round: add this replica's new counts, read the window's sums.
async fn round(engine: &Engine, redis: &Redis, ledgers: &mut [Ledger], seconds: u64) {
    let now = unix_millis() / 1_000;
    let first_second = now + 1 - seconds;
    let mut pipe = redis::pipe();
    let mut added = Vec::with_capacity(ledgers.len());
    for (index, upstream) in engine.upstreams.iter().enumerate() {
        let counts = engine.unshared_budget(index);
        let bucket = |second: u64, kind: &str| {
            redis.key(&format!("budget:{}:{second}:{kind}", upstream.name))
        };
        for (kind, count) in [("f", counts.firsts), ("r", counts.retries)] {
            if count > 0 {
                pipe.incr(bucket(now, kind), count).ignore();
                pipe.expire(bucket(now, kind), (seconds + 2) as i64)
                    .ignore();
            }
        }
        for kind in ["f", "r"] {
            let keys: Vec<String> = (first_second..=now).map(|s| bucket(s, kind)).collect();
            pipe.mget(keys);
        }
        added.push(counts);
    }
    let sums: Result<Vec<Vec<Option<u64>>>, _> = redis
        .call("budget_share", CALL_TIMEOUT, |mut c| async move {
            pipe.query_async(&mut c).await
        })
        .await;
    for (index, ledger) in ledgers.iter_mut().enumerate() {
        let others = match &sums {
            Ok(sums) => {
                ledger.add(now, added[index]);
                let own = ledger.since(first_second);
                let sum = |i: usize| -> u64 { sums.get(i).map_or(0, |v| v.iter().flatten().sum()) };
                Counts {
                    firsts: sum(2 * index).saturating_sub(own.firsts),
                    retries: sum(2 * index + 1).saturating_sub(own.retries),
                }
            }
            // Unreachable: each replica on its own budget until Redis is back.
            Err(_) => Counts::default(),
        };
        engine.set_fleet_budget(index, others);
    }
}
