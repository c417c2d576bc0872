//! Retry budgets shared by a fleet (contract 6.3, 6.7).
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

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{CALL_TIMEOUT, Redis, unix_millis};
use crate::budget::Counts;
use crate::completion::Engine;

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

/// Shares `engine`'s budgets through `redis` until the engine is gone.
pub fn share(engine: &Arc<Engine>, redis: Arc<Redis>, window: Duration) {
    let engine = Arc::downgrade(engine);
    let replica = uuid::Uuid::new_v4().simple().to_string();
    let seconds = window.as_secs().max(1);
    drop(redis.clone().spawn(async move {
        loop {
            tokio::time::sleep(SHARE_EVERY).await;
            let Some(engine) = Weak::upgrade(&engine) else {
                return;
            };
            round(&engine, &redis, &replica, seconds).await;
        }
    }));
}

/// One round: add this replica's new counts, read the others'.
async fn round(engine: &Engine, redis: &Redis, replica: &str, seconds: u64) {
    let now = unix_millis() / 1_000;
    let mut pipe = redis::pipe();
    for (index, upstream) in engine.upstreams.iter().enumerate() {
        let counts = engine.unshared_budget(index);
        let buckets = (now + 1 - seconds..=now)
            .map(|second| redis.key(&format!("budget:{}:{second}", upstream.name)));
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
    for index in 0..engine.upstreams.len() {
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
        engine.set_fleet_budget(index, counts);
    }
}
