//! The event log of a fleet: one Redis Stream per job (`XADD` an event, `XRANGE`
//! to read it on opening, `XREAD` to follow it), so any replica serves any job's
//! stream and a replica's death loses no event. Why a stream and not a list with
//! pub/sub: the design notes (`docs/design/20-…`).
//!
//! * **Writing never waits for Redis.** Events go into one queue per replica, in
//!   the order they were made; one writer sends what the queue holds in one
//!   script call, which gives each kept event its id (`{run}.{seq}`, counted in
//!   a small hash beside the stream) and refuses what comes after the final
//!   event. While Redis is away the writer keeps the batch and tries again every
//!   second (its `progress` events, stale by then, are dropped); the run goes on.
//! * **Reading.** A reader's replica reads the whole stream once (`XRANGE`) into
//!   a feed; one loop follows every feed read here with one `XREAD` (without
//!   `BLOCK`, which would hold the fleet's one connection) every 100 ms, and at
//!   once after this replica wrote. A feed nobody reads is forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc};

use super::feed::Feed;
use super::keep_final;
use super::kept::{EventId, Kept, progress_frame};
use crate::background::Background;
use crate::fleet::{CALL_TIMEOUT, Redis};
use crate::jobs::{JobStore, StoreDown};
use crate::store_down::Cause;

/// How often the feeds read here look for new events.
const FOLLOW_EVERY: Duration = Duration::from_millis(100);

/// Events sent in one script call at most.
const BATCH: usize = 256;

/// Gives each event its id and adds it to its job's stream (see the module's
/// notes). `KEYS`: stream and counters of each event; `ARGV`: the TTL after the
/// final event, this replica's writer's name, then run, name, data, kind (`k`
/// kept, `f` final, `p` progress, `q` kept only as the stream's first event)
/// and number of each. A call Redis ran but whose
/// answer was lost (a timeout) is sent again: an event whose number this writer
/// wrote already is not added twice. Answers each event's id (`""` for progress
/// or refused).
const APPEND: &str = r"
local out = {}
local writer = 'w:' .. ARGV[2]
for i = 1, #KEYS / 2 do
  local stream, counts = KEYS[2 * i - 1], KEYS[2 * i]
  local at = 2 + (i - 1) * 5
  local run, name, data, kind = tonumber(ARGV[at + 1]), ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local number = tonumber(ARGV[at + 5])
  local id = ''
  local written = tonumber(redis.call('HGET', counts, writer) or '0')
  if number <= written then
    if kind == 'f' then id = redis.call('HGET', counts, 'done') or '' end
  elseif redis.call('HEXISTS', counts, 'done') == 0 then
    redis.call('HSET', counts, writer, number)
    if kind == 'p' then
      redis.call('XADD', stream, '*', 'e', name, 'd', data)
    elseif kind == 'q' and redis.call('HEXISTS', counts, 'run') == 1 then
      id = ''
    else
      local last = tonumber(redis.call('HGET', counts, 'run') or '-1')
      if run >= last then
        local seq = 1
        if run == last then
          seq = redis.call('HINCRBY', counts, 'seq', 1)
        else
          redis.call('HSET', counts, 'run', run, 'seq', 1)
        end
        id = string.format('%d.%d', run, seq)
        redis.call('XADD', stream, '*', 'i', id, 'e', name, 'd', data)
        if kind == 'f' then
          redis.call('HSET', counts, 'done', id)
          redis.call('PEXPIRE', stream, ARGV[1])
          redis.call('PEXPIRE', counts, ARGV[1])
        end
      end
    end
  end
  out[i] = id
end
return out
";

/// An event waiting to be written.
struct Append {
    /// Its place in this replica's queue (see `APPEND`).
    number: u64,
    job: String,
    run: u32,
    name: String,
    data: Bytes,
    kind: &'static str,
}

/// Jobs' events in Redis.
pub struct RedisLog {
    redis: Arc<Redis>,
    ttl: Duration,
    script: ::redis::Script,
    queue: Mutex<Option<mpsc::UnboundedSender<Append>>>,
    /// This replica's writer's name, and the last number it gave an event.
    writer: String,
    numbered: std::sync::atomic::AtomicU64,
    written: Mutex<Option<mpsc::UnboundedReceiver<Append>>>,
    /// The feeds read on this replica.
    feeds: Mutex<HashMap<String, Weak<Feed>>>,
    /// Something was written here: look now.
    wrote: Notify,
}

