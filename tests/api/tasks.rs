//! `POST /v1/tasks/{name}`: prompt templates, normalization and task events.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mock_upstream::*;
use crate::support::scripts::recipe_answer;
use crate::support::*;

#[tokio::test]
async fn a_recipe_task_returns_the_normalized_recipe_and_sends_the_rendered_prompt() {
    // Arrange
    let app = Gateway::start().await;
    app.upstream().push([recipe_answer()]);
    // Act
    let response = app
        .post(
            "/v1/tasks/recipe",
            &json!({"dish": "香酥鸭", "servings": 4}),
        )
        .await;
    // Assert
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    let expected: Value =
        serde_json::from_str(&fixture_text("recipe-normalized.json")).expect("golden JSON");
    assert_eq!(body["output"], expected);
    assert_eq!(body["task"], "recipe");
    assert_eq!(body["meta"]["attempts"], 1);
    assert!(body["meta"]["request_id"].is_string() && body["meta"]["elapsed_ms"].is_u64());
    let sent = &app.upstream().requests()[0].body;
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["temperature"], 0.7);
    assert_eq!(sent["max_tokens"], 2400);
    let user = sent["messages"][1]["content"]
        .as_str()
        .expect("user message");
    assert!(
        user.contains("香酥鸭") && user.contains('4'),
        "user message: {user}"
    );
}

#[tokio::test]
async fn output_that_is_not_a_recipe_is_retried_once_then_502_invalid_output() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(sse_answer(&["抱歉，", "我不会做这道菜。"]));
    let response = app
        .post("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .await;
    assert_eq!(response.status(), 502);
    let body = json_of(response).await;
    assert_eq!(body["error"]["code"], "invalid_output");
    assert_eq!(body["error"]["retryable"], true);
    assert_eq!(app.upstream().requests().len(), 2);
}

