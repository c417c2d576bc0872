//! Kept answers in the fleet's Redis, for every replica: a hit on one replica for
//! an answer another made.
//!
//! An answer is a string at `{prefix}cache:{hash}` that expires by itself when it
//! is of no more use (`CachePolicy::longest`), so Redis does not fill up. The
//! sorted set `{prefix}cache:lru` orders every kept answer (`{task}:{hash}`) by
//! its last use, for `LADLE_CACHE_MAX_ENTRIES` across the fleet; a set per task
//! (`{prefix}cache:task:{task}`) finds a task's answers to count or forget. A hit
//! is one script: the read and the use in one round trip. While Redis is
//! unreachable every lookup is a miss and every keep a no-op.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::Script;
use redis::aio::ConnectionManager;

use super::{AnswerCache, AnswerKey, Kept};
use crate::fleet::{CALL_TIMEOUT, Redis};
use crate::store_down::{Cause, StoreDown};
use crate::wall::unix_millis;

/// `ARGV`: prefix, hash, member, now. The kept text, its use recorded.
const GET: &str = r#"
local text = redis.call('GET', ARGV[1] .. 'cache:' .. ARGV[2])
if text then redis.call('ZADD', ARGV[1] .. 'cache:lru', 'XX', ARGV[4], ARGV[3]) end
return text
"#;

/// `ARGV`: prefix, hash, task, text, keep ms, now, max entries. Keeps it, then
/// forgets the least recently used past the bound.
const PUT: &str = r#"
local prefix, hash, task = ARGV[1], ARGV[2], ARGV[3]
redis.call('SET', prefix .. 'cache:' .. hash, ARGV[4], 'PX', ARGV[5])
redis.call('ZADD', prefix .. 'cache:lru', ARGV[6], task .. ':' .. hash)
redis.call('SADD', prefix .. 'cache:task:' .. task, hash)
local over = redis.call('ZCARD', prefix .. 'cache:lru') - tonumber(ARGV[7])
if over > 0 then
  for _, member in ipairs(redis.call('ZPOPMIN', prefix .. 'cache:lru', over)) do
    local t, h = string.match(member, '^(.*):(%x+)$')
    if h then
      redis.call('DEL', prefix .. 'cache:' .. h)
      redis.call('SREM', prefix .. 'cache:task:' .. t, h)
    end
  end
end
return 1
"#;

/// `ARGV`: prefix, task, forget (`1`) or count (`0`). How many of the task's
/// answers are kept (those gone by themselves are dropped from its sets).
const TASK: &str = r#"
local prefix, task = ARGV[1], ARGV[2]
local set = prefix .. 'cache:task:' .. task
local live = 0
for _, hash in ipairs(redis.call('SMEMBERS', set)) do
  local key = prefix .. 'cache:' .. hash
  if redis.call('EXISTS', key) == 1 then live = live + 1 end
  if ARGV[3] == '1' or redis.call('EXISTS', key) == 0 then
    redis.call('DEL', key)
    redis.call('SREM', set, hash)
    redis.call('ZREM', prefix .. 'cache:lru', task .. ':' .. hash)
  end
end
return live
"#;

/// Kept answers in the fleet's Redis.
pub struct RedisCache {
    redis: Arc<Redis>,
    max_entries: usize,
    get: Script,
    put: Script,
    task: Script,
}

impl RedisCache {
    /// The kept answers on the fleet's `redis`, at most `max_entries`.
    pub fn new(redis: Arc<Redis>, max_entries: usize) -> RedisCache {
        RedisCache {
            redis,
            max_entries: max_entries.max(1),
            get: Script::new(GET),
            put: Script::new(PUT),
            task: Script::new(TASK),
        }
    }

    /// One call through the fleet's handle; while Redis is unreachable, none.
    async fn call<T, F, Fut>(&self, op: &'static str, f: F) -> Result<T, StoreDown>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        if !self.redis.worth_trying() {
            return Err(StoreDown::new(op, Cause::Unreachable));
        }
        self.redis
            .call(op, CALL_TIMEOUT, f)
            .await
            .map_err(|e| StoreDown::new(op, Cause::Redis(e.to_string())))
    }

    async fn task_call(&self, task: &str, forget: bool) -> Result<u64, StoreDown> {
        let mut invocation = self.task.prepare_invoke();
        invocation
            .arg(self.redis.key(""))
            .arg(task)
            .arg(if forget { "1" } else { "0" });
        self.call("cache_task", |mut c| async move {
            invocation.invoke_async(&mut c).await
        })
        .await
    }
}

impl AnswerCache for RedisCache {
    fn get<'a>(
        &'a self,
        key: &'a AnswerKey,
    ) -> BoxFuture<'a, Result<Option<Arc<Kept>>, StoreDown>> {
        Box::pin(async move {
            let mut invocation = self.get.prepare_invoke();
            invocation
                .arg(self.redis.key(""))
                .arg(&key.hash)
                .arg(format!("{}:{}", key.task, key.hash))
                .arg(unix_millis());
            let text: Option<String> = self
                .call("cache_get", |mut c| async move {
                    invocation.invoke_async(&mut c).await
                })
                .await?;
            Ok(text
                .as_deref()
                .and_then(Kept::decode)
                .filter(|kept| kept.request == key.request)
                .map(Arc::new))
        })
    }

    fn put<'a>(
        &'a self,
        key: &'a AnswerKey,
        kept: &'a Kept,
        keep: Duration,
    ) -> BoxFuture<'a, Result<(), StoreDown>> {
        Box::pin(async move {
            let keep_ms = keep.as_millis().max(1) as u64;
            let mut invocation = self.put.prepare_invoke();
            invocation
                .arg(self.redis.key(""))
                .arg(&key.hash)
                .arg(&key.task)
                .arg(kept.encode())
                .arg(keep_ms)
                .arg(unix_millis())
                .arg(self.max_entries);
            self.call("cache_put", |mut c| async move {
                invocation.invoke_async::<i64>(&mut c).await
            })
            .await
            .map(drop)
        })
    }

    fn count<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, StoreDown>> {
        Box::pin(self.task_call(task, false))
    }

    fn forget<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<u64, StoreDown>> {
        Box::pin(self.task_call(task, true))
    }
}
