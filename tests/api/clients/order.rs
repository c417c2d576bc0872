//! The order of the refusals (401, 403, 429, then validation), and what a
//! refused request takes: no token of its key's bucket.

use serde_json::json;

use super::*;
use crate::support::mock_upstream::*;

/// A key that may run only the fridge task, with a burst of 2 and a slow
/// refill (a token every 4 s: none comes back during a test).
const FRIDGE_SLOW: &str = "tasks = [\"fridge\"]\nrate_per_s = 0.25\nburst = 2";

#[tokio::test]
async fn an_unknown_key_on_a_forbidden_task_is_401_not_403() {
    let path = keys_file(&[("fridge-only", KEY_A, FRIDGE_SLOW)]);
    let gateway = keyed_gateway(&path).await;
    let dish = json!({"dish": "红烧肉"});
    let unknown = post_as(&gateway, KEY_B, "/v1/tasks/recipe", &dish).await;
    refused(unknown, 401, "unauthorized").await;
    let none = gateway.post("/v1/tasks/recipe", &dish).await;
    refused(none, 401, "unauthorized").await;
}

#[tokio::test]
async fn a_forbidden_task_is_403_even_when_the_key_is_over_its_rate_and_takes_no_token() {
    let path = keys_file(&[("fridge-only", KEY_A, FRIDGE_SLOW)]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    let dish = json!({"dish": "红烧肉"});
    for _ in 0..3 {
        let forbidden = post_as(&gateway, KEY_A, "/v1/tasks/recipe", &dish).await;
        refused(forbidden, 403, "forbidden").await;
    }
    // Three 403s took nothing: the whole burst of 2 is still there.
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    rate_limited(chat_as(&gateway, KEY_A).await, "4").await;
    // Over its rate, the key still hears 403 first on a task it may not run.
    let forbidden = post_as(&gateway, KEY_A, "/v1/tasks/recipe", &dish).await;
    refused(forbidden, 403, "forbidden").await;
    assert_eq!(gateway.upstream().requests().len(), 2);
    assert_eq!(
        gateway
            .metric("ladle_limit_rejections_total{scope=\"client\"}")
            .await,
        1.0,
        "only the 429 is a limit's rejection"
    );
}

#[tokio::test]
async fn a_key_over_its_rate_hears_429_before_its_request_is_validated() {
    let path = keys_file(&[("slow", KEY_A, "rate_per_s = 0.25\nburst = 1")]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    let bad_chat = post_as(
        &gateway,
        KEY_A,
        "/v1/chat/completions",
        &json!({"messages": 3}),
    )
    .await;
    rate_limited(bad_chat, "4").await;
    let bad_task = post_as(&gateway, KEY_A, "/v1/tasks/fridge", &json!({})).await;
    rate_limited(bad_task, "4").await;
    assert_eq!(gateway.upstream().requests().len(), 1);
}
