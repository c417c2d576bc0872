//! Prompts in Redis, for a fleet (contract 6.7).
//!
//! Every replica serves from its own copy of the prompts, so a request never
//! waits for Redis and an outage changes nothing for callers. The copy follows a
//! version key: each write increments `{prefix}prompts:version`, and every replica
//! looks at that key on each refresh (`LADLE_PROMPT_RELOAD_MS`, 1 s by default)
//! and reloads when it moved. Polling one key was chosen over pub/sub: a message
//! published while a replica is disconnected is lost, a version is not.
//!
//! Writes are Lua scripts, so a write's `If-Match` check, its history entry and
//! the version bump are one atomic step: two replicas saving against one ETag
//! cannot both win. Seeding is a script too: the first replica to find no
//! `{prefix}prompts:seeded` copies its folder in, and a second one starting at the
//! same moment finds the key set.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use redis::Script;

use super::{FileStore, Prompt, PromptStore, Saved, StoreError, Version, rfc3339, valid_name};
use crate::fleet::{CALL_TIMEOUT, Redis, RedisDown};
use crate::store_down::{Cause, StoreDown};
use crate::wall::unix_millis;

/// Copies `ARGV[3..]` (name, text, etag triples) in at time `ARGV[2]`, unless
/// already seeded; the seed key holds `ARGV[1]`, an epoch no other seeding has.
const SEED: &str = r#"
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
for i = 3, #ARGV, 3 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 2])
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[2])
end
redis.call('INCR', KEYS[2])
return 1
"#;

/// Saves (`ARGV[4]` = text) or deletes (`ARGV[4]` = '') prompt `ARGV[1]` if
/// `ARGV[2]` (If-Match, when `ARGV[6]` = '1') allows, moving the live text to
/// history; never before the fleet is seeded (the seeding would be skipped).
const WRITE: &str = r#"
if redis.call('EXISTS', KEYS[7]) == 0 then return 'unseeded' end
local name = ARGV[1]
local current = redis.call('HGET', KEYS[2], name)
if ARGV[4] == '' and not current then return 'missing' end
if ARGV[6] == '1' and ARGV[2] ~= '*' and ARGV[2] ~= current then return 'mismatch' end
if current then
  local newest = tonumber(redis.call('HGET', KEYS[5], name) or '0')
  local millis = math.max(tonumber(ARGV[3]), newest + 1)
  local version = string.format('%013d', millis) .. '-' .. string.gsub(current, '"', '')
  redis.call('HSET', KEYS[4], version, redis.call('HGET', KEYS[1], name))
  redis.call('HSET', KEYS[5], name, millis)
end
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], name)
  redis.call('HDEL', KEYS[2], name)
  redis.call('HDEL', KEYS[3], name)
else
  redis.call('HSET', KEYS[1], name, ARGV[4])
  redis.call('HSET', KEYS[2], name, ARGV[5])
  redis.call('HSET', KEYS[3], name, ARGV[3])
end
redis.call('INCR', KEYS[6])
if current then return 'replaced' end
return 'created'
"#;

/// What this replica serves.
#[derive(Default)]
struct Snapshot {
    /// The seeding epoch and version it was loaded at; `None` while it is the
    /// folder's. The epoch tells a Redis that lost its data (and counts versions
    /// from 1 again) from the one the copy came from.
    at: Option<(String, i64)>,
    live: BTreeMap<String, (Arc<Prompt>, String)>,
    /// Folder files that did not load (only before the first Redis copy).
    broken: Vec<(String, String)>,
}

/// Prompts shared by a fleet through Redis.
pub struct RedisPrompts {
    redis: Arc<Redis>,
    folder: PathBuf,
    copy: RwLock<Snapshot>,
    /// One reload at a time, so an older load never replaces a newer copy.
    following: tokio::sync::Mutex<()>,
    seed: Script,
    write: Script,
}

impl RedisPrompts {
    /// Starts from the folder's prompts; `refresh` seeds Redis from them (if no
    /// replica has) and switches to Redis's.
    pub fn open(redis: Arc<Redis>, folder: impl Into<PathBuf>) -> Self {
        let folder = folder.into();
        let files = FileStore::open(&folder);
        let copy = Snapshot {
            at: None,
            live: files
                .list()
                .into_iter()
                .map(|(prompt, at)| (prompt.name.clone(), (prompt, at)))
                .collect(),
            broken: files.broken(),
        };
        RedisPrompts {
            redis,
            folder,
            copy: RwLock::new(copy),
            following: tokio::sync::Mutex::new(()),
            seed: Script::new(SEED),
            write: Script::new(WRITE),
        }
    }

