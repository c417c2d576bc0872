//! The editor's Try (`POST /admin/prompts/{name}/try`): the task's named events
//! on the admin token, with client keys on or off, never reading or writing the
//! answer cache.

use reqwest::Method;
use serde_json::json;

use crate::clients::{keys_file, with_keys};
use crate::support::scripts::recipe_answer;
use crate::support::*;

#[tokio::test]
async fn a_try_runs_on_the_admin_token_with_client_keys_on_and_leaves_the_cache_alone() {
    let path = keys_file(&[("alpha", "lk_test-alpha-key-0001", "")]);
    let app = Gateway::options()
        .admin()
        .adjust(with_keys(&path))
        .start()
        .await;
    app.upstream()
        .push([recipe_answer(), recipe_answer(), recipe_answer()]);
    let try_it = async || {
        app.admin(Method::POST, "/admin/prompts/recipe/try")
            .json(&json!({"dish": "香酥鸭"}))
            .send()
            .await
            .expect("the try answers")
    };
    for _ in 0..2 {
        let response = try_it().await;
        assert_eq!(response.status(), 200);
        let events = task_events(&response.text().await.expect("events"));
        let names = event_names(&events);
        assert_eq!(names.last(), Some(&"result"), "{names:?}");
        let (_, result) = events.last().expect("a result");
        assert_eq!(
            result["meta"]["cache"], "miss",
            "never a kept answer: {result}"
        );
    }
    assert_eq!(
        app.upstream().requests().len(),
        2,
        "each try asks the upstream"
    );
    assert_eq!(
        app.metric("ladle_cache_total{task=\"recipe\",outcome=\"hit\"}")
            .await,
        0.0
    );
    // Nothing was kept: the caller's first request is a miss, made by the upstream.
    let caller = app
        .post_request("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .bearer_auth("lk_test-alpha-key-0001")
        .send()
        .await
        .expect("answers");
    let body = json_of(caller).await;
    assert_eq!(body["meta"]["cache"], "miss", "{body}");
    assert_eq!(app.upstream().requests().len(), 3);
}

#[tokio::test]
async fn a_try_needs_the_admin_token_not_a_client_key() {
    let app = Gateway::options().admin().start().await;
    let response = app
        .post_request("/admin/prompts/recipe/try", &json!({"dish": "鸭"}))
        .bearer_auth("lk_test-alpha-key-0001")
        .send()
        .await
        .expect("answers");
    let (status, body) = error_of(response).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unauthorized")));
}
