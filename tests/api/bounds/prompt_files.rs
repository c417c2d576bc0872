//! Prompt files: over 1 MiB they are refused, through the admin API and on disk;
//! an admin write is never undone by the folder reload, however they interleave;
//! and a store failure's error body shows no filesystem path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::Method;
use serde_json::json;

use crate::support::mock_upstream::*;
use crate::support::*;

/// 1 MiB, the largest prompt file.
const MIB: usize = 1 << 20;

/// A valid prompt file (`small_prompt(marker)`) padded with a comment to `size`
/// bytes.
fn padded_prompt(marker: &str, size: usize) -> String {
    let mut text = small_prompt(marker);
    text.push_str("# ");
    text.push_str(&"x".repeat(size - text.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), size);
    text
}

#[tokio::test]
async fn a_prompt_put_over_1_mib_is_413_body_too_large_whatever_max_body_bytes_allows() {
    let app = Gateway::options()
        .admin()
        .adjust(|config| config.max_body_bytes = 4 * MIB)
        .start()
        .await;
    let response = app
        .put_prompt("big", &padded_prompt("大", MIB + 1), None)
        .await;
    assert_error_code(response, 413, "body_too_large", "").await;
    assert_eq!(app.prompt_etag("big").await, None, "not saved");
    // One byte less is a prompt file like any other.
    let response = app.put_prompt("big", &padded_prompt("大", MIB), None).await;
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn a_prompt_file_over_1_mib_on_disk_is_broken_and_a_good_earlier_version_keeps_serving() {
    // Arrange
    let app = Gateway::options()
        .admin()
        .prompt("kept", &small_prompt("旧版"))
        .start()
        .await;
    let good = app.prompt_etag("kept").await.expect("kept is live");
    app.upstream().fallback(sse_answer(&["好"]));
    // Act: both files grow past 1 MiB, one with a good version before.
    let dir = &app.prompts_dir;
    // Each in one step (a rename): the padding is a trailing comment, so a reload
    // that read a half-written file would find a good small prompt in it.
    for (name, marker) in [("kept", "新版"), ("fresh", "新")] {
        let next = dir.join(format!("{name}.next"));
        std::fs::write(&next, padded_prompt(marker, MIB + 1)).expect("write");
        std::fs::rename(&next, dir.join(format!("{name}.toml"))).expect("rename");
    }
    // Assert
    let what = "/readyz to report both files broken";
    let ready = eventually(millis(2000), what, async || {
        let response = app.get("/readyz").await;
        let failing = response.status() == 503;
        let ready = json_of(response).await;
        let both = ready["broken"].as_object().is_some_and(|b| b.len() == 2);
        (failing && both).then_some(ready)
    })
    .await;
    let broken = ready["broken"].as_object().expect("the broken prompts");
    let names: Vec<&String> = broken.keys().collect();
    assert_eq!(names, ["fresh", "kept"], "{ready}");
    for why in broken.values() {
        assert!(
            why.as_str()
                .is_some_and(|w| w.contains("over 1048576 bytes")),
            "{why}"
        );
    }
    assert_eq!(
        app.prompt_etag("kept").await.as_deref(),
        Some(good.as_str())
    );
    let answer = app.task("kept", &json!({"dish": "鱼"})).await;
    assert_eq!(answer.status(), 200);
    assert!(user_message_sent(app.upstream(), 0).starts_with("旧版"));
    let (status, error) = error_of(app.task("fresh", &json!({"dish": "鱼"})).await).await;
    assert_eq!((status, error["code"].as_str()), (404, Some("not_found")));
}

/// A thread rewriting `{name}.toml` in `dir` (two versions in turn) until dropped.
struct Churn {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Churn {
    fn start(dir: &std::path::Path, name: &str) -> Churn {
        let path = dir.join(format!("{name}.toml"));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let versions = [small_prompt("甲"), small_prompt("乙乙")];
        let thread = std::thread::spawn(move || {
            let mut writes = 0;
            while !flag.load(Ordering::Relaxed) {
                std::fs::write(&path, &versions[writes % 2]).expect("rewrite");
                writes += 1;
                // Paced, so the churn shares the two cores.
                std::thread::sleep(millis(1));
            }
            writes
        });
        Churn {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the churn; how many times it rewrote the file.
    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("running");
        thread.join().expect("the churn ends")
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The prompts besides the churned one in the race tests' folder.
const PADS: usize = 200;

/// A gateway reloading its folder every 5 ms while another prompt is rewritten
/// underfoot. The folder holds `PADS` more prompts of 32 KiB: a reload that read
/// every file before looking at what it had would take a while doing it,
/// which is when a write could come in between.
async fn reloading_under_churn() -> (Gateway, Churn) {
    let mut options = Gateway::options()
        .admin()
        .adjust(|config| config.prompt_reload = millis(5))
        .prompt("churn", &small_prompt("甲"));
    for n in 0..PADS {
        options = options.prompt(&format!("pad-{n:03}"), &padded_prompt("垫", 32 << 10));
    }
    let app = options.start().await;
    let churn = Churn::start(&app.prompts_dir, "churn");
    (app, churn)
}

#[tokio::test]
async fn a_put_under_if_match_with_the_current_etag_is_never_undone_by_the_folder_reload() {
    let (app, churn) = reloading_under_churn().await;
    app.upstream().fallback(sse_answer(&["好"]));
    for round in 1..=100 {
        // A prompt of its own each round, wherever the folder lists it.
        let name = format!("pad-{:03}", (round * 7) % PADS);
        let mut etag = app.prompt_etag(&name).await.expect("the pad is live");
        for version in 1..=2 {
            let marker = format!("第{round}轮第{version}版");
            let response = app
                .put_prompt(&name, &small_prompt(&marker), Some(&etag))
                .await;
            assert_eq!(
                response.status(),
                200,
                "round {round}.{version}: If-Match {etag}"
            );
            etag = etag_of(&response);
            let seen = app.prompt_etag(&name).await;
            assert_eq!(
                seen.as_deref(),
                Some(etag.as_str()),
                "round {round}.{version}"
            );
        }
        if round % 10 == 0 {
            let answer = app.task(&name, &json!({"dish": "鱼"})).await;
            assert_eq!(answer.status(), 200, "round {round}");
            let sent = user_message_sent(app.upstream(), round / 10 - 1);
            let marker = format!("第{round}轮第2版");
            assert!(sent.starts_with(&marker), "round {round}: sent {sent}");
        }
    }
    let writes = churn.stop();
    eprintln!("reload race: 100 rounds while another file was rewritten {writes} times");
    assert!(
        writes >= 100,
        "the folder changed underfoot: {writes} rewrites"
    );
}

#[tokio::test]
async fn a_created_prompt_is_never_missing_and_a_deleted_one_never_back_after_a_reload() {
    let (app, churn) = reloading_under_churn().await;
    for round in 0..100 {
        let name = format!("new-{round}");
        let created = app.put_prompt(&name, &small_prompt("新"), None).await;
        assert_eq!(created.status(), 201, "round {round}");
        let etag = etag_of(&created);
        let seen = app.prompt_etag(&name).await;
        assert_eq!(
            seen.as_deref(),
            Some(etag.as_str()),
            "round {round}: 404 after 201"
        );
        let path = format!("/admin/prompts/{name}");
        let deleted = app.admin_call(Method::DELETE, &path).await;
        assert_eq!(deleted.status(), 204, "round {round}");
        assert_eq!(
            app.prompt_etag(&name).await,
            None,
            "round {round}: back after 204"
        );
    }
    churn.stop();
}

#[tokio::test]
async fn a_prompts_folder_that_cannot_be_written_is_500_storage_failed_naming_no_path() {
    let app = Gateway::options().admin().start().await;
    let shipped = app.prompt_etag("recipe").await.expect("recipe is live");
    // A file where the history folder must be: the save cannot keep the old
    // version, whoever runs the test (root writes through a read-only folder).
    std::fs::write(app.prompts_dir.join(".history"), "not a folder").expect("write");
    let replace = app.put_prompt("recipe", &small_prompt("改"), None).await;
    let history = app
        .admin_call(Method::GET, "/admin/prompts/recipe/history")
        .await;
    let dir = app.prompts_dir.to_string_lossy().into_owned();
    for response in [replace, history] {
        let error = assert_error_code(response, 500, "storage_failed", "").await;
        let message = error["message"].as_str().expect("a message");
        assert!(
            !message.contains('/') && !message.contains(&dir),
            "{message}"
        );
        assert!(!error.to_string().contains("/tmp"), "{error}");
    }
    assert_eq!(app.prompt_etag("recipe").await, Some(shipped), "unchanged");
}
