//! Client keys (contract 8): with `LADLE_CLIENT_KEYS_FILE`, every `/v1/*` request
//! names its caller with `Authorization: Bearer <key>`, and each key may have a
//! share: requests in flight at once, a token bucket, the tasks it may run.
//!
//! The file holds SHA-256 digests, never keys; a presented key is hashed and
//! compared with every digest in constant time (`subtle`), and appears in no log
//! line. The file is looked at as often as the prompts folder
//! (`LADLE_PROMPT_RELOAD_MS`), and read again when it changed; a broken edit
//! keeps the last good keys and is reported (logs, `/readyz`), as a broken prompt
//! is. A key's bulkhead and bucket live on across edits that keep its name.
//! `gate` is the HTTP side; `shared` holds the buckets to one rate for a fleet.

pub mod bucket;
pub mod file;
pub mod gate;
pub mod redis;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::time::Instant;

use self::bucket::Bucket;
use self::file::{ClientKey, KeySet};
use crate::config::ConfigError;
use crate::config::settings::invalid;
use crate::engine::bulkhead::{Bulkheads, Slot};
use crate::engine::metrics::Metrics;
use crate::error::ApiError;

/// The setting that names the file.
const KEY: &str = "LADLE_CLIENT_KEYS_FILE";

/// A known client key and its share.
pub struct Client {
    /// The key as the file declares it.
    pub key: ClientKey,
    bucket: Option<Arc<Mutex<Bucket>>>,
}

impl Client {
    /// The name logs and metrics give it.
    pub fn name(&self) -> &str {
        &self.key.name
    }

    /// `403 forbidden` unless the key may run `task`.
    pub fn may_run(&self, task: &str) -> Result<(), ApiError> {
        match &self.key.tasks {
            Some(tasks) if !tasks.iter().any(|t| t == task) => {
                Err(ApiError::Forbidden(task.to_owned()))
            }
            _ => Ok(()),
        }
    }
}

/// The last look at the keys file.
#[derive(Default)]
struct Seen {
    /// Its modification time and size, to skip an unchanged file.
    stamp: Option<(SystemTime, u64)>,
    /// What is wrong with it, while the live keys are an older file's.
    problem: Option<String>,
}

/// The live keys and what they share.
pub struct Clients {
    path: PathBuf,
    live: RwLock<Vec<Arc<Client>>>,
    seen: Mutex<Seen>,
    bulkheads: Bulkheads,
    metrics: Metrics,
}

impl Clients {
    /// The keys of the file at `path`; a file that is missing or malformed stops
    /// start-up naming `LADLE_CLIENT_KEYS_FILE` (never quoting a digest).
    pub fn open(path: &Path, metrics: Metrics) -> Result<Clients, ConfigError> {
        let (stamp, text) = read(path).map_err(|why| invalid(KEY, why))?;
        let set = KeySet::parse(&text).map_err(|why| invalid(KEY, why))?;
        let clients = Clients {
            path: path.to_owned(),
            live: RwLock::default(),
            seen: Mutex::new(Seen {
                stamp: Some(stamp),
                problem: None,
            }),
            bulkheads: Bulkheads::new("client", metrics.clone()),
            metrics,
        };
        clients.install(set);
        Ok(clients)
    }

    /// Reads the file again if it changed; a broken one is logged and the last
    /// good keys stay.
    pub fn refresh(&self) {
        let stamp = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
        if stamp.is_some() && stamp == lock(&self.seen).stamp {
            return;
        }
        let read = read(&self.path).and_then(|(stamp, text)| Ok((stamp, KeySet::parse(&text)?)));
        let mut seen = lock(&self.seen);
        match read {
            Ok((stamp, set)) => {
                let count = set.keys.len();
                self.install(set);
                *seen = Seen {
                    stamp: Some(stamp),
                    problem: None,
                };
                tracing::info!(keys = count, "client keys reloaded");
            }
            Err(why) => {
                if seen.problem.as_deref() != Some(why.as_str()) {
                    tracing::warn!(problem = %why, "client keys file is broken; the last good keys stay");
                }
                *seen = Seen {
                    stamp,
                    problem: Some(why),
                };
            }
        }
    }

