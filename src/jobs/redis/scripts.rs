//! The Lua scripts of the Redis job store: each change of a job's status is one
//! script, so the job's hash and the sorted sets that order it change together,
//! and two replicas racing for one job (a claim, a cancel, a sweep, a late
//! report) see one another's writes whole or not at all.
//!
//! `claim`, `renew`, `sweep` and `due` find their jobs in a sorted set, so they
//! build the job keys from the prefix they are given (`ARGV[1]`) instead of
//! declaring them: a standalone Redis (every key in one place) is assumed, as
//! everywhere in ladle.

use redis::Script;

/// A job that has just finished: it leaves its client's count of unfinished jobs
/// (the hash `clients`), keeps only the task of its request (not the variables;
/// a background response's stored request too, which its object needs),
/// and with a delivery (`delivery` is its JSON), it is due at once and the key
/// lives on until the delivery is made (no TTL); without one, the key expires
/// `ttl` ms from now.
macro_rules! ended {
    () => {
        r#"
local function left(key, clients)
  local client = redis.call('HGET', key, 'client') or ''
  if redis.call('HINCRBY', clients, client, -1) <= 0 then
    redis.call('HDEL', clients, client)
  end
end
local function facts(key)
  local ok, request = pcall(cjson.decode, redis.call('HGET', key, 'request') or '')
  local task = ''
  if ok and type(request) == 'table' and type(request.task) == 'string' then task = request.task end
  local kept = '{"v":1,"task":' .. cjson.encode(task) .. ',"variables":{}'
  if ok and type(request) == 'table' and type(request.response) == 'table' then
    kept = kept .. ',"response":' .. cjson.encode(request.response)
  end
  redis.call('HSET', key, 'request', kept .. '}')
end
local function settled(key, id, now, ttl, delivery, deliveries)
  if delivery ~= '' then
    redis.call('HSET', key, 'delivery', delivery)
    redis.call('ZADD', deliveries, now, id)
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIRE', key, ttl)
  end
end
local function ended(key, id, now, ttl, delivery, deliveries, clients)
  left(key, clients)
  facts(key)
  settled(key, id, now, ttl, delivery, deliveries)
end
local function finished(status)
  return status == 'succeeded' or status == 'failed' or status == 'canceled'
end
"#
    };
}

/// Writes job `ARGV[2]` (created at `ARGV[3]`; its fields from `ARGV[11]` on)
/// as queued, unless `ARGV[1]` jobs are unfinished across the fleet (0), or
/// `ARGV[4]` (if given) of its client `ARGV[5]`'s (2), or its id was made in
/// another epoch than the fleet's (`KEYS[6]`, set to `ARGV[10]` if there is none)
/// (3): {1 if written, the fleet's epoch}. With a submit key (`ARGV[6]`, its value
/// `ARGV[7]`, kept `ARGV[8]` ms), the key is written with it.
const SUBMIT: &str = r#"
local epoch = redis.call('GET', KEYS[6])
if not epoch then
  redis.call('SET', KEYS[6], ARGV[10])
  epoch = ARGV[10]
end
if epoch ~= ARGV[9] then return {3, epoch} end
local unfinished = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3])
  + redis.call('ZCARD', KEYS[4])
if unfinished >= tonumber(ARGV[1]) then return {0, epoch} end
if ARGV[4] ~= '' and tonumber(redis.call('HGET', KEYS[5], ARGV[5]) or '0') >= tonumber(ARGV[4]) then
  return {2, epoch}
end
if ARGV[6] ~= '' then
  redis.call('SET', ARGV[6], ARGV[7], 'PX', math.max(1, tonumber(ARGV[8])))
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 11))
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('HINCRBY', KEYS[5], ARGV[5], 1)
return {1, epoch}
"#;

/// Cancels job `ARGV[1]` of client `ARGV[2]` at `ARGV[3]`: {outcome, the status
/// it had, its fields}, the outcome `unknown`, `finished` or `now`.
const CANCEL: &str = concat!(
    ended!(),
    r#"
local status = redis.call('HGET', KEYS[1], 'status')
if not status or redis.call('HGET', KEYS[1], 'client') ~= ARGV[2] then
  return {'unknown', '', {}}
end
if finished(status) then
  local updated = tonumber(redis.call('HGET', KEYS[1], 'updated_at'))
  if updated + tonumber(ARGV[4]) <= tonumber(ARGV[3]) then return {'unknown', '', {}} end
  return {'finished', status, redis.call('HGETALL', KEYS[1])}
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[1], 'status', 'canceled', 'updated_at', ARGV[3])
ended(KEYS[1], ARGV[1], ARGV[3], ARGV[4], ARGV[5], KEYS[5], KEYS[6])
return {'now', status, redis.call('HGETALL', KEYS[1])}
"#
);

/// Redis's own clock, in Unix ms: every lease is reckoned by it, never by a
/// replica's, so a replica whose clock is ahead cannot find another's live run
/// expired (and one behind cannot hold a dead one's run longer).
macro_rules! clock {
    () => {
        r#"
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"#
    };
}

