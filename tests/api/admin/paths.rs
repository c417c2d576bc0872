//! Names and symlinks that could make the admin API read or write outside
//! `LADLE_PROMPTS_DIR`.

use std::path::Path;

use reqwest::Method;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn names_that_could_escape_the_prompts_folder_are_refused_and_nothing_is_written_outside() {
    // Arrange: the prompts folder sits alone inside `root`, so anything written
    // next to it, or above it, shows.
    let root = temp_dir("escape");
    let dir = root.join("prompts");
    std::fs::rename(prompts_copy(), &dir).expect("move a prompts copy into place");
    let app = Gateway::options().admin().prompts_dir(&dir).start().await;
    let body = small_prompt("逃逸");
    let unique = format!("escape-{}", std::process::id());
    let long = "a".repeat(65);
    let refused = [
        "..".to_owned(),
        "..%2Fescape".to_owned(),
        "%2e%2e%2fescape".to_owned(),
        format!("%2e%2e%2f%2e%2e%2f{unique}"),
        format!("..%2F..%2F..%2Ftmp%2F{unique}"),
        format!("%2Ftmp%2F{unique}"),
        "..%5Cescape".to_owned(),
        long,
        "Recipe".to_owned(),
        "recipe.toml".to_owned(),
        ".history".to_owned(),
        "-recipe".to_owned(),
        "a%00b".to_owned(),
        "%ff".to_owned(),
    ];
    for name in &refused {
        // Act
        let (status, answer) = app
            .raw("PUT", &format!("/admin/prompts/{name}"), &body)
            .await;
        // Assert
        assert_eq!(status, 400, "PUT {name}: {answer}");
        assert!(
            answer.contains("\"invalid_request\""),
            "PUT {name}: {answer}"
        );
    }
    // A literal `..` that leaves the route's shape cannot even match a route.
    for path in [
        "/admin/prompts/../escape",
        "/admin/prompts/../../escape",
        "/admin/../escape",
    ] {
        let (status, answer) = app.raw("PUT", path, &body).await;
        assert_eq!(status, 404, "PUT {path}: {answer}");
    }
    let (status, _) = app
        .raw("POST", "/admin/prompts/../rollback", "{\"version\":\"x\"}")
        .await;
    assert_eq!(status, 400);
    // The longest valid name works, so the limit is exactly 64.
    let (status, _) = app
        .raw("PUT", &format!("/admin/prompts/{}", "a".repeat(64)), &body)
        .await;
    assert_eq!(status, 201);
    assert_eq!(names_in(&root), ["prompts"]);
    assert!(!std::env::temp_dir().join(format!("{unique}.toml")).exists());
    assert!(!Path::new("/tmp").join(format!("{unique}.toml")).exists());
    let expected = [
        format!("{}.toml", "a".repeat(64)),
        "fridge.toml".into(),
        "recipe.toml".into(),
    ];
    assert_eq!(names_in(&dir), expected);
}

