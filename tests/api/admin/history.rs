//! History, rollback and delete.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn history_lists_replaced_versions_newest_first() {
    let app = Gateway::options().admin().start().await;
    let v1 = etag_of(&app.put_prompt("soup", &small_prompt("一"), None).await);
    let v2 = etag_of(&app.put_prompt("soup", &small_prompt("二"), None).await);
    let v3 = etag_of(&app.put_prompt("soup", &small_prompt("三"), None).await);
    assert_eq!(app.history_etags("soup").await, [v2, v1]);
    assert!(
        !app.history_etags("soup").await.contains(&v3),
        "the current one is not history"
    );
    let unknown = app
        .admin_call(Method::GET, "/admin/prompts/never-saved/history")
        .await;
    assert_eq!(unknown.status(), 404);
}

#[tokio::test]
async fn rollback_restores_an_old_version_and_the_replaced_one_joins_history() {
    // Arrange
    let app = Gateway::options().admin().start().await;
    let old = small_prompt("旧版");
    let v1 = etag_of(&app.put_prompt("soup", &old, None).await);
    let v2 = etag_of(&app.put_prompt("soup", &small_prompt("新版"), None).await);
    let history = json_of(
        app.admin_call(Method::GET, "/admin/prompts/soup/history")
            .await,
    )
    .await;
    let version = history[0]["version"].as_str().expect("version").to_owned();
    // Act
    let response = app
        .admin_json(
            Method::POST,
            "/admin/prompts/soup/rollback",
            &json!({"version": version}),
        )
        .await;
    // Assert
    assert_eq!(response.status(), 200);
    assert_eq!(etag_of(&response), v1);
    let read = app.admin_call(Method::GET, "/admin/prompts/soup").await;
    assert_eq!(read.text().await.expect("text"), old);
    assert_eq!(
        std::fs::read_to_string(app.prompts_dir.join("soup.toml")).expect("file"),
        old
    );
    assert_eq!(app.history_etags("soup").await.first(), Some(&v2));
    for bad in ["0000000000000-0000000000000000", "../../../etc/passwd", ""] {
        let response = app
            .admin_json(
                Method::POST,
                "/admin/prompts/soup/rollback",
                &json!({"version": bad}),
            )
            .await;
        assert_error_code(response, 404, "not_found", &bad).await;
    }
}

#[tokio::test]
async fn deleting_a_prompt_answers_204_and_keeps_it_in_history() {
    let app = Gateway::options().admin().start().await;
    let text = small_prompt("要删的");
    let etag = etag_of(&app.put_prompt("soup", &text, None).await);
    let response = app.admin_call(Method::DELETE, "/admin/prompts/soup").await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert!(!app.prompts_dir.join("soup.toml").exists());
    let read = app.admin_call(Method::GET, "/admin/prompts/soup").await;
    assert_eq!(read.status(), 404);
    assert_eq!(
        app.post("/v1/tasks/soup", &json!({"dish": "汤"}))
            .await
            .status(),
        404
    );
    assert_eq!(app.history_etags("soup").await, [etag.as_str()]);
    let again = app.admin_call(Method::DELETE, "/admin/prompts/soup").await;
    assert_eq!(again.status(), 404);
    let history = json_of(
        app.admin_call(Method::GET, "/admin/prompts/soup/history")
            .await,
    )
    .await;
    let restored = app
        .admin_json(
            Method::POST,
            "/admin/prompts/soup/rollback",
            &json!({"version": history[0]["version"]}),
        )
        .await;
    assert_eq!(restored.status(), 200);
    assert_eq!(etag_of(&restored), etag);
    assert_eq!(
        std::fs::read_to_string(app.prompts_dir.join("soup.toml")).expect("file"),
        text
    );
}