/// Starts the next run of the oldest queued job at `ARGV[2]` (the replica's time,
/// for `updated_at`), held for `ARGV[3]` ms of Redis's clock, its run id
/// `ARGV[4]`, among the first 100 whose client is none of `ARGV[5]` on (busy on
/// this replica): {id, its fields}, or nil. A member whose job is not queued
/// (gone, or moved by hand) is dropped on the way.
const CLAIM: &str = concat!(
    clock!(),
    r#"
local busy = {}
for i = 5, #ARGV do busy[ARGV[i]] = true end
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, 99)) do
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'status', 'client')
  if job[1] ~= 'queued' then
    redis.call('ZREM', KEYS[1], id)
  elseif not busy[job[2] or ''] then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HINCRBY', key, 'runs', 1)
    redis.call('HSET', key, 'status', 'running', 'updated_at', ARGV[2], 'run_id', ARGV[4])
    redis.call('ZADD', KEYS[2], clock() + tonumber(ARGV[3]), id)
    return {id, redis.call('HGETALL', key)}
  end
end
return false
"#
);

/// Ends run `ARGV[2]` of job `ARGV[1]` at `ARGV[3]` as status `ARGV[5]` (with
/// field `ARGV[6]` = `ARGV[7]` if named; due again at `ARGV[8]` when waiting), if
/// that run still holds the job, and (when `ARGV[10]` is given) only if its lease
/// has ended by Redis's clock: the job's fields, or nil. The run's own report
/// (no `ARGV[10]`) is taken too when its lease ran out and the job was queued
/// again but not run again since (the run number is its fence): an outcome that
/// waited out a Redis outage is kept, not thrown away.
const FINISH: &str = concat!(
    clock!(),
    ended!(),
    r#"
local status = redis.call('HGET', KEYS[1], 'status')
if redis.call('HGET', KEYS[1], 'runs') ~= ARGV[2] then return false end
if status == 'queued' and ARGV[10] == '' then
  redis.call('ZREM', KEYS[6], ARGV[1])
elseif status ~= 'running' then
  return false
end
if ARGV[10] ~= '' then
  local lease = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if lease and tonumber(lease) > clock() then return false end
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'status', ARGV[5], 'updated_at', ARGV[3])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], ARGV[6], ARGV[7]) end
if ARGV[5] == 'retry_wait' then
  redis.call('HSET', KEYS[1], 'next_run_at', ARGV[8])
  redis.call('ZADD', KEYS[3], ARGV[8], ARGV[1])
else
  ended(KEYS[1], ARGV[1], ARGV[3], ARGV[4], ARGV[9], KEYS[4], KEYS[5])
end
return redis.call('HGETALL', KEYS[1])
"#
);

/// Holds the runs (id, run number pairs from `ARGV[3]` on) that still hold their
/// job for another `ARGV[2]` ms of Redis's clock: the ids of the others.
const RENEW: &str = concat!(
    clock!(),
    r#"
local held = clock() + tonumber(ARGV[2])
local gone = {}
for i = 3, #ARGV, 2 do
  local key = ARGV[1] .. ARGV[i]
  if redis.call('HGET', key, 'status') == 'running'
    and redis.call('HGET', key, 'runs') == ARGV[i + 1] then
    redis.call('ZADD', KEYS[1], held, ARGV[i])
  else
    table.insert(gone, ARGV[i])
  end
end
return gone
"#
);

/// At `ARGV[2]` (the replica's time; leases by Redis's clock): runs whose lease
/// ended with runs left (below `ARGV[3]`) and waiting jobs whose time came are
/// queued again (in their place by creation); {the changes as {id, status left,
/// fields}, the runs out of runs as {id, runs, run id}} (those fail through
/// `FINISH`, with the error made by the caller). With `ARGV[4]` = '1' (the caller
/// just got Redis back) runs are left alone: their replicas renew first.
const SWEEP: &str = concat!(
    clock!(),
    r#"
local moved, cut = {}, {}
local expired = {}
if ARGV[4] ~= '1' then
  expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', clock(), 'LIMIT', 0, 100)
end
for _, id in ipairs(expired) do
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'status', 'runs', 'run_id', 'created_at')
  if job[1] ~= 'running' then
    redis.call('ZREM', KEYS[1], id)
  elseif tonumber(job[2]) >= tonumber(ARGV[3]) then
    table.insert(cut, {id, job[2], job[3] or ''})
  else
    redis.call('ZREM', KEYS[1], id)
    redis.call('HSET', key, 'status', 'queued', 'updated_at', ARGV[2])
    redis.call('ZADD', KEYS[2], job[4], id)
    table.insert(moved, {id, 'running', redis.call('HGETALL', key)})
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[2], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  local key = ARGV[1] .. id
  local job = redis.call('HMGET', key, 'status', 'created_at')
  redis.call('ZREM', KEYS[3], id)
  if job[1] == 'retry_wait' then
    redis.call('HSET', key, 'status', 'queued', 'updated_at', ARGV[2])
    redis.call('HDEL', key, 'next_run_at')
    redis.call('ZADD', KEYS[2], job[2], id)
    table.insert(moved, {id, 'retry_wait', redis.call('HGETALL', key)})
  end
