//! Reading and saving prompts: list, get, create, replace, `If-Match`, validation
//! positions, and that a save is what the next task call sends upstream.

use reqwest::Method;
use serde_json::json;

use crate::support::mock_upstream::*;
use crate::support::*;

#[tokio::test]
async fn the_prompt_list_has_name_description_output_etag_and_updated_at() {
    let app = Gateway::options().admin().start().await;
    let list = json_of(app.admin_call(Method::GET, "/admin/prompts").await).await;
    let recipe = list
        .as_array()
        .expect("a list")
        .iter()
        .find(|p| p["name"] == "recipe")
        .expect("recipe is listed")
        .clone();
    let read = app.admin_call(Method::GET, "/admin/prompts/recipe").await;
    assert_eq!(recipe["etag"], etag_of(&read));
    assert_eq!(recipe["output"], "recipe");
    assert!(
        recipe["description"]
            .as_str()
            .expect("description")
            .contains("菜谱")
    );
    assert!(
        recipe["updated_at"]
            .as_str()
            .expect("updated_at")
            .ends_with('Z')
    );
    let mut keys: Vec<&String> = recipe.as_object().expect("object").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["description", "etag", "name", "output", "updated_at"]
    );
}

#[tokio::test]
async fn getting_a_prompt_returns_its_file_text_as_toml_with_its_etag() {
    let app = Gateway::options().admin().start().await;
    let response = app.admin_call(Method::GET, "/admin/prompts/recipe").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/toml");
    let etag = etag_of(&response);
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "a quoted entity tag: {etag}"
    );
    assert_eq!(response.text().await.expect("text"), shipped_recipe());
    let missing = app
        .admin_call(Method::GET, "/admin/prompts/nothing-here")
        .await;
    assert_error_code(missing, 404, "not_found", "").await;
}

#[tokio::test]
async fn putting_a_new_prompt_creates_it_with_201_and_an_etag_and_it_is_live() {
    // Arrange
    let app = Gateway::options().admin().start().await;
    let text = small_prompt("新提示");
    // Act
    let response = app.put_prompt("dumplings", &text, None).await;
    // Assert
    assert_eq!(response.status(), 201);
    let etag = etag_of(&response);
    let on_disk =
        std::fs::read_to_string(app.prompts_dir.join("dumplings.toml")).expect("saved file");
    assert_eq!(on_disk, text);
    let read = app
        .admin_call(Method::GET, "/admin/prompts/dumplings")
        .await;
    assert_eq!(etag_of(&read), etag);
    assert_eq!(read.text().await.expect("text"), text);
    let temp_files: Vec<String> = names_in(&app.prompts_dir)
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(
        temp_files.is_empty(),
        "no temporary file is left behind: {temp_files:?}"
    );
}

#[tokio::test]
async fn replacing_with_a_matching_if_match_answers_200_with_a_new_etag() {
    let app = Gateway::options().admin().start().await;
    let first = etag_of(&app.put_prompt("soup", &small_prompt("第一版"), None).await);
    let response = app
        .put_prompt("soup", &small_prompt("第二版"), Some(&first))
        .await;
    assert_eq!(response.status(), 200);
    let second = etag_of(&response);
    assert_ne!(second, first);
    let read = app.admin_call(Method::GET, "/admin/prompts/soup").await;
    assert_eq!(etag_of(&read), second);
    assert!(read.text().await.expect("text").contains("第二版"));
}

#[tokio::test]
async fn a_stale_if_match_is_refused_with_412_and_the_prompt_is_unchanged() {
    // Arrange: two editors read version 1; the first saves version 2.
    let app = Gateway::options().admin().start().await;
    let first = etag_of(&app.put_prompt("soup", &small_prompt("第一版"), None).await);
    let second = etag_of(
        &app.put_prompt("soup", &small_prompt("第二版"), Some(&first))
            .await,
    );
    // Act: the second editor saves, then deletes, against version 1.
    let stale_put = app
        .put_prompt("soup", &small_prompt("过期"), Some(&first))
        .await;
    let stale_delete = app
        .admin(Method::DELETE, "/admin/prompts/soup")
        .header("if-match", &first)
        .send()
        .await
        .expect("answer");
    // Assert
    for response in [stale_put, stale_delete] {
        assert_error_code(response, 412, "etag_mismatch", "").await;
    }
    let read = app.admin_call(Method::GET, "/admin/prompts/soup").await;
    assert_eq!(etag_of(&read), second);
    let on_disk = std::fs::read_to_string(app.prompts_dir.join("soup.toml")).expect("file");
    assert!(on_disk.contains("第二版"));
}

#[tokio::test]
async fn invalid_toml_is_refused_with_422_at_the_real_line_and_column() {
    // Arrange: garbage after a value, behind Chinese text on the same line, so a
    // byte count would give a different column than a character count.
    let app = Gateway::options().admin().start().await;
    let text = shipped_recipe().replace("max_tokens = 2400", "max_tokens = \"二千四百\" 多");
    let (line, column) = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find('多').map(|at| (i + 1, l[..at].chars().count() + 1)))
        .expect("the broken line");
    // Act
    let response = app.put_prompt("recipe", &text, None).await;
    // Assert
    let error = assert_error_code(response, 422, "invalid_prompt", "").await;
    assert_eq!(
        (error["line"].as_u64(), error["column"].as_u64()),
        (Some(line as u64), Some(column as u64))
    );
    let on_disk = std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("file");
    assert_eq!(on_disk, shipped_recipe());
}

#[tokio::test]
async fn an_undefined_template_variable_is_refused_with_422_invalid_prompt_on_its_line() {
    let app = Gateway::options().admin().start().await;
    let text = shipped_recipe().replace("{{ servings }}", "{{ serves }}");
    let line = text
        .lines()
        .position(|l| l.contains("{{ serves }}"))
        .expect("the line")
        + 1;
    let response = app.put_prompt("recipe", &text, None).await;
    let error = assert_error_code(response, 422, "invalid_prompt", "").await;
    assert!(
        error["message"]
            .as_str()
            .expect("message")
            .contains("messages.user"),
        "{error}"
    );
    assert_eq!(error["line"].as_u64(), Some(line as u64));
    let on_disk = std::fs::read_to_string(app.prompts_dir.join("recipe.toml")).expect("file");
    assert_eq!(on_disk, shipped_recipe());
}

#[tokio::test]
async fn a_saved_prompt_is_what_the_next_task_call_sends_upstream() {
    // Arrange: change the recipe prompt's user message.
    let app = Gateway::options().admin().start().await;
    let text = shipped_recipe().replace(
        "请为「{{ dish }}」写一份",
        "【管理员改过】请为「{{ dish }}」认真写一份",
    );
    assert_ne!(text, shipped_recipe());
    let saved = app.put_prompt("recipe", &text, None).await;
    assert_eq!(saved.status(), 200);
    let recipe =
        json!({"title": "香酥鸭", "ingredients": ["鸭子 1只"], "steps": ["腌制", "炸至金黄"]})
            .to_string();
    app.upstream().push([sse_answer(&[&recipe])]);
    // Act
    let response = app
        .post("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .await;
    // Assert
    assert_eq!(response.status(), 200);
    assert_eq!(json_of(response).await["output"]["title"], "香酥鸭");
    let sent = &app.upstream().requests()[0].body;
    let user = sent["messages"][1]["content"]
        .as_str()
        .expect("user message");
    assert!(
        user.starts_with("【管理员改过】请为「香酥鸭」认真写一份"),
        "{user}"
    );
}