    fn keys(&self) -> [String; 5] {
        ["text", "etag", "updated", "version", "seeded"]
            .map(|k| self.redis.key(&format!("prompts:{k}")))
    }

    /// Copies the folder in unless a replica already has.
    async fn seed(&self) -> Result<(), RedisDown> {
        let [text, etag, updated, version, seeded] = self.keys();
        let epoch = format!("{}-{}", unix_millis(), uuid::Uuid::new_v4().simple());
        let mut invocation = self.seed.prepare_invoke();
        invocation
            .key(seeded)
            .key(version)
            .key(text)
            .key(etag)
            .key(updated)
            .arg(epoch)
            .arg(unix_millis());
        for (prompt, _) in FileStore::open(&self.folder).list() {
            invocation
                .arg(&prompt.name)
                .arg(&prompt.source)
                .arg(&prompt.etag);
        }
        let seeded: i64 = self
            .redis
            .call("prompts_seed", CALL_TIMEOUT, |mut c| async move {
                invocation.invoke_async(&mut c).await
            })
            .await?;
        if seeded == 1 {
            tracing::info!(folder = %self.folder.display(), "seeded the fleet's prompts from the folder");
        }
        Ok(())
    }

    /// Loads Redis's prompts if their version moved since the copy was made.
    async fn follow(&self) -> Result<(), RedisDown> {
        let _one_at_a_time = self.following.lock().await;
        let [_, _, _, version, seeded] = self.keys();
        let at: (Option<String>, Option<i64>) = self
            .redis
            .call("prompts_version", CALL_TIMEOUT, |mut c| {
                let keys = [seeded.clone(), version.clone()];
                async move { redis::cmd("MGET").arg(&keys).query_async(&mut c).await }
            })
            .await?;
        match at {
            (Some(epoch), Some(version))
                if self
                    .read()
                    .at
                    .as_ref()
                    .is_some_and(|(e, v)| *e == epoch && *v == version) =>
            {
                return Ok(());
            }
            (None, _) => self.seed().await?,
            _ => {}
        }
        self.load().await
    }

    /// Loads Redis's prompts into the copy (a prompt that does not parse is
    /// skipped and logged).
    async fn load(&self) -> Result<(), RedisDown> {
        let [text, _, updated, version, seeded] = self.keys();
        type Loaded = (
            BTreeMap<String, String>,
            BTreeMap<String, u64>,
            Option<String>,
            Option<i64>,
        );
        let (texts, times, epoch, at): Loaded = self
            .redis
            .call("prompts_load", CALL_TIMEOUT, |mut c| async move {
                redis::pipe()
                    .atomic()
                    .hgetall(text)
                    .hgetall(updated)
                    .get(seeded)
                    .get(version)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        // Emptied between the two reads: keep serving the copy; the next look seeds.
        let Some(epoch) = epoch else {
            return Ok(());
        };
        let at = (epoch, at.unwrap_or_default());
        let mut live = BTreeMap::new();
        for (name, text) in texts {
            match Prompt::parse(&name, &text) {
                Ok(prompt) => {
                    let at = rfc3339(times.get(&name).copied().unwrap_or_default());
                    live.insert(name, (Arc::new(prompt), at));
                }
                Err(error) => {
                    tracing::warn!(prompt = %name, %error, "a prompt in redis does not parse; skipped")
                }
            }
        }
        tracing::info!(
            version = at.1,
            prompts = live.len(),
            "prompts loaded from redis"
        );
        *self.copy.write().unwrap_or_else(|e| e.into_inner()) = Snapshot {
            at: Some(at),
            live,
            broken: Vec::new(),
        };
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Snapshot> {
        self.copy.read().unwrap_or_else(|e| e.into_inner())
    }

    /// One save (`text` = Some) or delete, then the copy follows at once.
    fn write(
        &self,
        name: &str,
        text: Option<&Prompt>,
        if_match: Option<&str>,
    ) -> Result<String, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::BadName(name.to_owned()));
        }
        let [texts, etags, updated, version, seeded] = self.keys();
        let mut invocation = self.write.prepare_invoke();
        invocation
            .key(texts)
            .key(etags)
            .key(updated)
            .key(self.redis.key(&format!("prompts:history:{name}")))
            .key(self.redis.key("prompts:newest"))
            .key(version)
            .key(seeded)
            .arg(name)
            .arg(if_match.map_or("", str::trim))
            .arg(unix_millis())
            .arg(text.map_or("", |p| p.source.as_str()))
            .arg(text.map_or("", |p| p.etag.as_str()))
            .arg(if if_match.is_some() { "1" } else { "0" });
        let invocation = &invocation;
        let answer: String = self.redis.block_on(async {
            let attempt = || {
                self.redis
                    .call("prompts_write", CALL_TIMEOUT, |mut c| async move {
                        invocation.invoke_async::<String>(&mut c).await
                    })
            };
            let down = |error| unavailable("prompts_write", error);
            let mut answer = attempt().await.map_err(down)?;
            if answer == "unseeded" {
                // A new (or emptied) Redis: seed the fleet first, then write.
                self.follow().await.map_err(down)?;
                answer = attempt().await.map_err(down)?;
            }
            // The writer serves its own edit at once; the others follow the version.
            let _ = self.follow().await;
            Ok::<_, StoreError>(answer)
        })?;
        match answer.as_str() {
            "missing" => Err(StoreError::NotFound(name.to_owned())),
            "mismatch" => Err(StoreError::EtagMismatch),
            "created" | "replaced" => Ok(answer),
            other => {
                let cause = Cause::Redis(format!("unexpected answer `{other}`"));
                Err(StoreDown::new("prompts_write", cause).into())
            }
        }
    }
}