impl RedisLog {
    /// A log in the fleet's `redis`, keeping finished jobs' events for `ttl`.
    pub fn new(redis: Arc<Redis>, ttl: Duration) -> RedisLog {
        let (queue, written) = mpsc::unbounded_channel();
        RedisLog {
            redis,
            ttl,
            script: ::redis::Script::new(APPEND),
            queue: Mutex::new(Some(queue)),
            writer: uuid::Uuid::new_v4().simple().to_string(),
            numbered: std::sync::atomic::AtomicU64::new(0),
            written: Mutex::new(Some(written)),
            feeds: Mutex::default(),
            wrote: Notify::new(),
        }
    }

    fn stream(&self, id: &str) -> String {
        self.redis.key(&format!("jobev:{id}"))
    }

    /// Queues job `id`'s first event, kept unless its stream has one already.
    pub fn append_first(&self, id: &str, run: u32, name: &str, data: Bytes) {
        self.send(id, run, name, data, "q");
    }

    /// Queues an event of job `id`'s run `run` (`ends`: the final one).
    pub fn append(&self, id: &str, run: u32, name: &str, data: Bytes, ends: bool) {
        let kind = if ends { "f" } else { "k" };
        self.send(id, run, name, data, kind);
    }

    /// Queues a `progress` event.
    pub fn progress(&self, id: &str, run: u32, data: Bytes) {
        self.send(id, run, "progress", data, "p");
    }

    fn send(&self, job: &str, run: u32, name: &str, data: Bytes, kind: &'static str) {
        if let Some(queue) = lock(&self.queue).as_ref() {
            let number = self
                .numbered
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            let append = Append {
                number,
                job: job.to_owned(),
                run,
                name: name.to_owned(),
                data,
                kind,
            };
            let _ = queue.send(append);
        }
    }

    /// No more events: the writer ends once its queue is written.
    pub fn close(&self) {
        lock(&self.queue).take();
    }

    /// Starts the writer and the follower, on the fleet's runtime.
    pub fn start(self: &Arc<Self>, store: Arc<dyn JobStore>, background: &Background) {
        let Some(written) = lock(&self.written).take() else {
            return;
        };
        let runtime = self.redis.runtime().clone();
        drop(background.spawn_on(write(self.clone(), written, store), &runtime));
        let (log, stopping) = (self.clone(), background.stopping());
        let follow = async move {
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    () = log.wrote.notified() => {}
                    () = tokio::time::sleep(FOLLOW_EVERY) => {}
                }
                log.follow().await;
            }
        };
        drop(background.spawn_on(follow, &runtime));
    }

    /// Job `id`'s feed: read whole from its stream unless this replica follows
    /// it already.
    pub async fn feed(&self, id: &str) -> Result<Arc<Feed>, StoreDown> {
        let known = lock(&self.feeds).get(id).and_then(Weak::upgrade);
        if let Some(feed) = known.filter(|feed| feed.entry().1) {
            return Ok(feed);
        }
        let feed = Arc::new(Feed::default());
        let stream = self.stream(id);
        let read: Vec<Entry> = self
            .redis
            .call("job_events_read", CALL_TIMEOUT, |mut c| async move {
                ::redis::cmd("XRANGE")
                    .arg(&stream)
                    .arg("-")
                    .arg("+")
                    .query_async(&mut c)
                    .await
            })
            .await
            .map_err(|e| StoreDown::new("job_events_read", Cause::Redis(e.to_string())))?;
        feed.extend(read.into_iter().filter_map(kept).collect());
        lock(&self.feeds).insert(id.to_owned(), Arc::downgrade(&feed));
        Ok(feed)
    }

    /// One look at every feed read here that has not ended.
    async fn follow(&self) {
        let mut followed: Vec<(String, Arc<Feed>, String)> = Vec::new();
        lock(&self.feeds).retain(|id, feed| {
            let Some(feed) = feed.upgrade() else {
                return false;
            };
            let (ended, _) = feed.facts();
            let (entry, loaded) = feed.entry();
            if loaded && !ended {
                let from = entry.map_or("0-0".to_owned(), |(ms, n)| format!("{ms}-{n}"));
                followed.push((self.stream(id), feed, from));
            }
            true
        });
        if followed.is_empty() {
            return;
        }
        let mut command = ::redis::cmd("XREAD");
        command.arg("COUNT").arg(1_000).arg("STREAMS");
        for (key, _, _) in &followed {
            command.arg(key);
        }
        for (_, _, from) in &followed {
            command.arg(from);
        }
        let read: Result<Option<Vec<Streamed>>, _> = self
            .redis
            .call("job_events_follow", CALL_TIMEOUT, |mut c| async move {
                command.query_async(&mut c).await
            })
            .await;
        let Ok(Some(read)) = read else {
            return;
        };
        for (key, entries) in read {
            let Some((_, feed, _)) = followed.iter().find(|(followed, _, _)| *followed == key)
            else {
                continue;
            };
            let progress = entries
                .iter()
                .rev()
                .find(|(_, fields)| field(fields, b"i").is_none());
            if let Some(data) = progress.and_then(|(_, fields)| field(fields, b"d")) {
                feed.progress(progress_frame(data));
            }
            feed.extend(entries.into_iter().filter_map(kept).collect());
        }
    }
}

