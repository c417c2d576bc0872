//! The prompt editor end to end, in Debian's headless Chromium driven through
//! chromedriver's W3C WebDriver HTTP API (plain reqwest, no WebDriver crate).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`). Without them it fails, saying what to install: a test that
//! passed without running would hide a broken editor. To leave it out on purpose,
//! name it: `cargo test -- --skip browser::`. Screenshots of the editor and of the
//! status tab are left at `target/admin-editor.png` and `target/admin-status.png`.

use std::path::PathBuf;

use serde_json::json;

use crate::support::browser::{Browser, CHROMEDRIVER, CHROMIUM};
use crate::support::mock_upstream::*;
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
    browser.sign_in(&format!("{}/admin", app.base)).await;
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
    browser
        .click_on("#prompt-list button[data-name=recipe]")
        .await;
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
    browser.click_on("#clear-cache").await;
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
    browser.click_on("#save").await;
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
    browser.click_on("#save").await;
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
    browser.click_on("#preview").await;
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

    // Try runs the saved prompt on the admin token, and keeps nothing.
    app.upstream()
        .push([crate::support::scripts::recipe_answer()]);
    browser.click_on("#try").await;
    let tried = browser
        .wait_for(
            "the try's result",
            "const t = document.getElementById('try-output').textContent; \
             return t.includes('done in') ? t : null;",
        )
        .await;
    let tried = tried.as_str().expect("the try's text");
    assert!(tried.contains("香酥鸭"), "{tried}");
    assert_eq!(
        app.upstream().requests().len(),
        2,
        "the try asked the model"
    );
    let count = app
        .admin(reqwest::Method::GET, "/admin/cache/recipe")
        .send()
        .await
        .expect("answers");
    assert_eq!(json_of(count).await["entries"], 0, "a try keeps no answer");

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG screenshot");
    let shot = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/admin-editor.png");
    if let Some(folder) = shot.parent() {
        let _ = std::fs::create_dir_all(folder);
    }
    std::fs::write(&shot, &png).expect("write the screenshot");
    browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_an_open_breaker_and_the_last_attempts_on_the_status_tab() {
    for binary in [CHROMEDRIVER, CHROMIUM] {
        assert!(
            std::path::Path::new(binary).exists(),
            "{binary} is missing: install Debian's `chromium` and `chromium-driver`"
        );
    }
    // Arrange: upstream a answers busy twice and its breaker opens; b answers.
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.fallback(status(
        503,
        r#"{"error": {"message": "当前模型访问量较大，请稍后重试"}}"#,
    ));
    b.push([
        sse_answer(&["好"]),
        crate::support::scripts::recipe_answer(),
    ]);
    b.fallback(sse_answer(&["又好"]));
    let app = Gateway::options()
        .admin()
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(|c| c.breaker_settings = breaker(2, 60_000))
        .start()
        .await;
    assert_eq!(app.chat(false).await.status(), 200);
    let kept = app.task("recipe", &json!({"dish": "香酥鸭"})).await;
    assert_eq!(kept.status(), 200);
    let mut browser = Browser::start().await;

    // Act: the status tab, straight from its link, after the token.
    browser.sign_in(&format!("{}/admin#status", app.base)).await;

    // Assert: a's breaker open with two busy attempts, b's two answers.
    let row_a = browser
        .wait_for(
            "upstream a's row, its breaker open",
            "const r = document.querySelector('#status-upstreams tr[data-upstream=a]'); \
             return r && r.querySelector('.state.open') ? r.textContent : null;",
        )
        .await;
    let row_a = row_a.as_str().expect("row text");
    assert!(row_a.contains("busy 2"), "{row_a}");
    let row_b = browser
        .run(
            "return document.querySelector('#status-upstreams tr[data-upstream=b]').textContent;",
            json!([]),
        )
        .await;
    let row_b = row_b.as_str().expect("row text");
    assert!(
        row_b.contains("closed") && row_b.contains("ok 2"),
        "{row_b}"
    );
    let jobs = browser.value_of_text("#status-jobs").await;
    assert!(jobs.contains("queued 0 · running 0"), "{jobs}");
    let cache = browser
        .value_of_text("#status-cache li[data-task=recipe]")
        .await;
    assert!(cache.contains("1 kept"), "{cache}");
    let hidden = browser
        .run("return document.getElementById('app').hidden;", json!([]))
        .await;
    assert_eq!(hidden, json!(true), "the editor is behind its tab");

    // The prompts tab brings the editor back; the status tab refreshes.
    browser.click_on("#tab-prompts").await;
    browser
        .wait_for(
            "the editor shown",
            "return !document.getElementById('app').hidden \
             && document.getElementById('status-view').hidden;",
        )
        .await;
    let third = app.chat(false).await;
    let status_code = third.status();
    let said = third.text().await.expect("body");
    assert_eq!(status_code, 200, "b answers a third time: {said}");
    browser.click_on("#tab-status").await;
    browser
        .wait_for(
            "b's third answer on the panel",
            "const r = document.querySelector('#status-upstreams tr[data-upstream=b]'); \
             return r && r.textContent.includes('ok 3');",
        )
        .await;

    let png = browser.screenshot().await;
    let shot = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/admin-status.png");
    if let Some(folder) = shot.parent() {
        let _ = std::fs::create_dir_all(folder);
    }
    std::fs::write(&shot, &png).expect("write the screenshot");
    browser.quit().await;
}
