//! Prompts shared through Redis: edits, deletes, history, rollback, `If-Match`
//! and seeding, across two replicas.

use std::cell::RefCell;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::redis::{RedisServer, follows_redis};
use crate::support::*;

#[tokio::test]
async fn an_edit_on_one_replica_is_what_the_other_sends_upstream_within_2_s() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse_answer(&["好"]));
    let a = Gateway::replica(&redis, &upstream).start().await;
    // B looks at Redis at the default pace (once a second), as in production.
    let b = Gateway::replica(&redis, &upstream)
        .adjust(|c| c.prompt_reload = Duration::from_secs(1))
        .start()
        .await;
    let saved = a
        .put_prompt("soup", &small_prompt("副本甲改的汤"), None)
        .await;
    assert_eq!(saved.status(), 201);
    let etag = etag_of(&saved);
    let took = b.sees("soup", Some(&etag)).await;
    let answer = b.task("soup", &json!({"dish": "番茄蛋汤"})).await;
    assert_eq!(answer.status(), 200, "{took:?}");
    assert_eq!(user_message_sent(&upstream, 0), "副本甲改的汤：番茄蛋汤");
    // B's folder never had the prompt: it came through Redis.
    assert!(!b.prompts_dir.join("soup.toml").exists());
}

#[tokio::test]
async fn delete_history_rollback_and_if_match_agree_across_replicas() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let v1 = etag_of(&a.put_prompt("soup", &small_prompt("一"), None).await);
    b.sees("soup", Some(&v1)).await;
    // B saves over A's version with A's ETag; A's stale ETag then fails on A.
    let second = b.put_prompt("soup", &small_prompt("二"), Some(&v1)).await;
    assert_eq!(second.status(), 200);
    let v2 = etag_of(&second);
    let stale = a.put_prompt("soup", &small_prompt("三"), Some(&v1)).await;
    assert_eq!(
        stale.status(),
        412,
        "the ETag check is the fleet's, not A's copy's"
    );
    // History made on B reads the same on A.
    let history = |r: &Gateway| r.admin(Method::GET, "/admin/prompts/soup/history").send();
    let on_a: Value = json_of(history(&a).await.expect("A answers")).await;
    let on_b: Value = json_of(history(&b).await.expect("B answers")).await;
    assert_eq!(on_a, on_b);
    assert_eq!(on_a[0]["etag"], v1.as_str());
    // Rollback on A to v1: B serves it.
    let version = on_a[0]["version"].as_str().expect("a version").to_owned();
    let rolled = a
        .admin(Method::POST, "/admin/prompts/soup/rollback")
        .json(&json!({"version": version}))
        .send()
        .await
        .expect("A answers");
    assert_eq!(rolled.status(), 200);
    assert_eq!(etag_of(&rolled), v1);
    b.sees("soup", Some(&v1)).await;
    // Delete on B with a stale ETag fails, with the live one succeeds; A follows,
    // and the history stays.
    let delete = |tag: &str| {
        b.admin(Method::DELETE, "/admin/prompts/soup")
            .header("if-match", tag)
            .send()
    };
    assert_eq!(delete(&v2).await.expect("B answers").status(), 412);
    assert_eq!(delete(&v1).await.expect("B answers").status(), 204);
    a.sees("soup", None).await;
    let after: Value = json_of(history(&a).await.expect("A answers")).await;
    assert_eq!(after.as_array().map(Vec::len), Some(3), "{after}");
}

#[tokio::test]
async fn two_concurrent_saves_with_one_etag_get_one_200_and_one_412() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let base = etag_of(&a.put_prompt("soup", &small_prompt("底"), None).await);
    b.sees("soup", Some(&base)).await;
    for round in 0..5 {
        let live = a.prompt_etag("soup").await.expect("live");
        let (text_a, text_b) = (
            small_prompt(&format!("甲{round}")),
            small_prompt(&format!("乙{round}")),
        );
        let (one, other) = tokio::join!(
            a.put_prompt("soup", &text_a, Some(&live)),
            b.put_prompt("soup", &text_b, Some(&live)),
        );
        let mut statuses = [one.status().as_u16(), other.status().as_u16()];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 412], "round {round}");
        let winner = if one.status() == 200 { &one } else { &other };
        let winner = etag_of(winner);
        a.sees("soup", Some(&winner)).await;
        b.sees("soup", Some(&winner)).await;
    }
}