/// The writer: every event queued, in order, a batch per script call.
async fn write(
    log: Arc<RedisLog>,
    mut queue: mpsc::UnboundedReceiver<Append>,
    store: Arc<dyn JobStore>,
) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match queue.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let ids = loop {
            match log.write(&batch).await {
                Ok(ids) => break ids,
                Err(down) => {
                    tracing::warn!(error = %down, events = batch.len(), "job events wait for redis");
                    batch.retain(|append| append.kind != "p");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        log.wrote.notify_one();
        for (append, id) in batch.iter().zip(ids) {
            let made = EventId::parse(&id).ok().flatten();
            if let Some(id) = made.filter(|_| append.kind == "f") {
                keep_final(&*store, &append.job, id).await;
            }
        }
    }
}

impl RedisLog {
    /// One script call for `batch`: each event's id.
    async fn write(&self, batch: &[Append]) -> Result<Vec<String>, StoreDown> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = self.script.prepare_invoke();
        invocation
            .arg(self.ttl.as_millis() as u64)
            .arg(&self.writer);
        for append in batch {
            let stream = self.stream(&append.job);
            invocation.key(&stream).key(format!("{stream}:n"));
            invocation
                .arg(append.run)
                .arg(&append.name)
                .arg(append.data.as_ref())
                .arg(append.kind)
                .arg(append.number);
        }
        self.redis
            .call("job_events_write", CALL_TIMEOUT, |mut c| async move {
                invocation.invoke_async(&mut c).await
            })
            .await
            .map_err(|e| StoreDown::new("job_events_write", Cause::Redis(e.to_string())))
    }
}

/// A stream entry as Redis answers it: its id, and its fields and values in
/// turn (read as they are: no map per entry).
type Entry = (String, Vec<Vec<u8>>);

/// One stream's new entries, as `XREAD` answers them.
type Streamed = (String, Vec<Entry>);

/// The value of `name` among an entry's fields.
fn field<'a>(fields: &'a [Vec<u8>], name: &[u8]) -> Option<&'a [u8]> {
    fields
        .chunks_exact(2)
        .find(|pair| pair[0] == name)
        .map(|pair| pair[1].as_slice())
}

/// A stream entry as a kept event (progress entries have no id and are not).
fn kept((entry, mut fields): Entry) -> Option<((u64, u64), Kept)> {
    let id = std::str::from_utf8(field(&fields, b"i")?).ok()?;
    let id = EventId::parse(id).ok().flatten()?;
    let (ms, n) = entry.split_once('-')?;
    let at = (ms.parse().ok()?, n.parse().ok()?);
    let name = String::from_utf8(field(&fields, b"e")?.to_vec()).ok()?;
    let at_data = fields.chunks_exact(2).position(|pair| pair[0] == b"d")? * 2 + 1;
    let data = std::mem::take(&mut fields[at_data]);
    Some((at, Kept::new(id, &name, data.into())))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