fn unavailable(op: &'static str, error: RedisDown) -> StoreError {
    StoreDown::new(op, Cause::Redis(error.to_string())).into()
}

impl PromptStore for RedisPrompts {
    fn get(&self, name: &str) -> Option<Arc<Prompt>> {
        self.read().live.get(name).map(|(prompt, _)| prompt.clone())
    }

    fn list(&self) -> Vec<(Arc<Prompt>, String)> {
        self.read().live.values().cloned().collect()
    }

    fn broken(&self) -> Vec<(String, String)> {
        self.read().broken.clone()
    }

    fn save(&self, name: &str, text: &str, if_match: Option<&str>) -> Result<Saved, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::BadName(name.to_owned()));
        }
        let prompt = Prompt::parse(name, text)?;
        let answer = self.write(name, Some(&prompt), if_match)?;
        Ok(Saved {
            created: answer == "created",
            etag: prompt.etag,
        })
    }

    fn delete(&self, name: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        self.write(name, None, if_match).map(drop)
    }

    fn history(&self, name: &str) -> Result<Vec<Version>, StoreError> {
        Ok(self
            .versions(name)?
            .into_keys()
            .rev()
            .filter_map(|version| {
                let (millis, tag) = version.split_once('-')?;
                Some(Version {
                    etag: format!("\"{tag}\""),
                    saved_at: rfc3339(millis.parse().ok()?),
                    version,
                })
            })
            .collect())
    }

    fn rollback(&self, name: &str, version: &str) -> Result<Saved, StoreError> {
        let text = self
            .versions(name)?
            .remove(version)
            .ok_or_else(|| StoreError::NotFound(version.to_owned()))?;
        self.save(name, &text, None)
    }

    fn refresh(&self) {
        // Unreachable: the copy stays as it is; `Redis::call` logged and counted it.
        let _ = self.redis.block_on(self.follow());
    }
}

impl RedisPrompts {
    /// Every history version of a prompt, by version id, with its text.
    fn versions(&self, name: &str) -> Result<BTreeMap<String, String>, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::BadName(name.to_owned()));
        }
        let key = self.redis.key(&format!("prompts:history:{name}"));
        self.redis
            .block_on(
                self.redis
                    .call("prompts_history", CALL_TIMEOUT, |mut c| async move {
                        redis::cmd("HGETALL").arg(key).query_async(&mut c).await
                    }),
            )
            .map_err(|error| unavailable("prompts_history", error))
    }
}