#[tokio::test]
async fn two_replicas_starting_together_seed_the_fleet_once() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    let only_a = small_prompt("只在甲");
    let only_b = small_prompt("只在乙");
    let (a, b) = tokio::join!(
        Gateway::replica(&redis, &upstream)
            .prompt("only_a", &only_a)
            .start(),
        Gateway::replica(&redis, &upstream)
            .prompt("only_b", &only_b)
            .start(),
    );
    let names = |r: &Gateway| {
        let r = r.admin(Method::GET, "/admin/prompts").send();
        async move {
            let list: Value = json_of(r.await.expect("answers")).await;
            let mut names: Vec<String> = list
                .as_array()
                .expect("a prompt list")
                .iter()
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            names.sort();
            names
        }
    };
    let seen = RefCell::new((Vec::new(), Vec::new()));
    let what = Lazy(|| {
        let (on_a, on_b) = &*seen.borrow();
        format!("both replicas to list one folder's prompts (A {on_a:?}, B {on_b:?})")
    });
    eventually(Duration::from_secs(2), what, async || {
        let (on_a, on_b) = (names(&a).await, names(&b).await);
        let one_folder =
            on_a == ["fridge", "only_a", "recipe"] || on_a == ["fridge", "only_b", "recipe"];
        let agreed = one_folder && on_a == on_b;
        *seen.borrow_mut() = (on_a, on_b);
        agreed
    })
    .await;
    let mut connection = redis.connection().await;
    let stored: Vec<String> = ::redis::cmd("HKEYS")
        .arg("ladle:prompts:text")
        .query_async(&mut connection)
        .await
        .expect("HKEYS");
    assert_eq!(
        stored.len(),
        3,
        "one folder was copied in, not both: {stored:?}"
    );
}

#[tokio::test]
async fn a_redis_that_lost_its_data_is_seeded_again_before_the_first_write() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    // A looks at Redis only at start (it seeds then), and no other replica runs:
    // its write below meets an empty Redis.
    let a = Gateway::replica(&redis, &upstream)
        .adjust(|c| c.prompt_reload = Duration::from_secs(60))
        .start()
        .await;
    redis.wait_for_key("ladle:prompts:seeded").await;
    let mut connection = redis.connection().await;
    let () = ::redis::cmd("FLUSHALL")
        .query_async(&mut connection)
        .await
        .expect("FLUSHALL");
    // The write replaces the seeded recipe: the seeding came first, not after
    // (where it would put the folder's recipe back over the edit).
    let saved = a.put_prompt("recipe", &small_prompt("重来"), None).await;
    assert_eq!(saved.status(), 200);
    let mut stored: Vec<String> = ::redis::cmd("HKEYS")
        .arg("ladle:prompts:text")
        .query_async(&mut connection)
        .await
        .expect("HKEYS");
    stored.sort();
    assert_eq!(stored, ["fridge", "recipe"], "seeded, then written");
    a.sees("recipe", Some(&etag_of(&saved))).await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    b.sees("recipe", Some(&etag_of(&saved))).await;
    // An empty If-Match names no version: it never matches.
    let empty = a.put_prompt("recipe", &small_prompt("空"), Some("")).await;
    assert_eq!(empty.status(), 412);
}

#[tokio::test]
async fn a_reseeded_redis_is_followed_even_at_the_same_version_number() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    let a = Gateway::replica(&redis, &upstream).start().await;
    // B polls at the default pace, so A (every 50 ms) reseeds before B looks.
    let b = Gateway::replica(&redis, &upstream)
        .adjust(|c| c.prompt_reload = Duration::from_secs(1))
        .start()
        .await;
    // Both replicas serve the first seeding's copy before Redis loses it.
    let mut connection = redis.connection().await;
    // Both within 2 s in all.
    let started = Instant::now();
    for replica in [&a, &b] {
        let left = Duration::from_secs(2).saturating_sub(started.elapsed());
        let what = format!("{} to serve Redis's recipe", replica.base);
        eventually(left, what, async || {
            follows_redis(replica, &mut connection, "recipe").await
        })
        .await;
    }
    // Both copies are at version 1 of the first seeding. Redis loses its data,
    // and the next seeding (from a folder that gained a prompt) is version 1 too.
    std::fs::write(a.prompts_dir.join("extra.toml"), small_prompt("新种")).expect("extra");
    std::fs::write(b.prompts_dir.join("extra.toml"), small_prompt("新种")).expect("extra");
    let () = ::redis::cmd("FLUSHALL")
        .query_async(&mut connection)
        .await
        .expect("FLUSHALL");
    let started = Instant::now();
    for (name, replica) in [("A", &a), ("B", &b)] {
        let left = Duration::from_secs(2).saturating_sub(started.elapsed());
        let what = format!("{name} to see the reseeded prompts");
        eventually(left, what, async || {
            replica.prompt_etag("extra").await.is_some()
        })
        .await;
    }
}
