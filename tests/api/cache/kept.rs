//! Where answers are kept: at most `LADLE_CACHE_MAX_ENTRIES`, the least recently
//! used first out; none over 1 MiB; in the real state file across a restart, with
//! the request's log line saying what the cache did.

use std::time::Duration;

use serde_json::{Value, json};

use super::{ask, cached_prompt, idea, kept_a_minute, said};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::scripts::recipe_answer;
use crate::support::*;

#[tokio::test]
async fn past_the_bound_the_least_recently_used_answer_goes_first() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("鸡"), idea("鸭"), idea("鱼"), idea("鸭again")]);
    let gateway = kept_a_minute(&upstream)
        .adjust(|c| c.cache_max_entries = 2)
        .start()
        .await;
    let cache_of = async |dish| said(&ask(&gateway, "ideas", dish, None).await.1).0;
    assert_eq!(cache_of("鸡").await, "miss");
    assert_eq!(cache_of("鸭").await, "miss");
    assert_eq!(cache_of("鸡").await, "hit", "鸡 is now used after 鸭");
    assert_eq!(cache_of("鱼").await, "miss");
    assert_eq!(cache_of("鸡").await, "hit");
    assert_eq!(cache_of("鱼").await, "hit");
    assert_eq!(
        cache_of("鸭").await,
        "miss",
        "鸭 was the least recently used"
    );
    assert_eq!(upstream.requests().len(), 4);
}

#[tokio::test]
async fn an_answer_over_1_mib_is_answered_but_not_kept() {
    let upstream = MockUpstream::start().await;
    let long = "菜".repeat(400_000); // 1.2 MB of UTF-8
    let pieces: Vec<String> = pieces(&long, 4_000);
    let big = || sse_answer(&pieces.iter().map(String::as_str).collect::<Vec<_>>());
    upstream.push([big(), big(), idea("小")]);
    let text_prompt =
        cached_prompt(60_000, 60_000).replace(r#"output = "json""#, r#"output = "text""#);
    let gateway = Gateway::options()
        .mock(&upstream)
        .prompt("essay", &text_prompt)
        .start()
        .await;
    for _ in 0..2 {
        let (status, body) = ask(&gateway, "essay", "鸡", None).await;
        assert_eq!(status, 200);
        assert_eq!(body["meta"]["cache"], "miss");
        assert_eq!(body["output"].as_str().map(str::len), Some(long.len()));
    }
    assert_eq!(upstream.requests().len(), 2, "the first was not kept");
    ask(&gateway, "essay", "鸭", None).await;
    assert_eq!(
        ask(&gateway, "essay", "鸭", None).await.1["meta"]["cache"],
        "hit",
        "a small one is"
    );
}

#[tokio::test]
async fn a_kept_recipe_answers_after_a_restart_on_the_same_state_file() {
    let upstream = MockUpstream::start().await;
    upstream.push([recipe_answer()]);
    let db = temp_dir("cache-restart").join("state.db");
    let env = [("LADLE_STATE_DB", db.to_str().expect("a UTF-8 path"))];
    let dish = json!({"dish": "宫保鸡丁", "servings": 2});
    let mut first = LadleProcess::start(&upstream.url, &env).await;
    let made = json_of(first.task("recipe", &dish).await).await;
    assert_eq!(made["meta"]["cache"], "miss");
    first.terminate();
    first.exited(Duration::from_secs(5)).await;

    let mut second = LadleProcess::start(&upstream.url, &env).await;
    let response = second
        .post_request("/v1/tasks/recipe", &dish)
        .header("x-request-id", "after-the-restart")
        .send()
        .await
        .expect("answers");
    let kept = json_of(response).await;
    assert_eq!(kept["meta"]["cache"], "hit", "{kept}");
    assert_eq!(kept["output"], made["output"]);
    assert_eq!(upstream.requests().len(), 1);
    second.terminate();
    second.exited(Duration::from_secs(5)).await;
    let lines = second.lines_of("after-the-restart", "request answered");
    let line: &Value = lines.first().expect("the request's line");
    assert_eq!(line["cache"], "hit", "{line}");
}
