//! One bucket per client key for a fleet (contract 8): `rate_per_s` holds for
//! every replica together, seen by each within a second, and no request waits for
//! Redis.
//!
//! As the retry budgets are shared (`budget::redis`): every `SHARE_EVERY` one
//! pipeline per replica runs a script per key that adds the tokens taken here
//! since the last round to this replica's field of `{prefix}rate:{name}` (a hash
//! that expires when the fleet stops using it) and sums the other fields. What the
//! others took since the last round is taken from this replica's bucket too, so
//! each bucket holds the whole fleet to its rate, one round late at most. While
//! Redis is unreachable, the tokens taken here wait for the next round and each
//! replica keeps its own bucket.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::Clients;
use crate::background::{Background, Continue};
use crate::fleet::{CALL_TIMEOUT, Redis};

/// How often the fleet's takings are shared: well within the contract's 1 s.
pub const SHARE_EVERY: Duration = Duration::from_millis(250);

/// How long a key's hash outlives its last round, in seconds.
const LIFE_S: u64 = 3_600;

/// `KEYS[1]`: the key's hash. `ARGV`: this replica's id, the tokens it took
/// since the last round, the hash's life. The other replicas' takings, summed.
const SHARE: &str = r#"
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
local others = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] ~= ARGV[1] then others = others + tonumber(fields[i + 1]) end
end
return others
"#;

/// Shares the buckets of `clients` through `redis`, a round every `SHARE_EVERY`,
/// until shutdown.
pub fn share(clients: Arc<Clients>, redis: Arc<Redis>, background: &Background) {
    let replica = uuid::Uuid::new_v4().simple().to_string();
    let runtime = redis.runtime().clone();
    // What the others had taken at the last round, by key name.
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    background.every(SHARE_EVERY, Some(&runtime), move || {
        let (clients, redis, replica, seen) = (
            clients.clone(),
            redis.clone(),
            replica.clone(),
            seen.clone(),
        );
        async move {
            round(&clients, &redis, &replica, &seen).await;
            Continue::Yes
        }
    });
}

/// One round: add this replica's takings, take the others' new ones.
async fn round(
    clients: &Clients,
    redis: &Redis,
    replica: &str,
    seen: &Mutex<HashMap<String, u64>>,
) {
    let buckets = clients.buckets();
    if buckets.is_empty() {
        return;
    }
    let mut pipe = redis::pipe();
    let mut taken = Vec::with_capacity(buckets.len());
    for (name, bucket) in &buckets {
        let here = bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_unshared();
        taken.push(here);
        // EVAL, not EVALSHA: a pipeline cannot load a script Redis has lost.
        pipe.cmd("EVAL")
            .arg(SHARE)
            .arg(1)
            .arg(redis.key(&format!("rate:{name}")))
            .arg(replica)
            .arg(here)
            .arg(LIFE_S);
    }
    let others: Result<Vec<u64>, _> = redis
        .call("rate_share", CALL_TIMEOUT, |mut c| async move {
            pipe.query_async(&mut c).await
        })
        .await;
    let now = Instant::now();
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    for (index, (name, bucket)) in buckets.iter().enumerate() {
        let mut bucket = bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(total) = others.as_ref().ok().and_then(|o| o.get(index).copied()) else {
            // Not shared: told again next round.
            bucket.not_shared(taken[index]);
            continue;
        };
        // The first round only learns where the others stand; a hash that
        // expired and started again counts from zero.
        if let Some(before) = seen.insert(name.clone(), total) {
            bucket.spent_elsewhere(total.saturating_sub(before), now);
        }
    }
}
