//! Idempotency records in Redis, for a fleet (contract 6.6, 6.7).
//!
//! A record is a hash at `{prefix}idem:{key}`: the request's fingerprint, the
//! run that owns it, and its state: `running` (a claim, with a lease the owning
//! replica renews while the run lives, so a claim of a replica that died frees
//! the key when the lease runs out), `kept` (the body, for the TTL) or `failed`
//! (the error, briefly, for the repeats that waited). Claiming and finishing are
//! Lua scripts, so two replicas cannot both claim a key, and a late report never
//! overwrites a newer run's record.
//!
//! A repeat waiting on a run (on any replica) polls the record, and while it
//! waits keeps `{prefix}idem-watched:{key}` alive (a name no key's record can
//! take), which is how the run's replica
//! knows that somebody still wants the outcome after its own client left. While
//! Redis is unreachable, keys are looked up in this replica's memory instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::Script;
use tokio::time::Instant;

use super::record::FailedRun;
use super::{
    IdempotencyStore, Kept, Limits, Lookup, MAX_KEPT_BYTES, MemoryStore, Outcome, RunSlot,
};
use crate::background::{Background, Continue};
use crate::error::ApiError;
use crate::fleet::{CALL_TIMEOUT, Redis};

/// How long a failed run's error stays for the repeats that wait on it.
const FAILED_FOR: Duration = Duration::from_secs(10);
/// How often a waiting repeat looks at the record.
const POLL: Duration = Duration::from_millis(50);
/// How long a waiter's mark outlives its last poll.
const WATCHED_FOR: Duration = Duration::from_millis(1_000);

const BEGIN: &str = r#"
local r = redis.call('HMGET', KEYS[1], 'state', 'fp', 'body')
if r[1] and r[1] ~= 'failed' then
  if r[2] ~= ARGV[1] then return {'reused'} end
  if r[1] == 'kept' then return {'kept', r[3]} end
  return {'wait'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'running', 'fp', ARGV[1], 'run', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'run'}
"#;

/// Ends run `ARGV[1]`'s claim: `ARGV[2]` is `kept` (body `ARGV[3]`), `failed`
/// (error `ARGV[3]`), `renew` or `gone`; `ARGV[4]` is how long the record lives.
const FINISH: &str = r#"
if redis.call('HGET', KEYS[1], 'run') ~= ARGV[1] then return 0 end
if ARGV[2] == 'renew' and redis.call('HGET', KEYS[1], 'state') ~= 'running' then return 0 end
if ARGV[2] == 'gone' then redis.call('DEL', KEYS[1]) return 1 end
if ARGV[2] == 'kept' then redis.call('HSET', KEYS[1], 'state', 'kept', 'body', ARGV[3]) end
if ARGV[2] == 'failed' then redis.call('HSET', KEYS[1], 'state', 'failed', 'error', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"#;

/// Idempotency records shared by a fleet.
pub struct RedisIdempotency {
    shared: Arc<Shared>,
    memory: MemoryStore,
}

struct Shared {
    redis: Arc<Redis>,
    background: Background,
    limits: Limits,
    begin: Script,
    finish: Script,
    /// This replica's runs: record key → run id, for the lease renewal.
    claims: Mutex<HashMap<String, String>>,
    /// Names this replica's runs apart from every other replica's.
    replica: String,
    runs: AtomicU64,
}

impl RedisIdempotency {
    /// A store on `redis`, with memory for when it is unreachable; its renewal of
    /// this replica's claims begins with `start`.
    pub fn new(redis: Arc<Redis>, limits: Limits, background: &Background) -> Self {
        let shared = Arc::new(Shared {
            redis: redis.clone(),
            background: background.clone(),
            limits,
            begin: Script::new(BEGIN),
            finish: Script::new(FINISH),
            claims: Mutex::default(),
            replica: uuid::Uuid::new_v4().simple().to_string(),
            runs: AtomicU64::new(0),
        });
        RedisIdempotency {
            shared,
            memory: MemoryStore::new(limits),
        }
    }
}

impl IdempotencyStore for RedisIdempotency {
    fn start(&self, background: &Background) {
        let redis = &self.shared.redis;
        let (weak, every) = (Arc::downgrade(&self.shared), redis.lease() / 3);
        background.every(every, Some(redis.runtime()), move || {
            renew(weak.clone(), every)
        });
    }

    fn begin<'a>(
        &'a self,
        key: &'a str,
        fingerprint: u64,
        now: Instant,
        deadline: Instant,
    ) -> BoxFuture<'a, Lookup> {
        Box::pin(async move {
            let shared = &self.shared;
            if !shared.redis.worth_trying() {
                return self.memory.begin_now(key, fingerprint, now);
            }
            let record = shared.redis.key(&format!("idem:{key}"));
            let watched = shared.redis.key(&format!("idem-watched:{key}"));
            let run = format!(
                "{}:{}",
                shared.replica,
                shared.runs.fetch_add(1, Ordering::Relaxed)
            );
            let mut invocation = shared.begin.prepare_invoke();
            invocation
                .key(&record)
                .arg(fingerprint.to_string())
                .arg(&run)
                .arg(shared.redis.lease().as_millis() as u64);
            let found: Result<Vec<String>, _> = shared
                .redis
                .call(
                    "idempotency_begin",
                    within(deadline, 2),
                    |mut c| async move { invocation.invoke_async(&mut c).await },
                )
                .await;
            let Ok(found) = found else {
                return self.memory.begin_now(key, fingerprint, now);
            };
            match found.first().map(String::as_str) {
                Some("reused") => Lookup::Reused,
                Some("kept") => match found.get(1).and_then(|b| Kept::decode(b)) {
                    Some(body) => Lookup::Kept(Arc::new(body)),
                    None => Lookup::Wait(Box::pin(std::future::ready(None))),
                },
                Some("wait") => {
                    Lookup::Wait(Box::pin(wait(shared.clone(), record, watched, fingerprint)))
                }
                _ => {
                    lock(&shared.claims).insert(record.clone(), run.clone());
                    Lookup::Run(Box::new(Claim {
                        shared: shared.clone(),
                        record,
                        watched,
                        run,
                        deadline,
                        reported: false,
                    }))
                }
            }
        })
    }
}