    /// What is wrong with the file on disk, if the live keys are an older one's.
    pub fn broken(&self) -> Option<String> {
        lock(&self.seen).problem.clone()
    }

    /// The client whose key `authorization` carries (`Bearer <key>`), or `401`.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Arc<Client>, ApiError> {
        // The scheme is case-insensitive (RFC 7235): `bearer` is `Bearer`.
        let key = authorization
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, key)| key.trim())
            .filter(|key| !key.is_empty())
            .ok_or(ApiError::NoClientKey)?;
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        // Every digest is compared, in constant time, whichever matches.
        let mut found = None;
        for client in live.iter() {
            if bool::from(client.key.digest.ct_eq(&digest)) {
                found = Some(client.clone());
            }
        }
        found.ok_or(ApiError::NoClientKey)
    }

    /// Admits one request of `client` at `now`: a slot of its `max_inflight` and
    /// a token of its bucket, or `429`. A refused request takes neither.
    pub fn admit(&self, client: &Client, now: Instant) -> Result<Option<Slot>, ApiError> {
        let slot = match client.key.max_inflight {
            None => None,
            Some(limit) => {
                let bulkhead = self.bulkheads.of(client.name(), limit);
                let slot = bulkhead.try_enter().ok_or_else(|| {
                    bulkhead.refused();
                    ApiError::RateLimited {
                        limit: "max_inflight",
                        retry_after: Duration::from_secs(1),
                    }
                })?;
                Some(slot)
            }
        };
        if let Some(bucket) = &client.bucket {
            let taken = bucket
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(now);
            if let Err(wait) = taken {
                self.metrics.limit_rejection("client");
                return Err(ApiError::RateLimited {
                    limit: "rate_per_s",
                    retry_after: wait,
                });
            }
        }
        Ok(slot)
    }

    /// The live key named `name`.
    pub fn named(&self, name: &str) -> Option<Arc<Client>> {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        live.iter().find(|client| client.name() == name).cloned()
    }

    /// Every live key's bucket, by name, for the fleet's rounds.
    pub fn buckets(&self) -> Vec<(String, Arc<Mutex<Bucket>>)> {
        let live = self.live.read().unwrap_or_else(PoisonError::into_inner);
        live.iter()
            .filter_map(|c| Some((c.key.name.clone(), c.bucket.clone()?)))
            .collect()
    }

    /// Makes `set` the live keys; a key that keeps its name keeps its bucket.
    fn install(&self, set: KeySet) {
        let now = Instant::now();
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        let old: HashMap<&str, &Arc<Client>> =
            live.iter().map(|c| (c.key.name.as_str(), c)).collect();
        let next: Vec<Arc<Client>> = set
            .keys
            .into_iter()
            .map(|key| {
                let kept = old.get(key.name.as_str()).and_then(|c| c.bucket.clone());
                let bucket = key.rate.map(|rate| match kept {
                    Some(bucket) => {
                        let mut held = bucket.lock().unwrap_or_else(PoisonError::into_inner);
                        *held = held.clone().reshaped(rate);
                        drop(held);
                        bucket
                    }
                    None => Arc::new(Mutex::new(Bucket::new(rate, now))),
                });
                Arc::new(Client { key, bucket })
            })
            .collect();
        *live = next;
    }
}

/// The file's time, size and text, or why it cannot be read (no path in it).
fn read(path: &Path) -> Result<((SystemTime, u64), String), String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read the file: {}", e.kind()))?;
    if meta.len() > 1 << 20 {
        return Err("the file is over 1 MiB".into());
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read the file: {}", e.kind()))?;
    let stamp = (
        meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        meta.len(),
    );
    Ok((stamp, text))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
