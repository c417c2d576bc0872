//! Hit, miss and stale (contract 7.3's table), in every form a task answers in.

use std::time::Duration;

use serde_json::json;

use super::{ask, cached_prompt, counted, idea, kept_a_minute, said};
use crate::support::mock_upstream::*;
use crate::support::scripts::recipe_answer;
use crate::support::*;

/// One upstream attempt per request, so a busy upstream fails a run at once.
fn one_attempt(config: &mut ladle::config::Config) {
    config.retry.max_attempts = 1;
}

#[tokio::test]
async fn a_second_identical_recipe_is_a_hit_with_no_upstream_call() {
    let upstream = MockUpstream::start().await;
    upstream.push([recipe_answer(), recipe_answer()]);
    let gateway = Gateway::options().mock(&upstream).start().await;
    let first = json_of(gateway.task("recipe", &json!({"dish": "宫保鸡丁"})).await).await;
    assert_eq!(
        (
            first["meta"]["cache"].as_str(),
            first["meta"]["attempts"].as_u64()
        ),
        (Some("miss"), Some(1))
    );
    assert!(first["meta"].get("cached_at").is_none());

    let again = gateway.task("recipe", &json!({"dish": "宫保鸡丁"})).await;
    assert_eq!(again.status(), 200);
    let again = json_of(again).await;
    assert_eq!(upstream.requests().len(), 1, "a hit asks no upstream");
    assert_eq!(
        (
            again["meta"]["cache"].as_str(),
            again["meta"]["attempts"].as_u64()
        ),
        (Some("hit"), Some(0))
    );
    assert!(
        again["meta"]["cached_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{again}"
    );
    assert_eq!(again["output"], first["output"]);
    assert_ne!(
        again["meta"]["request_id"], first["meta"]["request_id"],
        "meta is the new request's"
    );
    assert!(
        again["meta"].get("usage").is_none(),
        "a hit spent no tokens"
    );

    let other = json_of(gateway.task("recipe", &json!({"dish": "麻婆豆腐"})).await).await;
    assert_eq!(
        other["meta"]["cache"], "miss",
        "other variables never meet an old answer"
    );
    assert_eq!(upstream.requests().len(), 2);
    assert_eq!(counted(&gateway, "recipe", "hit").await, 1.0);
    assert_eq!(counted(&gateway, "recipe", "miss").await, 2.0);

    upstream.push([sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])]);
    let fridge = json_of(
        gateway
            .task("fridge", &json!({"ingredients": ["蛋"]}))
            .await,
    )
    .await;
    assert!(
        fridge["meta"].get("cache").is_none(),
        "a task without [cache]: {fridge}"
    );
}

#[tokio::test]
async fn a_retryable_failure_gets_the_stale_answer_and_a_final_one_its_error() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一"), status(503, r#"{"error":{"message":"busy"}}"#)]);
    let gateway = Gateway::options()
        .mock(&upstream)
        .prompt("ideas", &cached_prompt(1, 60_000))
        .adjust(one_attempt)
        .start()
        .await;
    assert_eq!(
        said(&ask(&gateway, "ideas", "鸡", None).await.1),
        ("miss".into(), "一".into())
    );
    tokio::time::sleep(Duration::from_millis(5)).await; // past its 1 ms ttl
    let (code, stale) = ask(&gateway, "ideas", "鸡", None).await;
    assert_eq!(code, 200, "{stale}");
    assert_eq!(said(&stale), ("stale".into(), "一".into()));
    assert!(stale["meta"]["cached_at"].is_string());
    assert_eq!(stale["meta"]["attempts"], 1, "the run's attempts: {stale}");
    assert_eq!(upstream.requests().len(), 2, "the run was made");
    assert_eq!(counted(&gateway, "ideas", "stale").await, 1.0);

    upstream.push([status(
        400,
        r#"{"error":{"message":"no","code":"content_filter"}}"#,
    )]);
    let (code, refused) = ask(&gateway, "ideas", "鸡", None).await;
    assert_eq!(code, 502, "a final error is not hidden: {refused}");
    assert_eq!(refused["error"]["code"], "upstream_rejected");
}

#[tokio::test]
async fn a_hit_in_the_event_stream_is_one_result_event() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一")]);
    let gateway = kept_a_minute(&upstream).start().await;
    ask(&gateway, "ideas", "鸡", None).await;
    let response = gateway
        .post_events("/v1/tasks/ideas", &json!({"dish": "鸡"}))
        .await;
    let events = task_events(&response.text().await.expect("the stream"));
    assert_eq!(event_names(&events), ["result"], "{events:?}");
    assert_eq!(said(&events[0].1), ("hit".into(), "一".into()));
}

