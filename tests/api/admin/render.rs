//! Rendering saved and unsaved prompts, with no upstream call.

use reqwest::Method;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn rendering_a_saved_prompt_fills_in_variables_and_defaults_without_calling_upstream() {
    let app = Gateway::options().admin().start().await;
    let response = app
        .admin_json(
            Method::POST,
            "/admin/prompts/recipe/render",
            &json!({"variables": {"dish": "香酥鸭"}}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body = json_of(response).await;
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    let user = messages[1]["content"].as_str().expect("user text");
    assert!(user.starts_with("请为「香酥鸭」写一份 2 人份"), "{user}");
    assert_eq!(
        body["params"],
        json!({"temperature": 0.7, "max_tokens": 2400})
    );
    let missing = app
        .admin_json(
            Method::POST,
            "/admin/prompts/recipe/render",
            &json!({"variables": {}}),
        )
        .await;
    assert_error_code(missing, 422, "invalid_variables", "").await;
    assert!(app.upstream().requests().is_empty(), "no upstream call");
}

#[tokio::test]
async fn rendering_unsaved_text_previews_it_and_reports_broken_text_as_invalid_prompt() {
    let app = Gateway::options().admin().start().await;
    let text = small_prompt("预览");
    let ok = app
        .admin_json(
            Method::POST,
            "/admin/render",
            &json!({"template": text, "variables": {"dish": "麻婆豆腐"}}),
        )
        .await;
    assert_eq!(ok.status(), 200);
    let body = json_of(ok).await;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "预览：麻婆豆腐"}])
    );
    assert_eq!(body["params"], json!({}));
    let broken = app
        .admin_json(
            Method::POST,
            "/admin/render",
            &json!({"template": "output = \"text\"\n[messages\nuser = \"x\"", "variables": {}}),
        )
        .await;
    let error = assert_error_code(broken, 422, "invalid_prompt", "").await;
    assert_eq!(error["line"].as_u64(), Some(2));
    let no_dish = app
        .admin_json(
            Method::POST,
            "/admin/render",
            &json!({"template": text, "variables": {}}),
        )
        .await;
    assert_error_code(no_dish, 422, "invalid_variables", "").await;
    assert_eq!(
        names_in(&app.prompts_dir),
        ["fridge.toml", "recipe.toml"],
        "nothing was saved"
    );
    assert!(app.upstream().requests().is_empty(), "no upstream call");
}
