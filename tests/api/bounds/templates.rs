//! Templates render within limits (a step budget, 1 MiB of text): past them a
//! task request is `422 invalid_variables` and an admin render or save `422
//! invalid_prompt`; and a render never stalls other requests.

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::json;
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::scripts::paced_answer;
use crate::support::*;

/// A loop nested in a loop, `n` times each: `n` = 100000 is 10^10 steps.
const NESTED: &str = "{% for i in range(n) %}{% for j in range(n) %}x{% endfor %}{% endfor %}";

/// A prompt file whose user message is `template`, with an integer `n` and a
/// string `text` (both optional: the test render of a save has nothing to blow).
fn prompt_with(template: &str) -> String {
    format!(
        "description = \"有界\"\noutput = \"text\"\n\n[variables.n]\ntype = \"integer\"\n\
         default = 2\n\n[variables.text]\ntype = \"string\"\ndefault = \"x\"\n\n\
         [messages]\nuser = '''{template}'''\n"
    )
}

/// A gateway with the admin API and the tasks `nested` (NESTED) and `repeat`
/// (`text` twenty times).
async fn with_hostile_tasks() -> Gateway {
    Gateway::options()
        .admin()
        .prompt("nested", &prompt_with(NESTED))
        .prompt(
            "repeat",
            &prompt_with("{% for i in range(20) %}{{ text }}{% endfor %}"),
        )
        .start()
        .await
}

/// Asserts a task's answer is the template's limits, before any upstream call.
async fn assert_past_the_limits(app: &Gateway, response: reqwest::Response) {
    let (status, error) = error_of(response).await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["code"], "invalid_variables");
    assert_eq!(
        error["message"],
        "variable `*`: the template exceeded its limits"
    );
    assert_eq!(error["variable"], "*");
    assert_eq!(error["retryable"], false);
    assert!(app.upstream().requests().is_empty());
}

#[tokio::test]
async fn a_task_whose_variable_drives_a_huge_nested_loop_is_422_the_template_exceeded_its_limits() {
    let app = with_hostile_tasks().await;
    let started = Instant::now();
    let response = app.task("nested", &json!({"n": 100_000})).await;
    eprintln!("a hostile task render: answered in {:?}", started.elapsed());
    assert_past_the_limits(&app, response).await;
}

#[tokio::test]
async fn a_task_that_would_render_more_than_1_mib_is_422_the_template_exceeded_its_limits() {
    let app = with_hostile_tasks().await;
    // 20 × 100 KB: 2 MB of text in few steps.
    let text = "x".repeat(100_000);
    let response = app.task("repeat", &json!({ "text": text })).await;
    assert_past_the_limits(&app, response).await;
    // Under the limit it renders and goes upstream.
    app.upstream().push([sse_answer(&["好"])]);
    let small = app.task("repeat", &json!({"text": "y".repeat(1000)})).await;
    assert_eq!(small.status(), 200);
    let sent = user_message_sent(app.upstream(), 0);
    assert_eq!(sent.len(), 20_000);
}

/// `POST /admin/render` of NESTED's prompt with `n`.
async fn admin_render(app: &Gateway, n: u64) -> reqwest::Response {
    let body = json!({"template": prompt_with(NESTED), "variables": {"n": n}});
    app.admin(Method::POST, "/admin/render")
        .json(&body)
        .send()
        .await
        .expect("gateway answers")
}

#[tokio::test]
async fn an_admin_render_of_a_hostile_template_is_422_invalid_prompt() {
    let app = with_hostile_tasks().await;
    let started = Instant::now();
    let (status, error) = error_of(admin_render(&app, 100_000).await).await;
    eprintln!(
        "a hostile admin render: answered in {:?}",
        started.elapsed()
    );
    assert_eq!(
        (status, error["code"].as_str()),
        (422, Some("invalid_prompt"))
    );
    assert_eq!(
        error["message"],
        "invalid prompt: the template exceeded its limits"
    );
    // The same template with a small `n` renders.
    let small = admin_render(&app, 3).await;
    assert_eq!(small.status(), 200);
    assert_eq!(json_of(small).await["messages"][0]["content"], "xxxxxxxxx");
}

