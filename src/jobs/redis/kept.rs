//! A stored response's two writes outside a run (contract 12): one made without
//! `background` is written finished (never queued, so in no set), and a deleted
//! one is forgotten wherever it stands.

use super::{RedisJobs, StoreDown, fields};
use crate::jobs::Job;

/// Forgets job `ARGV[1]` of client `ARGV[2]` (its key and sets as `ending`
/// gives them): out of every set, leaving its client's count if it was
/// unfinished. 1 if it was there.
pub(super) const FORGET: &str = r#"
local status = redis.call('HGET', KEYS[1], 'status')
if not status or redis.call('HGET', KEYS[1], 'client') ~= ARGV[2] then return 0 end
for i = 2, 5 do redis.call('ZREM', KEYS[i], ARGV[1]) end
if status ~= 'succeeded' and status ~= 'failed' and status ~= 'canceled' then
  if redis.call('HINCRBY', KEYS[6], ARGV[2], -1) <= 0 then redis.call('HDEL', KEYS[6], ARGV[2]) end
end
redis.call('DEL', KEYS[1])
return 1
"#;

impl RedisJobs {
    /// `JobStore::keep_finished` for Redis: the hash, expiring as a finished
    /// job's does.
    pub(super) async fn write_finished(&self, job: Job) -> Result<bool, StoreDown> {
        let fields = fields::encode(&job)?;
        let (key, ttl) = (self.job_key(&job.id), self.ttl_ms());
        let mut pipe = redis::pipe();
        pipe.atomic()
            .del(&key)
            .ignore()
            .hset_multiple(&key, &fields)
            .ignore()
            .pexpire(&key, ttl as i64)
            .ignore();
        self.call("jobs_keep", |mut c| async move {
            pipe.query_async::<()>(&mut c).await
        })
        .await?;
        Ok(true)
    }

    /// `JobStore::forget` for Redis.
    pub(super) async fn forget_job(&self, id: &str, client: &str) -> Result<bool, StoreDown> {
        let mut invocation = self.scripts.forget.prepare_invoke();
        self.ending(&mut invocation, id).arg(id).arg(client);
        let forgotten: i64 = self
            .call("jobs_forget", |mut c| async move {
                invocation.invoke_async(&mut c).await
            })
            .await?;
        Ok(forgotten == 1)
    }
}
