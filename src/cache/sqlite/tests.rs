//! The state file's kept answers on a real file: kept and found, never for another
//! request, across a reopen, the least recently used evicted first (a hit counts
//! as a use), past their time gone, counted and forgotten by task.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::SqliteCache;
use crate::cache::{AnswerCache, AnswerKey, Kept};
use crate::engine::completion::{Finished, Output};
use crate::kept::{KeptAnswer, Named};
use crate::state_file::StateFile;

const DAY: Duration = Duration::from_secs(86_400);

fn file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ladle-cache-{name}-{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn open(path: &Path, max: usize) -> SqliteCache {
    SqliteCache::in_file(StateFile::open(path).expect("opens"), max).expect("reads")
}

fn key(dish: &str) -> AnswerKey {
    AnswerKey::new(
        "recipe",
        "m",
        "recipe",
        &json!({"messages": [dish]}).to_string(),
    )
}

fn kept(key: &AnswerKey, dish: &str) -> Kept {
    let finished = Finished {
        choices: Vec::new(),
        usage: None,
        meta: Default::default(),
        output: Some(Output::of(&json!({"title": dish}))),
        attempts: 1,
        upstream: "primary".into(),
        model: "m".into(),
        elapsed: Duration::ZERO,
        cache: None,
        gathered: true,
    };
    let named = Named {
        request_id: "r".into(),
        created: 0,
        response_id: None,
    };
    Kept {
        request: key.request.clone(),
        made_at: crate::wall::unix_millis(),
        answer: KeptAnswer::new(&finished, named),
    }
}

async fn put(cache: &SqliteCache, dish: &str) {
    let key = key(dish);
    cache.put(&key, &kept(&key, dish), DAY).await.expect("kept");
}

async fn title(cache: &SqliteCache, dish: &str) -> Option<String> {
    let found = cache.get(&key(dish)).await.expect("read");
    found.map(|kept| {
        kept.answer
            .output
            .as_ref()
            .map(Output::value)
            .unwrap_or_default()["title"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    })
}

#[tokio::test]
async fn a_kept_answer_is_found_under_its_key_and_survives_a_reopen() {
    let path = file("reopen");
    {
        let cache = open(&path, 10);
        put(&cache, "宫保鸡丁").await;
        assert_eq!(title(&cache, "宫保鸡丁").await.as_deref(), Some("宫保鸡丁"));
        assert_eq!(title(&cache, "麻婆豆腐").await, None);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cache = open(&path, 10);
    assert_eq!(title(&cache, "宫保鸡丁").await.as_deref(), Some("宫保鸡丁"));
}

#[tokio::test]
async fn an_answer_kept_for_another_request_under_the_same_hash_is_not_served() {
    let cache = open(Path::new(":memory:"), 10);
    let mine = key("宫保鸡丁");
    let mut theirs = kept(&mine, "别的菜");
    theirs.request = "another request".into();
    cache.put(&mine, &theirs, DAY).await.expect("kept");
    assert_eq!(
        cache.get(&mine).await.expect("read"),
        None,
        "a collision is a miss"
    );
}

#[tokio::test]
async fn past_the_bound_the_least_recently_used_go_first_and_a_hit_is_a_use() {
    let path = file("lru");
    {
        let cache = open(&path, 2);
        put(&cache, "a").await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        put(&cache, "b").await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert!(title(&cache, "a").await.is_some(), "a is used after b");
        tokio::time::sleep(Duration::from_millis(2)).await;
        put(&cache, "c").await;
        assert_eq!(
            title(&cache, "b").await,
            None,
            "b was the least recently used"
        );
        assert!(title(&cache, "a").await.is_some());
        assert!(title(&cache, "c").await.is_some());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    // A smaller bound at the next start evicts at open, by the uses written.
    let cache = open(&path, 1);
    assert_eq!(cache.count("recipe").await.expect("counts"), 1);
}

#[tokio::test]
async fn an_answer_past_its_time_is_gone_and_a_task_is_counted_and_forgotten() {
    let cache = open(Path::new(":memory:"), 10);
    let old = key("old");
    cache
        .put(&old, &kept(&old, "old"), Duration::ZERO)
        .await
        .expect("kept");
    assert_eq!(
        cache.get(&old).await.expect("read"),
        None,
        "kept for no time"
    );
    put(&cache, "x").await;
    put(&cache, "y").await;
    let fridge = AnswerKey::new("fridge", "m", "json", "{}");
    cache
        .put(&fridge, &kept(&fridge, "z"), DAY)
        .await
        .expect("kept");
    assert_eq!(cache.count("recipe").await.expect("counts"), 2);
    assert_eq!(cache.forget("recipe").await.expect("forgets"), 2);
    assert_eq!(cache.count("recipe").await.expect("counts"), 0);
    assert_eq!(
        cache.count("fridge").await.expect("counts"),
        1,
        "another task's stay"
    );
}
