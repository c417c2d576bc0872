//! The prompt editor end to end, in Debian's headless Chromium driven through
//! chromedriver's W3C WebDriver HTTP API (plain reqwest, no WebDriver crate).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`). Without them it fails, saying what to install: a test that
//! passed without running would hide a broken editor. To leave it out on purpose,
//! name it: `cargo test -- --skip browser::`. A screenshot of the editor is left at
//! `target/admin-editor.png`.

use std::path::PathBuf;

use serde_json::json;

use crate::support::browser::{Browser, CHROMEDRIVER, CHROMIUM};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_edits_validates_saves_and_previews_the_recipe_prompt_in_a_browser() {
    for binary in [CHROMEDRIVER, CHROMIUM] {
        assert!(
            std::path::Path::new(binary).exists(),
            "{binary} is missing: install Debian's `chromium` and `chromium-driver` \
             (apt-get install -y chromium chromium-driver), or leave this test out with \
             `cargo test -- --skip browser::`"
        );
    }
    // Arrange: one recipe answer kept.
    let app = Gateway::options().admin().start().await;
    app.upstream()
        .push([crate::support::scripts::recipe_answer()]);
    let kept = app.task("recipe", &json!({"dish": "香酥鸭"})).await;
    assert_eq!(json_of(kept).await["meta"]["cache"], "miss");
    let recipe = std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("recipe");
    let broken = recipe.replace("max_tokens = 2400", "max_tokens = \"二千四百\" 多");
    let broken_line = broken
        .lines()
        .position(|l| l.contains('多'))
        .expect("the broken line")
        + 1;
    let fixed = recipe.replace(
        "请为「{{ dish }}」写一份",
        "浏览器里改的：请为「{{ dish }}」写一份",
    );
    assert_ne!(fixed, recipe);
    let mut browser = Browser::start().await;

    // Act and assert: the page asks for the token, then lists the prompts.
    browser.go(&format!("{}/admin", app.base)).await;
    let token = browser.find("#token").await;
    browser.type_into(&token, ADMIN_TOKEN).await;
    let save_token = browser.find("#token-save").await;
    browser.click(&save_token).await;
    browser
        .wait_for(
            "the recipe prompt in the list",
            "return !!document.querySelector('#prompt-list button[data-name=recipe]');",
        )
        .await;
    let stored = browser
        .run(
            "return [sessionStorage.getItem('ladle_admin_token'), localStorage.length];",
            json!([]),
        )
        .await;
    assert_eq!(
        stored,
        json!([ADMIN_TOKEN, 0]),
        "the token is in session storage only"
    );
    let item = browser.find("#prompt-list button[data-name=recipe]").await;
    browser.click(&item).await;
    browser
        .wait_for(
            "the recipe text in the editor",
            "return document.getElementById('editor').value.includes('[variables.dish]');",
        )
        .await;
    assert_eq!(browser.value_of("#editor").await, recipe);

    // The kept answers panel counts the recipe's one answer and clears it.
    browser
        .wait_for(
            "the kept answers counted",
            "return document.getElementById('cache-count').textContent.includes('1 answer kept');",
        )
        .await;
    let clear = browser.find("#clear-cache").await;
    browser.click(&clear).await;
    browser
        .wait_for(
            "the answers forgotten",
            "return document.getElementById('status').textContent.includes('Forgot 1 kept answer') \
             && document.getElementById('cache-count').textContent.includes('0 answers kept');",
        )
        .await;
    let count = app
        .admin(reqwest::Method::GET, "/admin/cache/recipe")
        .send()
        .await
        .expect("answers");
    assert_eq!(json_of(count).await["entries"], 0, "forgotten in the store");

    // Broken TOML is refused and the banner names the line.
    browser.set_value("#editor", &broken).await;
    let save = browser.find("#save").await;
    browser.click(&save).await;
    let banner = browser
        .wait_for(
            "a validation error",
            "const b = document.getElementById('validation-error'); \
             return !b.hidden && b.textContent.trim() ? b.textContent : null;",
        )
        .await;
    let banner = banner.as_str().expect("banner text");
    assert!(banner.contains("invalid_prompt"), "{banner}");
    assert!(banner.contains(&format!("line {broken_line}")), "{banner}");
    let marked = browser
        .run(
            "const m = document.querySelector('#gutter .error-line'); return m && m.textContent;",
            json!([]),
        )
        .await;
    assert_eq!(
        marked,
        json!(broken_line.to_string()),
        "the gutter marks the line"
    );
    assert_eq!(
        std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("recipe"),
        recipe,
        "nothing was saved"
    );

    // The fixed text saves.
    browser.set_value("#editor", &fixed).await;
    browser.click(&save).await;
    browser
        .wait_for(
            "the Saved status",
            "return document.getElementById('status').textContent.includes('Saved');",
        )
        .await;
    let banner_hidden = browser
        .run(
            "return document.getElementById('validation-error').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(banner_hidden, json!(true));
    assert_eq!(
        std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("saved recipe"),
        fixed,
        "the file on disk is what was typed"
    );

    // The preview renders the Chinese text with the variables filled in.
    browser
        .set_value("#variables", r#"{"dish": "香酥鸭", "servings": 3}"#)
        .await;
    let preview = browser.find("#preview").await;
    browser.click(&preview).await;
    let shown = browser
        .wait_for(
            "the rendered preview",
            "const t = document.getElementById('preview-output').textContent; \
             return t.includes('浏览器里改的') ? t : null;",
        )
        .await;
    let shown = shown.as_str().expect("preview text");
    assert!(
        shown.contains("浏览器里改的：请为「香酥鸭」写一份 3 人份"),
        "{shown}"
    );
    assert_eq!(
        app.upstream().requests().len(),
        1,
        "only the kept answer's request: a preview calls no model"
    );

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG screenshot");
    let shot = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/admin-editor.png");
    std::fs::write(&shot, &png).expect("write the screenshot");
    browser.quit().await;
}
