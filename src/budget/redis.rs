//! Retry budgets shared by a fleet (contract 6.3, 6.7): one replica's budget with
//! the rest of the fleet's counts added, and the rounds that exchange them.
//!
//! Attempts never wait for Redis: each replica decides on its own budget, which
//! also holds the rest of the fleet's counts as last shared. Every `SHARE_EVERY`
//! one pipeline per replica runs a script per upstream that adds the counts made
//! here since the last round to this replica's fields of the current second's
//! bucket (`{prefix}budget:{upstream}:{second}`, a hash expiring after the
//! window) and sums the window's buckets without this replica's fields: the
//! others' counts. Leaving one's own fields out by name means a round that timed
//! out after Redis applied it never makes a replica count itself as another. So
//! the fleet's retries are capped within one round of staleness, and Redis sees
//! one round trip per replica per round, whatever the request rate. While Redis
//! is unreachable the others' counts are zero: each replica keeps its own budget.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::background::{Background, Continue};
use crate::engine::budget::{Budget, BudgetSettings, Counts, RetryBudget};
use crate::fleet::{CALL_TIMEOUT, Redis};
use crate::wall::unix_millis;

/// How often counts are shared: well within the contract's 1 s.
pub const SHARE_EVERY: Duration = Duration::from_millis(250);

/// `KEYS`: the window's buckets, the current second's last. `ARGV`: this
/// replica's id, its new first attempts and retries, the buckets' life in s.
const SHARE: &str = r#"
local now = KEYS[#KEYS]
local own = ARGV[1] .. ':'
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', now, own .. 'f', ARGV[2]) end
if tonumber(ARGV[3]) > 0 then redis.call('HINCRBY', now, own .. 'r', ARGV[3]) end
redis.call('EXPIRE', now, ARGV[4])
local firsts, retries = 0, 0
for _, key in ipairs(KEYS) do
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local name = fields[i]
    if string.sub(name, 1, #own) ~= own then
      if string.sub(name, -2) == ':f' then
        firsts = firsts + tonumber(fields[i + 1])
      else
        retries = retries + tonumber(fields[i + 1])
      end
    end
  end
end
return {firsts, retries}
"#;

/// One replica's budget for one upstream, with what the rest of the fleet made.
#[derive(Debug)]
pub struct RedisBudget {
    local: RetryBudget,
    /// The other replicas' counts over the window, as last shared; zero while
    /// Redis is unreachable (each replica then keeps its own budget).
    others: Counts,
    /// Counts made here and not yet shared.
    unshared: Counts,
}

impl RedisBudget {
    /// An empty budget that knows of no other replica yet.
    pub fn new(settings: BudgetSettings) -> Self {
        RedisBudget {
            local: RetryBudget::new(settings),
            others: Counts::default(),
            unshared: Counts::default(),
        }
    }

    /// The counts made here since the last call, for the fleet.
    pub fn take_unshared(&mut self) -> Counts {
        std::mem::take(&mut self.unshared)
    }

    /// What the other replicas made over the window (zero: none, or unknown).
    pub fn set_others(&mut self, others: Counts) {
        self.others = others;
    }
}

impl Budget for RedisBudget {
    fn deposit(&mut self, now: Instant) {
        self.local.deposit(now);
        self.unshared.firsts += 1;
    }

    fn has_room(&mut self, now: Instant) -> bool {
        let counts = self.local.counts(now) + self.others;
        self.local.fits(counts)
    }

    fn withdraw(&mut self, now: Instant) {
        self.local.withdraw(now);
        self.unshared.retries += 1;
    }
}

/// Every upstream's shared budget, by upstream name.
pub type RedisBudgets = Vec<(String, Arc<Mutex<RedisBudget>>)>;

/// Shares `budgets` through `redis`, a round every `SHARE_EVERY`, until shutdown
/// (or until the budgets are gone).
pub fn share(budgets: &RedisBudgets, redis: Arc<Redis>, window: Duration, background: &Background) {
    let budgets: Vec<(String, Weak<Mutex<RedisBudget>>)> = budgets
        .iter()
        .map(|(name, budget)| (name.clone(), Arc::downgrade(budget)))
        .collect();
    let replica = uuid::Uuid::new_v4().simple().to_string();
    let seconds = window.as_secs().max(1);
    let runtime = redis.runtime().clone();
    background.every(SHARE_EVERY, Some(&runtime), move || {
        let (budgets, redis, replica) = (budgets.clone(), redis.clone(), replica.clone());
        async move {
            let live: Option<Vec<_>> = budgets
                .iter()
                .map(|(name, budget)| Some((name.clone(), budget.upgrade()?)))
                .collect();
            let Some(live) = live else {
                return Continue::Stop;
            };
            round(&live, &redis, &replica, seconds).await;
            Continue::Yes
        }
    });
}

/// One round: add this replica's new counts, read the others'.
async fn round(
    budgets: &[(String, Arc<Mutex<RedisBudget>>)],
    redis: &Redis,
    replica: &str,
    seconds: u64,
) {
    let now = unix_millis() / 1_000;
    let mut pipe = redis::pipe();
    for (name, budget) in budgets {
        let counts = lock(budget).take_unshared();
        let buckets =
            (now + 1 - seconds..=now).map(|second| redis.key(&format!("budget:{name}:{second}")));
        // EVAL, not EVALSHA: a pipeline cannot load a script Redis has lost.
        pipe.cmd("EVAL")
            .arg(SHARE)
            .arg(seconds)
            .arg(buckets.collect::<Vec<_>>())
            .arg(replica)
            .arg(counts.firsts)
            .arg(counts.retries)
            .arg(seconds + 2);
    }
    let others: Result<Vec<(u64, u64)>, _> = redis
        .call("budget_share", CALL_TIMEOUT, |mut c| async move {
            pipe.query_async(&mut c).await
        })
        .await;
    for (index, (_, budget)) in budgets.iter().enumerate() {
        let counts = match &others {
            Ok(others) => others
                .get(index)
                .map_or_else(Counts::default, |(f, r)| Counts {
                    firsts: *f,
                    retries: *r,
                }),
            // Unreachable: each replica on its own budget until Redis is back.
            Err(_) => Counts::default(),
        };
        lock(budget).set_others(counts);
    }
}

/// A lock whose holder panicked still guards consistent counts.
fn lock(budget: &Mutex<RedisBudget>) -> std::sync::MutexGuard<'_, RedisBudget> {
    budget
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::engine::budget::tests::{settings, try_retry};

    #[test]
    fn the_other_replicas_counts_share_one_budget() {
        let t0 = Instant::now();
        let mut budget = RedisBudget::new(settings(0.5, 0));
        for _ in 0..10 {
            budget.deposit(t0);
        }
        // Alone: 0.5 × 10 = 5 retries. The fleet made 10 more first attempts and
        // already 12 retries: 0.5 × 20 = 10 < 13, so none is left.
        budget.set_others(Counts {
            firsts: 10,
            retries: 12,
        });
        assert!(!try_retry(&mut budget, t0));
        budget.set_others(Counts {
            firsts: 10,
            retries: 4,
        });
        let allowed = (0..10).filter(|_| try_retry(&mut budget, t0)).count();
        assert_eq!(allowed, 6, "10 allowed, 4 made elsewhere");
        assert_eq!(
            budget.take_unshared(),
            Counts {
                firsts: 10,
                retries: 6
            }
        );
        assert_eq!(budget.take_unshared(), Counts::default(), "taken once");
    }
}