#[tokio::test]
async fn busy_then_success_streams_attempt_retry_attempt_deltas_and_result() {
    let app = Gateway::start().await;
    app.upstream().push([status(503, "{}"), recipe_answer()]);
    let response = app
        .post_events("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .await;
    assert_eq!(response.status(), 200);
    let events = task_events(&response.text().await.expect("body"));
    assert_eq!(
        event_names(&events),
        ["attempt", "retry", "attempt", "delta", "result"]
    );
    assert_eq!(events[0].1, json!({"attempt": 1}));
    assert_eq!(
        events[1].1,
        json!({"attempt": 1, "reason": "busy", "wait_ms": 20, "upstream": "default"})
    );
    assert_eq!(events[2].1, json!({"attempt": 2}));
    let (_, result) = events.last().expect("a result");
    assert_eq!(result["meta"]["attempts"], 2);
    assert_eq!(result["output"]["nutrition"]["protein"], "48克");
}

#[tokio::test]
async fn a_retry_after_output_began_sends_reset_before_the_next_attempt() {
    let app = Gateway::start().await;
    app.upstream().push([
        sse(vec![data(&content("{\"title\"")), Step::Stall]),
        recipe_answer(),
    ]);
    let response = app
        .post_events("/v1/tasks/recipe?stream=true", &json!({"dish": "香酥鸭"}))
        .await;
    let events = task_events(&response.text().await.expect("body"));
    assert_eq!(
        event_names(&events),
        [
            "attempt", "delta", "retry", "reset", "attempt", "delta", "result"
        ]
    );
    let retry = events.iter().find(|(e, _)| e == "retry").expect("a retry");
    assert_eq!(
        retry.1,
        json!({"attempt": 1, "reason": "failed", "wait_ms": 0, "upstream": "default"})
    );
    let reset = events.iter().find(|(e, _)| e == "reset").expect("a reset");
    assert_eq!(reset.1, json!({"attempt": 2}));
}

#[tokio::test]
async fn a_failed_task_stream_ends_with_an_error_event_equal_to_the_error_body() {
    let app = Gateway::start().await;
    app.upstream().push([status(401, "{}")]);
    let response = app
        .post_events("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .await;
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .expect("id")
        .to_owned();
    let events = task_events(&response.text().await.expect("body"));
    let (name, error) = events.last().expect("an event");
    assert_eq!(name, "error");
    assert_eq!(error["error"]["code"], "upstream_rejected");
    assert_eq!(error["error"]["request_id"], request_id.as_str());
}

#[tokio::test]
async fn bad_variables_are_422_naming_the_variable_before_any_upstream_call() {
    let app = Gateway::start().await;
    let cases = [
        (json!({}), "dish"),
        (json!({"dish": "鸭".repeat(41)}), "dish"),
        (json!({"dish": "香酥鸭", "servings": "two"}), "servings"),
    ];
    for (variables, culprit) in cases {
        let response = app.post("/v1/tasks/recipe", &variables).await;
        assert_eq!(response.status(), 422, "{variables}");
        let body = json_of(response).await;
        assert_eq!(body["error"]["code"], "invalid_variables");
        assert!(
            body["error"]["message"]
                .as_str()
                .expect("message")
                .contains(culprit)
        );
    }
    // Forty characters, counted as characters rather than bytes, are fine.
    app.upstream().push([recipe_answer()]);
    let ok = app
        .post("/v1/tasks/recipe", &json!({"dish": "鸭".repeat(40)}))
        .await;
    assert_eq!(ok.status(), 200);
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn unknown_and_hostile_task_names_are_404_not_found() {
    let app = Gateway::start().await;
    for name in ["nope", "..%2F..%2Fetc%2Fpasswd", "RECIPE", "%2e%2e"] {
        let response = app.post(&format!("/v1/tasks/{name}"), &json!({})).await;
        assert_eq!(response.status(), 404, "{name}");
        assert_eq!(json_of(response).await["error"]["code"], "not_found");
    }
}

#[tokio::test]
async fn a_prompt_edited_on_disk_is_used_by_the_next_call() {
    // The admin API shows the live copy, so the test sees when the edit is loaded.
    let app = Gateway::options().admin().start().await;
    let path = app.prompts_dir.join("recipe.toml");
    let original = std::fs::read_to_string(&path).expect("recipe prompt");
    let edited = original.replacen("user = \"\"\"", "user = \"\"\"【新版提示词】", 1);
    assert_ne!(original, edited, "the edit must change the template");
    std::fs::write(&path, edited).expect("write edited prompt");
    // Reload runs every 50 ms in tests.
    eventually(
        Duration::from_secs(2),
        "the edited recipe prompt to be live",
        async || {
            let live = app.admin(Method::GET, "/admin/prompts/recipe").send().await;
            let live = live.expect("gateway answers").text().await.expect("text");
            live.contains("【新版提示词】")
        },
    )
    .await;
    app.upstream().push([recipe_answer()]);
    let response = app
        .post("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .await;
    assert_eq!(response.status(), 200);
    let sent = app.upstream().requests()[0].body["messages"].to_string();
    assert!(sent.contains("【新版提示词】"));
}

#[tokio::test]
async fn a_broken_prompt_on_disk_keeps_the_last_good_version_live() {
    let app = Gateway::start().await;
    std::fs::write(
        app.prompts_dir.join("recipe.toml"),
        "output = \"recipe\"\n[messages\n",
    )
    .expect("break prompt");
    let ready: Value = serde_json::from_str(&app.eventually_readyz(503).await).expect("JSON");
    assert!(ready.to_string().contains("recipe"));
    app.upstream().push([recipe_answer()]);
    let response = app
        .post("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn the_fridge_task_returns_the_extracted_json_value() {
    let app = Gateway::start().await;
    let answer = "```json\n{\"ideas\": [{\"dish\": \"番茄炒蛋\", \"minutes\": 15}]}\n```";
    app.upstream().push([sse_answer(
        &pieces(answer, 5)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )]);
    let response = app
        .post(
            "/v1/tasks/fridge",
            &json!({"ingredients": ["鸡蛋", "番茄"]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    assert_eq!(body["output"]["ideas"][0]["dish"], "番茄炒蛋");
    let user = app.upstream().requests()[0].body["messages"][1]["content"].to_string();
    assert!(user.contains("鸡蛋、番茄"));
}