#[tokio::test]
async fn a_stale_answer_in_the_event_stream_comes_after_the_attempts_and_retries() {
    let upstream = MockUpstream::start().await;
    let busy = || status(503, r#"{"error":{"message":"busy"}}"#);
    upstream.push([idea("一"), busy(), busy()]);
    let gateway = Gateway::options()
        .mock(&upstream)
        .prompt("ideas", &cached_prompt(1, 60_000))
        .adjust(|c| c.retry.max_attempts = 2)
        .start()
        .await;
    ask(&gateway, "ideas", "鸡", None).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let response = gateway
        .post_events("/v1/tasks/ideas", &json!({"dish": "鸡"}))
        .await;
    let events = task_events(&response.text().await.expect("the stream"));
    assert_eq!(
        event_names(&events),
        ["attempt", "retry", "attempt", "result"],
        "{events:?}"
    );
    let result = &events[3].1;
    assert_eq!(
        (
            result["meta"]["cache"].as_str(),
            result["meta"]["attempts"].as_u64()
        ),
        (Some("stale"), Some(2))
    );
}

#[tokio::test]
async fn no_cache_skips_the_hit_but_keeps_the_answer_and_no_store_neither_reads_nor_writes() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一"), idea("二"), idea("三")]);
    let gateway = kept_a_minute(&upstream).start().await;
    let asked = async |control| said(&ask(&gateway, "ideas", "鸡", control).await.1);
    assert_eq!(asked(None).await, ("miss".into(), "一".into()));
    assert_eq!(
        asked(Some("no-store")).await,
        ("miss".into(), "二".into()),
        "not read"
    );
    assert_eq!(
        asked(None).await,
        ("hit".into(), "一".into()),
        "not written either"
    );
    assert_eq!(
        asked(Some("max-age=0, no-cache")).await,
        ("miss".into(), "三".into())
    );
    assert_eq!(
        asked(None).await,
        ("hit".into(), "三".into()),
        "no-cache's answer is kept"
    );
    assert_eq!(upstream.requests().len(), 3);
}

#[tokio::test]
async fn a_prompt_edit_through_the_admin_api_changes_the_key() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一"), idea("二")]);
    let gateway = kept_a_minute(&upstream).admin().start().await;
    assert_eq!(said(&ask(&gateway, "ideas", "鸡", None).await.1).0, "miss");
    assert_eq!(said(&ask(&gateway, "ideas", "鸡", None).await.1).0, "hit");
    let edited = cached_prompt(60_000, 60_000).replace("出个主意", "出个新主意");
    let saved = gateway.put_prompt("ideas", &edited, None).await;
    assert_eq!(saved.status(), 200);
    let etag = etag_of(&saved);
    gateway.sees("ideas", Some(&etag)).await;
    assert_eq!(
        said(&ask(&gateway, "ideas", "鸡", None).await.1),
        ("miss".into(), "二".into())
    );
    assert_eq!(upstream.requests().len(), 2);
}

#[tokio::test]
async fn a_jobs_run_uses_the_cache_and_a_hit_finishes_it_at_once() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一")]);
    let gateway = kept_a_minute(&upstream).adjust(one_attempt).start().await;
    ask(&gateway, "ideas", "鸡", None).await;
    let job = job_succeeded_in_one_run(&gateway, "ideas", &json!({"dish": "鸡"})).await;
    assert_eq!(said(&job["result"]), ("hit".into(), "一".into()));
    assert_eq!(upstream.requests().len(), 1, "the run asked no upstream");
}

#[tokio::test]
async fn the_admin_api_counts_and_forgets_a_tasks_kept_answers() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一"), idea("二"), idea("三")]);
    let gateway = kept_a_minute(&upstream).admin().start().await;
    ask(&gateway, "ideas", "鸡", None).await;
    ask(&gateway, "ideas", "鸭", None).await;
    let entries = |response: reqwest::Response| async move { json_of(response).await };
    let count = gateway
        .admin(reqwest::Method::GET, "/admin/cache/ideas")
        .send()
        .await
        .expect("answers");
    assert_eq!(entries(count).await, json!({"task": "ideas", "entries": 2}));
    let unauthorized = gateway
        .client
        .delete(gateway.url("/admin/cache/ideas"))
        .send()
        .await
        .expect("answers");
    assert_eq!(unauthorized.status(), 401);
    let forgot = gateway
        .admin(reqwest::Method::DELETE, "/admin/cache/ideas")
        .send()
        .await
        .expect("answers");
    assert_eq!(forgot.status(), 200);
    assert_eq!(entries(forgot).await, json!({"deleted": 2}));
    assert_eq!(
        said(&ask(&gateway, "ideas", "鸡", None).await.1),
        ("miss".into(), "三".into())
    );
    let none = gateway
        .admin(reqwest::Method::DELETE, "/admin/cache/recipe")
        .send()
        .await
        .expect("answers");
    assert_eq!(entries(none).await, json!({"deleted": 0}));
}
