//! Idempotency records in memory: one replica's, bounded in number, in bytes
//! (`LADLE_IDEMPOTENCY_MAX_BYTES`, the kept bodies' JSON sizes together; a body
//! over `MAX_KEPT_BYTES` is answered but not kept) and in time.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{IdempotencyStore, Kept, Limits, Lookup, MAX_KEPT_BYTES, Outcome, RunSlot};
use crate::error::ApiError;

/// The records, shared by every request of this process.
pub struct MemoryStore {
    limits: Limits,
    records: Arc<Mutex<Records>>,
}

#[derive(Default)]
struct Records {
    by_key: HashMap<String, Record>,
    /// Kept keys with their bodies' sizes, oldest first, for the bounds. An entry
    /// whose record has since gone (expired and run again) still counts its bytes
    /// until it leaves, so the bound errs on the side of memory.
    kept: VecDeque<(String, usize)>,
    /// The sizes in `kept`, together.
    kept_bytes: usize,
    /// Tells runs apart, so a late report never touches a newer run's record.
    runs: u64,
}

enum Record {
    Running {
        fingerprint: u64,
        run: u64,
        outcome: watch::Sender<Option<Outcome>>,
    },
    Kept {
        fingerprint: u64,
        body: Arc<Kept>,
        until: Instant,
    },
}

fn lock(records: &Mutex<Records>) -> MutexGuard<'_, Records> {
    records
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MemoryStore {
    /// An empty store.
    pub fn new(limits: Limits) -> Self {
        MemoryStore {
            limits,
            records: Arc::default(),
        }
    }

    /// Kept results now held (for the bound's test).
    pub fn kept(&self) -> usize {
        lock(&self.records).kept.len()
    }
}

impl IdempotencyStore for MemoryStore {
    fn begin<'a>(
        &'a self,
        key: &'a str,
        fingerprint: u64,
        now: Instant,
        _: Instant,
    ) -> BoxFuture<'a, Lookup> {
        Box::pin(std::future::ready(self.begin_now(key, fingerprint, now)))
    }
}

impl MemoryStore {
    /// Looks `key` up, claiming it if unused: all in memory, so at once.
    pub fn begin_now(&self, key: &str, fingerprint: u64, now: Instant) -> Lookup {
        let mut records = lock(&self.records);
        match records.by_key.get(key) {
            Some(Record::Kept {
                fingerprint: kept,
                body,
                until,
            }) if *until > now => {
                return if *kept == fingerprint {
                    Lookup::Kept(body.clone())
                } else {
                    Lookup::Reused
                };
            }
            Some(Record::Running {
                fingerprint: running,
                outcome,
                ..
            }) => {
                if *running != fingerprint {
                    return Lookup::Reused;
                }
                let mut waiting = outcome.subscribe();
                return Lookup::Wait(Box::pin(async move {
                    let outcome = waiting.wait_for(Option::is_some).await.ok()?;
                    outcome.clone()
                }));
            }
            _ => {}
        }
        records.runs += 1;
        let run = records.runs;
        let (outcome, _) = watch::channel(None);
        records.by_key.insert(
            key.to_owned(),
            Record::Running {
                fingerprint,
                run,
                outcome: outcome.clone(),
            },
        );
        Lookup::Run(Box::new(Claim {
            records: self.records.clone(),
            limits: self.limits,
            key: key.to_owned(),
            fingerprint,
            run,
            outcome,
            reported: false,
        }))
    }
}

/// A run's claim on its key.
struct Claim {
    records: Arc<Mutex<Records>>,
    limits: Limits,
    key: String,
    fingerprint: u64,
    run: u64,
    outcome: watch::Sender<Option<Outcome>>,
    reported: bool,
}

impl Records {
    /// Takes `key`'s entry out of the bounds' list (it is kept anew).
    fn forget(&mut self, key: &str) {
        let mut freed = 0;
        self.kept.retain(|(kept, size)| {
            let ours = kept == key;
            if ours {
                freed += size;
            }
            !ours
        });
        self.kept_bytes -= freed;
    }
}

impl Claim {
    /// Removes this run's record, if it is still this run's; whether it was.
    fn release(&self, records: &mut Records) -> bool {
        let ours = matches!(
            records.by_key.get(&self.key),
            Some(Record::Running { run, .. }) if *run == self.run
        );
        if ours {
            records.by_key.remove(&self.key);
        }
        ours
    }
}

impl RunSlot for Claim {
    fn succeed(mut self: Box<Self>, body: Arc<Kept>) -> BoxFuture<'static, ()> {
        self.reported = true;
        let mut records = lock(&self.records);
        if !self.release(&mut records) {
            // The record is no longer this run's: keep nothing over another's.
            drop(records);
            self.outcome.send_replace(Some(Ok(body)));
            return done();
        }
        let size = body.encode().len();
        if size > MAX_KEPT_BYTES {
            drop(records);
            tracing::warn!(
                bytes_max = MAX_KEPT_BYTES,
                "a result too large to keep is not kept"
            );
            self.outcome.send_replace(Some(Ok(body)));
            return done();
        }
        records.forget(&self.key);
        records.by_key.insert(
            self.key.clone(),
            Record::Kept {
                fingerprint: self.fingerprint,
                body: body.clone(),
                until: Instant::now() + self.limits.ttl,
            },
        );
        records.kept.push_back((self.key.clone(), size));
        records.kept_bytes += size;
        let limits = self.limits;
        while records.kept.len() > limits.max_entries || records.kept_bytes > limits.max_bytes {
            let Some((oldest, size)) = records.kept.pop_front() else {
                break;
            };
            records.kept_bytes -= size;
            // Only a kept result goes: the key may be running again since.
            if matches!(records.by_key.get(&oldest), Some(Record::Kept { .. })) {
                records.by_key.remove(&oldest);
            }
        }
        drop(records);
        self.outcome.send_replace(Some(Ok(body)));
        done()
    }

    fn fail(mut self: Box<Self>, error: ApiError, attempts: u32) -> BoxFuture<'static, ()> {
        self.reported = true;
        self.release(&mut lock(&self.records));
        self.outcome.send_replace(Some(Err((error, attempts))));
        done()
    }

    fn unwatched(&self) -> BoxFuture<'static, ()> {
        let outcome = self.outcome.clone();
        Box::pin(async move { outcome.closed().await })
    }
}