end
return {moved, cut}
"#
);

/// Takes at most `ARGV[4]` deliveries due at `ARGV[2]` and holds them until
/// `ARGV[3]`: {id, fields} of each.
const DUE: &str = r#"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[4]))
local jobs = {}
for _, id in ipairs(due) do
  local fields = redis.call('HGETALL', ARGV[1] .. id)
  if #fields == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    table.insert(jobs, {id, fields})
  end
end
return jobs
"#;

/// Writes job `ARGV[1]`'s delivery `ARGV[2]`: still pending (`ARGV[3]` = '1'), it
/// is due at `ARGV[4]`; made or given up (`f`: failed, listed in `KEYS[3]` until
/// the job expires), it leaves the set and the job expires `ARGV[5]` ms after it
/// finished (`ARGV[6]` is now).
const DELIVERED: &str = concat!(
    ended!(),
    r#"
local job = redis.call('HMGET', KEYS[1], 'status', 'updated_at')
if not job[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('HSET', KEYS[1], 'delivery', ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[3] == 'f' then
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', tonumber(ARGV[6]) - tonumber(ARGV[5]))
end
if finished(job[1]) then
  local left = tonumber(job[2]) + tonumber(ARGV[5]) - tonumber(ARGV[6])
  if left > 0 then
    redis.call('PEXPIRE', KEYS[1], math.floor(left))
  else
    redis.call('DEL', KEYS[1])
  end
end
return 1
"#
);

/// Ends job `ARGV[1]`, whose hash cannot be read back, at `ARGV[2]` as `failed`
/// with the error `ARGV[3]`: out of every set (`KEYS[2..4]`), its result gone,
/// its request reduced to its task, its numbers made numbers again, leaving its
/// client's count if it was unfinished, and with a delivery (`ARGV[5]`) a
/// `job.failed` one due now (else it expires `ARGV[4]` ms on). {the status it
/// left, its fields}, or nil if it is gone.
const QUARANTINE: &str = concat!(
    ended!(),
    r#"
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return false end
for i = 2, 4 do redis.call('ZREM', KEYS[i], ARGV[1]) end
if not finished(status) then left(KEYS[1], KEYS[6]) end
facts(KEYS[1])
redis.call('HDEL', KEYS[1], 'result', 'next_run_at', 'delivery')
redis.call('HSET', KEYS[1], 'status', 'failed', 'updated_at', ARGV[2], 'error', ARGV[3])
for _, field in ipairs({'runs', 'created_at'}) do
  if not tonumber(redis.call('HGET', KEYS[1], field) or '') then
    redis.call('HSET', KEYS[1], field, '0')
  end
end
if type(redis.call('HGET', KEYS[1], 'client')) ~= 'string' then
  redis.call('HSET', KEYS[1], 'client', '')
end
settled(KEYS[1], ARGV[1], ARGV[2], ARGV[4], ARGV[5], KEYS[5])
return {status, redis.call('HGETALL', KEYS[1])}
"#
);

/// Makes job `ARGV[1]`'s delivery `ARGV[3]` (due at `ARGV[4]`), if it is still
/// `ARGV[2]` (a failed one, as the caller read it): the job's fields, or nil. Its
/// key lives on until the delivery is made again.
const REDELIVER: &str = r#"
if redis.call('HGET', KEYS[1], 'delivery') ~= ARGV[2] then return false end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[1], 'delivery', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('PERSIST', KEYS[1])
return redis.call('HGETALL', KEYS[1])
"#;

/// Keeps `ARGV[1]` as the job's final event's id, if the job is still there
/// (a job past its TTL is not made again).
const FINAL_EVENT: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'final_event', ARGV[1])
return 1
"#;

/// The scripts, loaded once per Redis (`EVALSHA`, and `EVAL` again when Redis
/// has lost them).
pub(super) struct Scripts {
    pub(super) submit: Script,
    pub(super) cancel: Script,
    pub(super) claim: Script,
    pub(super) finish: Script,
    pub(super) renew: Script,
    pub(super) sweep: Script,
    pub(super) due: Script,
    pub(super) delivered: Script,
    pub(super) quarantine: Script,
    pub(super) redeliver: Script,
    pub(super) final_event: Script,
    pub(super) forget: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            submit: Script::new(SUBMIT),
            cancel: Script::new(CANCEL),
            claim: Script::new(CLAIM),
            finish: Script::new(FINISH),
            renew: Script::new(RENEW),
            sweep: Script::new(SWEEP),
            due: Script::new(DUE),
            delivered: Script::new(DELIVERED),
            quarantine: Script::new(QUARANTINE),
            redeliver: Script::new(REDELIVER),
            final_event: Script::new(FINAL_EVENT),
            forget: Script::new(super::kept::FORGET),
        }
    }
}
