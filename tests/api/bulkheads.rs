//! Bulkheads (contract 8, "Per task and per upstream"): a task's `max_inflight`
//! keeps a flood of it from taking the slots another task needs; an upstream's
//! sends its overflow to the next upstream at once, and a request waits for a
//! slot only when every usable upstream is full; a job's run waits for its task's
//! slot without a limit. With the mock's timings and request counts.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::scripts::paced_answer;
use crate::support::*;

/// A text task of at most `limit` requests at once.
fn limited_prompt(limit: u32) -> String {
    format!(
        "description = \"slow\"\noutput = \"text\"\nmax_inflight = {limit}\n\n\
         [variables.n]\nrequired = true\n\n[messages]\nuser = \"第{{{{ n }}}}个\"\n"
    )
}

/// Asks the limited task; the status and body.
async fn slow(endpoint: &Endpoint, n: u32) -> (u16, Value) {
    let response = endpoint.post("/v1/tasks/slow", &json!({"n": n})).await;
    let status = response.status().as_u16();
    (status, json_of(response).await)
}

#[tokio::test]
async fn a_flood_of_one_task_waits_for_its_own_slots_and_another_task_is_answered_at_once() {
    let upstream = MockUpstream::start().await;
    let stall = || sse(vec![Step::Stall]);
    upstream.push([
        stall(),
        stall(),
        sse_answer(&[r#"{"ideas": ["凉拌黄瓜"]}"#]),
    ]);
    let gateway = Gateway::options()
        .mock(&upstream)
        .prompt("slow", &limited_prompt(2))
        .adjust(|c| c.max_inflight = 3)
        .start()
        .await;
    let flood: Vec<_> = (0..5)
        .map(|n| {
            let endpoint = Endpoint::clone(&gateway);
            tokio::spawn(async move { slow(&endpoint, n).await })
        })
        .collect();
    requests_arrive(&upstream, 2).await;
    let inflight = "ladle_inflight{scope=\"task\",name=\"slow\"}";
    assert_eq!(gateway.metric(inflight).await, 2.0);

    // Three of the flood wait for the task's slots, not for the gateway's: the
    // short task gets one at once.
    let started = Instant::now();
    let fridge = gateway
        .task("fridge", &json!({"ingredients": ["黄瓜"]}))
        .await;
    assert_eq!(fridge.status(), 200);
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(json_of(fridge).await["output"]["ideas"][0], "凉拌黄瓜");

    let mut statuses = Vec::new();
    for waiting in flood.into_iter().skip(2) {
        let (status, body) = waiting.await.expect("a request");
        statuses.push((status, body["error"]["code"].clone()));
    }
    let overloaded = (503, json!("overloaded"));
    assert_eq!(
        statuses,
        [overloaded.clone(), overloaded.clone(), overloaded]
    );
    assert_eq!(
        upstream.requests().len(),
        3,
        "the waiting ones never reached it"
    );
    assert_eq!(
        gateway
            .metric("ladle_limit_waits_total{scope=\"task\"}")
            .await,
        3.0
    );
    assert_eq!(
        gateway
            .metric("ladle_limit_rejections_total{scope=\"task\"}")
            .await,
        3.0
    );
}

#[tokio::test]
async fn a_full_upstream_sends_the_attempt_to_the_next_one_at_once() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.push([sse(vec![Step::Stall])]);
    b.push([sse_answer(&["备用"])]);
    let mut list = primary_and_backup(&a.url, &b.url);
    list[0].max_inflight = Some(1);
    let gateway = Gateway::options().upstreams(list).start().await;
    let holding = Endpoint::clone(&gateway);
    let first = tokio::spawn(async move { holding.chat(false).await });
    requests_arrive(&a, 1).await;
    let started = Instant::now();
    let body = json_of(gateway.chat(false).await).await;
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(body["choices"][0]["message"]["content"], "备用");
    assert_eq!(
        (a.requests().len(), b.requests().len()),
        (1, 1),
        "no attempt on the full one"
    );
    let fallbacks = gateway
        .metric("ladle_fallbacks_total{from=\"a\",to=\"b\"}")
        .await;
    assert_eq!(fallbacks, 0.0, "no retry either");
    first.abort();
}

#[tokio::test]
async fn with_every_upstream_full_a_request_waits_for_the_first_free_slot_within_its_deadline() {
    let mock = MockUpstream::start().await;
    mock.push([
        paced_answer(&["一", "二", "三"], 100),
        sse_answer(&["轮到我"]),
    ]);
    let mut list = vec![upstream("a", &mock.url, 0, 1)];
    list[0].max_inflight = Some(1);
    let gateway = Gateway::options().upstreams(list).start().await;
    let holding = Endpoint::clone(&gateway);
    let first = tokio::spawn(async move { holding.chat(false).await });
    requests_arrive(&mock, 1).await;

    // A request whose deadline passes first gives up with 504.
    let hurried = gateway
        .chat_request(false)
        .header("x-request-timeout-ms", "50")
        .send()
        .await
        .expect("answers");
    assert_eq!(hurried.status(), 504);
    assert_eq!(error_of(hurried).await.1["code"], "deadline_exceeded");

    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], "轮到我");
    let first = json_of(first.await.expect("the first")).await;
    assert_eq!(first["choices"][0]["message"]["content"], "一二三");
    // The paced answer takes three pieces 100 ms apart: the second request
    // reached the upstream only once the first was done with it.
    let requests = mock.requests();
    let gap = requests[1].arrived - requests[0].arrived;
    assert!(gap >= Duration::from_millis(200), "{gap:?}");
    assert_eq!(
        gateway
            .metric("ladle_limit_waits_total{scope=\"upstream\"}")
            .await,
        2.0
    );
    assert_eq!(
        gateway
            .metric("ladle_limit_rejections_total{scope=\"upstream\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_jobs_run_waits_for_its_tasks_slot_without_a_limit() {
    let upstream = MockUpstream::start().await;
    // Longer than LADLE_QUEUE_TIMEOUT_MS (200 ms in the tests).
    upstream.push([
        paced_answer(&["慢", "慢", "慢", "慢"], 100),
        sse_answer(&["做完"]),
    ]);
    let gateway = Gateway::options()
        .mock(&upstream)
        .prompt("slow", &limited_prompt(1))
        .start()
        .await;
    let holding = Endpoint::clone(&gateway);
    let sync = tokio::spawn(async move { slow(&holding, 1).await });
    requests_arrive(&upstream, 1).await;
    let job = job_succeeded_in_one_run(&gateway, "slow", &json!({"n": 2})).await;
    assert_eq!(job["result"]["output"], "做完");
    assert_eq!(sync.await.expect("the request").0, 200);
}