#[tokio::test]
async fn reading_through_an_escaping_name_is_refused_and_serves_nothing_outside() {
    let app = Gateway::options().admin().start().await;
    let attempts = [
        ("GET", "/admin/prompts/%2Fetc%2Fpasswd"),
        ("GET", "/admin/prompts/..%2F..%2F..%2Fetc%2Fpasswd"),
        ("GET", "/admin/prompts/../history"),
        ("GET", "/admin/prompts/%2e%2e/history"),
        ("DELETE", "/admin/prompts/..%2Frecipe"),
        ("POST", "/admin/prompts/..%2Frecipe/render"),
    ];
    for (method, path) in attempts {
        let (status, answer) = app.raw(method, path, "{}").await;
        assert_eq!(status, 400, "{method} {path}: {answer}");
        assert!(
            !answer.contains("root:"),
            "{method} {path} leaked a file: {answer}"
        );
    }
    assert!(
        app.prompts_dir.join("recipe.toml").exists(),
        "nothing was deleted"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_planted_in_the_folder_is_not_listed_served_or_written_through() {
    // Arrange: `evil.toml` links to a valid prompt outside the folder and
    // `passwd.toml` to /etc/passwd.
    let dir = prompts_copy();
    let outside = temp_dir("outside");
    let target = outside.join("target.toml");
    let secret = small_prompt("外面的秘密");
    std::fs::write(&target, &secret).expect("write the outside file");
    std::os::unix::fs::symlink(&target, dir.join("evil.toml")).expect("plant evil.toml");
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd.toml")).expect("plant passwd.toml");
    let app = Gateway::options().admin().prompts_dir(&dir).start().await;
    // Act and assert: not listed, not served, not rendered, not run, not deleted.
    let list = json_of(app.admin_call(Method::GET, "/admin/prompts").await).await;
    assert!(
        !list.to_string().contains("evil") && !list.to_string().contains("passwd"),
        "{list}"
    );
    for name in ["evil", "passwd"] {
        let read = app
            .admin_call(Method::GET, &format!("/admin/prompts/{name}"))
            .await;
        assert_eq!(read.status(), 404, "GET {name}");
        let render = app
            .admin_json(
                Method::POST,
                &format!("/admin/prompts/{name}/render"),
                &json!({"variables": {"dish": "鸭"}}),
            )
            .await;
        assert_eq!(render.status(), 404, "render {name}");
        assert_eq!(
            app.post(&format!("/v1/tasks/{name}"), &json!({"dish": "鸭"}))
                .await
                .status(),
            404
        );
    }
    let delete = app
        .admin_call(Method::DELETE, "/admin/prompts/passwd")
        .await;
    assert_eq!(delete.status(), 404);
    assert!(
        std::fs::symlink_metadata(dir.join("passwd.toml"))
            .expect("link")
            .file_type()
            .is_symlink()
    );
    // A save over the link replaces the link, not its target.
    let text = small_prompt("里面的新版");
    let saved = app.put_prompt("evil", &text, None).await;
    assert_eq!(saved.status(), 201);
    assert_eq!(std::fs::read_to_string(&target).expect("target"), secret);
    let meta = std::fs::symlink_metadata(dir.join("evil.toml")).expect("evil.toml");
    assert!(
        meta.file_type().is_file(),
        "evil.toml is now a regular file"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("evil.toml")).expect("evil.toml"),
        text
    );
    // The outside text was not copied into history either.
    let history = json_of(
        app.admin_call(Method::GET, "/admin/prompts/evil/history")
            .await,
    )
    .await;
    assert_eq!(history, json!([]));
}

#[cfg(unix)]
#[tokio::test]
async fn a_history_folder_planted_as_a_symlink_is_never_written_through() {
    let dir = prompts_copy();
    let outside = temp_dir("history-outside");
    std::os::unix::fs::symlink(&outside, dir.join(".history")).expect("plant .history");
    let app = Gateway::options().admin().prompts_dir(&dir).start().await;
    let response = app.put_prompt("recipe", &small_prompt("替换"), None).await;
    assert_error_code(response, 500, "storage_failed", "").await;
    assert!(
        names_in(&outside).is_empty(),
        "nothing was written outside: {:?}",
        names_in(&outside)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("recipe.toml")).expect("recipe"),
        shipped_recipe()
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_planted_at_the_temporary_file_name_is_not_written_through() {
    // Arrange: the store writes `.recipe.toml.{pid}.tmp` then renames it; the
    // gateway runs in this process, so the pid is ours.
    let dir = prompts_copy();
    let outside = temp_dir("temp-outside");
    let target = outside.join("victim.txt");
    std::fs::write(&target, "原来的内容").expect("write the outside file");
    let temp_name = format!(".recipe.toml.{}.tmp", std::process::id());
    std::os::unix::fs::symlink(&target, dir.join(&temp_name)).expect("plant the link");
    let app = Gateway::options().admin().prompts_dir(&dir).start().await;
    let text = small_prompt("换了");
    // Act
    let response = app.put_prompt("recipe", &text, None).await;
    // Assert
    assert_eq!(response.status(), 200);
    assert_eq!(
        std::fs::read_to_string(&target).expect("victim"),
        "原来的内容"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("recipe.toml")).expect("recipe"),
        text
    );
}