/// Polls a record until its run's outcome (or its end without one: `None`).
async fn wait(
    shared: Arc<Shared>,
    record: String,
    watched: String,
    fingerprint: u64,
) -> Option<Outcome> {
    let fingerprint = fingerprint.to_string();
    loop {
        let (record, watched) = (record.clone(), watched.clone());
        let found: Result<((), Vec<Option<String>>), _> = shared
            .redis
            .call("idempotency_wait", CALL_TIMEOUT, |mut c| async move {
                redis::pipe()
                    .cmd("SET")
                    .arg(watched)
                    .arg(1)
                    .arg("PX")
                    .arg(WATCHED_FOR.as_millis() as u64)
                    .cmd("HMGET")
                    .arg(record)
                    .arg(&["state", "fp", "body", "error"])
                    .query_async(&mut c)
                    .await
            })
            .await;
        // Unreachable for now: keep waiting, within the repeat's own deadline.
        if let Ok((_, fields)) = found {
            let [state, fp, body, error] = <[Option<String>; 4]>::try_from(fields).ok()?;
            match (state.as_deref(), fp == Some(fingerprint.clone())) {
                (None, _) | (_, false) => return None,
                (Some("kept"), true) => {
                    return Some(Ok(Arc::new(Kept::decode(&body?)?)));
                }
                (Some("failed"), true) => {
                    let failed: FailedRun = serde_json::from_str(&error?).ok()?;
                    return Some(Err(failed.into_error()?));
                }
                _ => {}
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A run's claim on a key in Redis; dropped without a report (the run ended
/// with nobody waiting, or its task died), it frees the key.
struct Claim {
    shared: Arc<Shared>,
    record: String,
    /// Kept alive by the repeats that wait on this run.
    watched: String,
    run: String,
    /// The deadline of the request that runs: its client waits no longer.
    deadline: Instant,
    reported: bool,
}

impl Claim {
    /// Ends the claim as `state` with `payload`, if it is still this run's. The
    /// write goes on in the background with the whole `CALL_TIMEOUT` (so a report
    /// outlives a request at its deadline); the future waits for it until
    /// `wait_until`, if given.
    fn report(
        &mut self,
        state: &'static str,
        payload: String,
        ttl: Duration,
        wait_until: Option<Instant>,
    ) -> BoxFuture<'static, ()> {
        self.reported = true;
        self.shared.release(&self.record, &self.run);
        let (shared, record, run) = (self.shared.clone(), self.record.clone(), self.run.clone());
        let runtime = self.shared.redis.runtime();
        let written = self.shared.background.spawn_on(
            async move {
                let mut invocation = shared.finish.prepare_invoke();
                invocation
                    .key(&record)
                    .arg(&run)
                    .arg(state)
                    .arg(payload)
                    .arg(ttl.as_millis() as u64);
                // Unreachable: the claim's lease ends it; `call` logged and counted it.
                let _: Result<i64, _> = shared
                    .redis
                    .call("idempotency_finish", CALL_TIMEOUT, |mut c| async move {
                        invocation.invoke_async(&mut c).await
                    })
                    .await;
            },
            runtime,
        );
        Box::pin(async move {
            if let Some(until) = wait_until {
                let _ = tokio::time::timeout_at(until, written).await;
            }
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.reported {
            drop(self.report("gone", String::new(), Duration::ZERO, None));
        }
    }
}

impl RunSlot for Claim {
    /// Awaited before the run's client gets its last bytes (within its deadline),
    /// so that once a client has its answer, a repeat anywhere is a replay.
    fn succeed(mut self: Box<Self>, body: Arc<Kept>) -> BoxFuture<'static, ()> {
        let (ttl, until) = (self.shared.limits.ttl, Some(self.deadline));
        match body.encode() {
            text if text.len() <= MAX_KEPT_BYTES => self.report("kept", text, ttl, until),
            _ => {
                tracing::warn!(
                    bytes_max = MAX_KEPT_BYTES,
                    "a result too large to keep in redis is not kept"
                );
                self.report("gone", String::new(), ttl, until)
            }
        }
    }

    fn fail(mut self: Box<Self>, error: ApiError, attempts: u32) -> BoxFuture<'static, ()> {
        let text = serde_json::to_string(&FailedRun::new(&error, attempts)).unwrap_or_default();
        self.report("failed", text, FAILED_FOR, None)
    }

    fn unwatched(&self) -> BoxFuture<'static, ()> {
        let (redis, watched) = (self.shared.redis.clone(), self.watched.clone());
        Box::pin(async move {
            loop {
                let watched = watched.clone();
                let seen: Result<bool, _> = redis
                    .call("idempotency_watched", CALL_TIMEOUT, |mut c| async move {
                        redis::cmd("EXISTS").arg(watched).query_async(&mut c).await
                    })
                    .await;
                // Without Redis no waiter can be seen: the run ends with its client.
                if !matches!(seen, Ok(true)) {
                    return;
                }
                tokio::time::sleep(WATCHED_FOR / 4).await;
            }
        })
    }
}

impl Shared {
    /// Forgets this replica's claim on `record` if it is still run `run`'s (a
    /// newer run of the key may have claimed it since).
    fn release(&self, record: &str, run: &str) {
        let mut claims = lock(&self.claims);
        if claims.get(record).is_some_and(|owner| owner == run) {
            claims.remove(record);
        }
    }
}

/// One round of lease renewals for this replica's claims (every third of a
/// lease, until the store is gone), within that third.
async fn renew(shared: Weak<Shared>, every: Duration) -> Continue {
    let Some(shared) = shared.upgrade() else {
        return Continue::Stop;
    };
    let claims: Vec<(String, String)> = lock(&shared.claims)
        .iter()
        .map(|(record, run)| (record.clone(), run.clone()))
        .collect();
    if claims.is_empty() {
        return Continue::Yes;
    }
    {
        let mut pipe = redis::pipe();
        let lease = shared.redis.lease().as_millis() as u64;
        for (record, run) in &claims {
            // EVAL, not EVALSHA: a pipeline cannot load a script Redis has lost.
            pipe.cmd("EVAL")
                .arg(FINISH)
                .arg(1)
                .arg(record)
                .arg(run)
                .arg("renew")
                .arg("")
                .arg(lease);
        }
        let _: Result<Vec<i64>, _> = shared
            .redis
            .call("idempotency_renew", every, |mut c| async move {
                pipe.query_async(&mut c).await
            })
            .await;
    }
    Continue::Yes
}

/// The `1/share` of the time left before `deadline` (`call` caps it at
/// `CALL_TIMEOUT`).
fn within(deadline: Instant, share: u32) -> Duration {
    deadline.saturating_duration_since(Instant::now()) / share
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