/// A report that is over once made: memory needs no writing out.
fn done() -> BoxFuture<'static, ()> {
    Box::pin(std::future::ready(()))
}

impl Drop for Claim {
    /// A run dropped before its outcome (no one waited any more) frees its key.
    fn drop(&mut self) {
        if !self.reported {
            self.release(&mut lock(&self.records));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A submit's record, whose size is 10 bytes and its job id's.
    fn kept(job: &str) -> Arc<Kept> {
        Arc::new(Kept::Submitted(job.into()))
    }

    fn store(max_entries: usize) -> MemoryStore {
        MemoryStore::new(Limits {
            ttl: Duration::from_secs(60),
            max_entries,
            max_bytes: usize::MAX,
        })
    }

    fn run(begin: Lookup) -> Box<dyn RunSlot> {
        match begin {
            Lookup::Run(slot) => slot,
            _ => panic!("expected to run"),
        }
    }

    #[tokio::test]
    async fn a_kept_success_is_replayed_and_another_request_under_the_key_refused() {
        let store = store(10);
        let now = Instant::now();
        run(store.begin_now("k", 1, now))
            .succeed(kept("done"))
            .await;
        assert!(
            matches!(store.begin_now("k", 1, now), Lookup::Kept(body) if *body == *kept("done"))
        );
        assert!(matches!(store.begin_now("k", 2, now), Lookup::Reused));
        let later = now + Duration::from_secs(61);
        assert!(
            matches!(store.begin_now("k", 2, later), Lookup::Run(_)),
            "expired"
        );
    }

    #[tokio::test]
    async fn a_failed_or_dropped_run_is_not_kept() {
        let store = store(10);
        let now = Instant::now();
        run(store.begin_now("k", 1, now))
            .fail(ApiError::UpstreamTimeout, 2)
            .await;
        assert!(
            matches!(store.begin_now("k", 1, now), Lookup::Run(_)),
            "dropped at once"
        );
        assert!(matches!(store.begin_now("k", 1, now), Lookup::Run(_)));
    }

    #[tokio::test]
    async fn a_repeat_waits_for_the_run_and_gets_its_outcome() {
        let store = store(10);
        let now = Instant::now();
        let slot = run(store.begin_now("k", 1, now));
        let Lookup::Wait(waiting) = store.begin_now("k", 1, now) else {
            panic!("expected to wait");
        };
        assert!(matches!(store.begin_now("k", 9, now), Lookup::Reused));
        slot.succeed(kept("7")).await;
        let outcome = waiting.await.expect("an outcome");
        assert_eq!(outcome.expect("a success"), kept("7"));
    }

    #[tokio::test]
    async fn the_bound_never_removes_a_run_in_progress() {
        let store = store(1);
        let now = Instant::now();
        run(store.begin_now("a", 1, now)).succeed(kept("")).await;
        let later = now + Duration::from_secs(61);
        let again = run(store.begin_now("a", 1, later));
        run(store.begin_now("b", 1, later)).succeed(kept("")).await;
        assert!(
            matches!(store.begin_now("a", 1, later), Lookup::Wait(_)),
            "still running"
        );
        assert!(matches!(store.begin_now("a", 2, later), Lookup::Reused));
        drop(again);
    }

    #[tokio::test]
    async fn kept_bodies_stay_within_their_bytes_and_a_huge_one_is_not_kept() {
        let store = MemoryStore::new(Limits {
            ttl: Duration::from_secs(60),
            max_entries: 100,
            max_bytes: 100,
        });
        let now = Instant::now();
        // `{"job":""}` is 10 bytes.
        let body = |bytes: usize| kept(&"x".repeat(bytes - 10));
        for i in 0..5 {
            run(store.begin_now(&format!("k{i}"), 1, now))
                .succeed(body(30))
                .await;
        }
        assert_eq!(
            store.kept(),
            3,
            "3 × 30 bytes fit in 100, a fourth does not"
        );
        assert_eq!(lock(&store.records).kept_bytes, 90);
        assert!(
            matches!(store.begin_now("k1", 1, now), Lookup::Run(_)),
            "the oldest went"
        );
        assert!(matches!(store.begin_now("k4", 1, now), Lookup::Kept(_)));
        let huge = run(store.begin_now("huge", 1, now));
        huge.succeed(body(MAX_KEPT_BYTES + 1)).await;
        assert!(
            matches!(store.begin_now("huge", 1, now), Lookup::Run(_)),
            "not kept"
        );
    }

    #[tokio::test]
    async fn memory_stays_bounded_past_the_most_entries() {
        let store = store(3);
        let now = Instant::now();
        for i in 0..10 {
            run(store.begin_now(&format!("k{i}"), 1, now))
                .succeed(kept(""))
                .await;
        }
        assert_eq!(store.kept(), 3);
        assert!(
            matches!(store.begin_now("k0", 1, now), Lookup::Run(_)),
            "the oldest went"
        );
        assert!(matches!(store.begin_now("k9", 1, now), Lookup::Kept(_)));
    }
}
