//! What a kept answer is kept under, beyond what the upstream is asked: the
//! prompt's `output` kind (an edit from `json` to `text` never meets the old
//! answer), and the client key with `[cache] per_client = true` (by default one
//! key's answer serves another that asks the same). And every `Cache-Control`
//! line of a request counts, not only the first.

use serde_json::json;

use super::{cached_prompt, idea, kept_a_minute, said};
use crate::clients::{KEY_A, KEY_B, keys_file, post_as, with_keys};
use crate::support::mock_upstream::*;
use crate::support::*;

#[tokio::test]
async fn an_edit_of_the_output_kind_misses_the_kept_answer() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一"), idea("二")]);
    let gateway = kept_a_minute(&upstream).admin().start().await;
    let asked = async || {
        let body = json_of(gateway.task("ideas", &json!({"dish": "鸡"})).await).await;
        (body["meta"]["cache"].clone(), body["output"].clone())
    };
    assert_eq!(asked().await, (json!("miss"), json!({"idea": "一"})));
    assert_eq!(asked().await.0, "hit");
    let edited = cached_prompt(60_000, 60_000).replace("output = \"json\"", "output = \"text\"");
    let saved = gateway.put_prompt("ideas", &edited, None).await;
    assert_eq!(saved.status(), 200);
    gateway.sees("ideas", Some(&etag_of(&saved))).await;
    assert_eq!(
        asked().await,
        (json!("miss"), json!(r#"{"idea": "二"}"#)),
        "the text kind's own answer, not the kept object"
    );
    assert_eq!(upstream.requests().len(), 2);
}

/// Asks `task` about a dish under client key `key`: `(meta.cache, idea)`.
async fn ask_as(gateway: &Gateway, key: &str, task: &str) -> (String, String) {
    let path = format!("/v1/tasks/{task}");
    let answer = post_as(gateway, key, &path, &json!({"dish": "鸡"})).await;
    said(&json_of(answer).await)
}

#[tokio::test]
async fn answers_are_shared_across_client_keys_unless_the_prompt_keeps_them_per_client() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一"), idea("二"), idea("三")]);
    let keys = keys_file(&[("alpha", KEY_A, ""), ("bravo", KEY_B, "")]);
    let per_client = cached_prompt(60_000, 60_000).replace("[cache]", "[cache]\nper_client = true");
    let gateway = Gateway::options()
        .mock(&upstream)
        .prompt("shared", &cached_prompt(60_000, 60_000))
        .prompt("own", &per_client)
        .adjust(with_keys(&keys))
        .start()
        .await;
    // Who asks, which task, and what comes back, in turn.
    let asked = [
        (KEY_A, "shared", "miss", "一"),
        (KEY_B, "shared", "hit", "一"),
        (KEY_A, "own", "miss", "二"),
        (KEY_B, "own", "miss", "三"),
        (KEY_A, "own", "hit", "二"),
        (KEY_B, "own", "hit", "三"),
    ];
    for (key, task, cache, answer) in asked {
        assert_eq!(
            ask_as(&gateway, key, task).await,
            (cache.into(), answer.into()),
            "{task} as {key}"
        );
    }
    assert_eq!(upstream.requests().len(), 3);
}

#[tokio::test]
async fn a_second_cache_control_line_counts() {
    let upstream = MockUpstream::start().await;
    upstream.push([idea("一"), idea("二")]);
    let gateway = kept_a_minute(&upstream).start().await;
    let ask = async |lines: &[&str]| {
        let mut request = gateway.post_request("/v1/tasks/ideas", &json!({"dish": "鸡"}));
        for line in lines {
            request = request.header("cache-control", *line);
        }
        said(&json_of(request.send().await.expect("answers")).await)
    };
    assert_eq!(ask(&[]).await, ("miss".into(), "一".into()));
    assert_eq!(
        ask(&["max-age=60", "no-store"]).await,
        ("miss".into(), "二".into()),
        "no-store on the second line: not read"
    );
    assert_eq!(ask(&[]).await, ("hit".into(), "一".into()), "nor written");
}
