//! The answer cache across replicas (contract 7.3): with Redis, answers are kept
//! there for every replica, each with a TTL of its own; a Redis that goes away
//! makes lookups misses, never errors.

use serde_json::json;

use crate::support::mock_upstream::*;
use crate::support::redis::RedisServer;
use crate::support::scripts::recipe_answer;
use crate::support::*;

#[tokio::test]
async fn an_answer_made_on_one_replica_is_a_hit_on_the_other() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([recipe_answer()]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let dish = json!({"dish": "回锅肉", "servings": 3});
    let made = json_of(a.task("recipe", &dish).await).await;
    assert_eq!(made["meta"]["cache"], "miss");
    let kept = json_of(b.task("recipe", &dish).await).await;
    assert_eq!(kept["meta"]["cache"], "hit", "{kept}");
    assert_eq!(kept["output"], made["output"]);
    assert_eq!(upstream.requests().len(), 1, "B asked no upstream");

    // The answer's key expires by itself: Redis does not fill up.
    let mut connection = redis.connection().await;
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg("*cache:*")
        .query_async(&mut connection)
        .await
        .expect("keys");
    let answer = keys
        .iter()
        .find(|k| {
            k.rsplit(':')
                .next()
                .is_some_and(|h| h.len() == 32 && !k.contains("task:"))
        })
        .expect("the answer's key");
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(answer)
        .query_async(&mut connection)
        .await
        .expect("pttl");
    let week_ms = 7 * 86_400_000;
    assert!(
        (week_ms - 60_000..=week_ms).contains(&ttl),
        "{answer}: {ttl} ms"
    );
    let count = b
        .admin(reqwest::Method::GET, "/admin/cache/recipe")
        .send()
        .await
        .expect("answers");
    assert_eq!(json_of(count).await["entries"], 1, "counted on any replica");
}

#[tokio::test]
async fn with_redis_gone_every_request_is_a_miss_answered_by_the_upstream() {
    let mut redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.cycle([recipe_answer()]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let dish = json!({"dish": "鱼香肉丝"});
    assert_eq!(
        json_of(a.task("recipe", &dish).await).await["meta"]["cache"],
        "miss"
    );
    redis.stop();
    let response = a.task("recipe", &dish).await;
    assert_eq!(
        response.status(),
        200,
        "the cache never turns into an error"
    );
    assert_eq!(json_of(response).await["meta"]["cache"], "miss");
    assert_eq!(upstream.requests().len(), 2);
    let forget = a
        .admin(reqwest::Method::DELETE, "/admin/cache/recipe")
        .send()
        .await
        .expect("answers");
    assert_eq!(forget.status(), 503);
    assert_eq!(error_of(forget).await.1["code"], "store_unavailable");

    redis.restart().await;
    let back = eventually(millis(5_000), "a hit once Redis is back", async || {
        let body = json_of(a.task("recipe", &dish).await).await;
        (body["meta"]["cache"] == "hit").then_some(body)
    })
    .await;
    assert_eq!(back["meta"]["attempts"], 0);
}