#[tokio::test]
async fn saving_a_template_that_exceeds_its_limits_with_its_defaults_is_422_invalid_prompt() {
    let app = with_hostile_tasks().await;
    let hostile = prompt_with(NESTED).replace("default = 2", "default = 100000");
    let response = app.put_prompt("hostile", &hostile, None).await;
    let error = assert_error_code(response, 422, "invalid_prompt", "").await;
    let message = error["message"].as_str().expect("a message");
    assert!(
        message.contains("messages.user"),
        "names the template: {message}"
    );
    assert_eq!(app.prompt_etag("hostile").await, None, "not saved");
}

/// Hostile renders fired at once: this many admin renders and task requests each.
const HOSTILE: usize = 3;

// Two workers, as the gateway has on this machine: in a test the gateway shares
// the test's runtime, and on one thread the test's own client work would count
// as the gateway's stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_renders_never_stall_a_stream_in_flight() {
    // Arrange: a stream of 70 chunks 20 ms apart (1.4 s).
    let app = with_hostile_tasks().await;
    let pieces: Vec<String> = (0..70).map(|n| format!("{n} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    app.upstream().push([paced_answer(&pieces, 20)]);
    // The stream is read on a thread and runtime of its own, so that what the
    // test's own client does for the hostile requests (connecting, say) cannot
    // delay the reader and pass for a gap in the gateway's stream.
    let request = app.chat_request(true);
    let (began, first_chunk) = tokio::sync::oneshot::channel();
    let reader = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let response = request.send().await.expect("the gateway answers");
            assert_eq!(response.status(), 200);
            let mut body = response.bytes_stream();
            body.next().await.expect("a first chunk").expect("bytes");
            let mut arrivals = vec![Instant::now()];
            let _ = began.send(());
            while let Some(chunk) = body.next().await {
                chunk.expect("the stream goes on");
                arrivals.push(Instant::now());
            }
            arrivals
        })
    });
    first_chunk.await.expect("the stream began");
    // Act: hostile renders, all at once, while the stream runs.
    let fired = Instant::now();
    let admin = (0..HOSTILE).map(|_| async { admin_render(&app, 100_000).await.status() });
    let tasks = (0..HOSTILE).map(|_| async {
        let response = app.task("nested", &json!({"n": 100_000})).await;
        response.status()
    });
    let (admin, tasks) = tokio::join!(
        futures_util::future::join_all(admin),
        futures_util::future::join_all(tasks)
    );
    let renders_took = fired.elapsed();
    let arrivals = tokio::task::spawn_blocking(move || reader.join().expect("the reader ends"))
        .await
        .expect("joined");
    // Assert: every render was refused, and the stream kept its pace meanwhile.
    assert!(
        admin.iter().chain(&tasks).all(|s| *s == 422),
        "{admin:?} {tasks:?}"
    );
    let gaps: Vec<u128> = arrivals.windows(2).map(|w| ms(w[0], w[1])).collect();
    let during: Vec<u128> = arrivals
        .windows(2)
        .filter(|w| w[1] > fired && w[0] < fired + renders_took)
        .map(|w| ms(w[0], w[1]))
        .collect();
    let largest = gaps.iter().max().copied().unwrap_or_default();
    eprintln!(
        "renders: {} hostile renders took {renders_took:?}; stream: {} chunks, largest gap \
         {largest} ms, gaps during the renders {during:?}",
        2 * HOSTILE,
        arrivals.len()
    );
    assert!(
        largest < 100,
        "the largest gap between chunks: {largest} ms ({gaps:?})"
    );
    // The stream and the renders did overlap: a hostile render costs about
    // 250 ms in a debug build, so six take several times that.
    assert!(
        renders_took >= millis(200),
        "the renders ran while the stream did ({renders_took:?})"
    );
    assert!(
        during.len() >= 5,
        "the stream ran while the renders did: {during:?}"
    );
}
