//! Who may use the admin API: no token, a wrong one, the right one, none configured.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn admin_routes_without_a_token_answer_401_unauthorized() {
    // Arrange
    let app = Gateway::options().admin().start().await;
    // Act
    let list = app.get("/admin/prompts").await;
    let bad_name = app.get("/admin/prompts/..%2Fx").await;
    let put = app
        .client
        .put(format!("{}/admin/prompts/recipe", app.base))
        .body(small_prompt("无令牌"))
        .send()
        .await
        .expect("gateway answers");
    // Assert: the token is checked before the name, and nothing was written.
    for response in [list, bad_name, put] {
        assert_error_code(response, 401, "unauthorized", "").await;
    }
    let recipe = std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("recipe");
    assert_eq!(recipe, shipped_recipe());
}

#[tokio::test]
async fn a_wrong_admin_token_answers_401_and_the_right_one_is_let_in() {
    let app = Gateway::options().admin().start().await;
    let wrong = [
        format!("Bearer {}", &ADMIN_TOKEN[..ADMIN_TOKEN.len() - 1]),
        format!("Bearer {ADMIN_TOKEN}x"),
        format!("Bearer {}3", &ADMIN_TOKEN[..ADMIN_TOKEN.len() - 1]),
        format!("Basic {ADMIN_TOKEN}"),
        ADMIN_TOKEN.to_owned(),
    ];
    for header in wrong {
        let response = app
            .client
            .get(format!("{}/admin/prompts", app.base))
            .header("authorization", &header)
            .send()
            .await
            .expect("gateway answers");
        let error = assert_error_code(response, 401, "unauthorized", &header).await;
        assert!(
            !error.to_string().contains(ADMIN_TOKEN),
            "the token is never echoed"
        );
    }
    let right = app
        .client
        .get(format!("{}/admin/prompts", app.base))
        .header("authorization", format!("bearer {ADMIN_TOKEN}"))
        .send()
        .await
        .expect("gateway answers");
    assert_eq!(right.status(), 200);
    let names: Vec<Value> = json_of(right)
        .await
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| p["name"].clone())
        .collect();
    assert_eq!(names, [json!("fridge"), json!("recipe")]);
}

#[tokio::test]
async fn with_no_admin_token_configured_the_admin_api_answers_404_but_the_page_is_served() {
    // Arrange: the fast config leaves LADLE_ADMIN_TOKEN unset.
    let app = Gateway::start().await;
    let routes = [
        (Method::GET, "/admin/prompts"),
        (Method::GET, "/admin/prompts/recipe"),
        (Method::PUT, "/admin/prompts/recipe"),
        (Method::DELETE, "/admin/prompts/recipe"),
        (Method::POST, "/admin/prompts/recipe/render"),
        (Method::POST, "/admin/render"),
        (Method::GET, "/admin/prompts/recipe/history"),
        (Method::POST, "/admin/prompts/recipe/rollback"),
    ];
    for (method, path) in routes {
        // Act
        let response = app
            .admin(method.clone(), path)
            .body(small_prompt("禁用"))
            .send()
            .await
            .expect("gateway answers");
        // Assert
        assert_error_code(response, 404, "not_found", format!("{method} {path}")).await;
    }
    assert_eq!(
        std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("recipe"),
        shipped_recipe()
    );
    assert!(app.prompts_dir.join("recipe.toml").exists());
    let page = app.get("/admin").await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.expect("page").contains("id=\"editor\""));
}

#[tokio::test]
async fn the_admin_page_runs_only_its_own_script_and_is_never_framed() {
    let app = Gateway::start().await;
    let response = app.get("/admin").await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    let page = response.text().await.expect("the page");
    let policy = headers["content-security-policy"].to_str().expect("text");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    // The hash is the page's one inline script's, computed here independently.
    use base64::Engine as _;
    use sha2::Digest as _;
    let script = page
        .split_once("<script>")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .expect("one inline script")
        .0;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script));
    assert!(
        policy.contains(&format!("script-src 'sha256-{hash}'")),
        "{policy}"
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["x-content-type-options"], "nosniff");
}
