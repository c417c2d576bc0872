//! What a continued answer leaves behind: the idempotency record and the
//! answer cache hold it whole, a job's run and its event stream carry
//! `continue`, usage is what was billed (summed, or absent), and the attempt's
//! log line says it continued.

use std::time::Duration;

use ladle::engine::upstream::continuation::Continuation;
use serde_json::json;

use super::{TEXT, gateway_over, written};
use crate::jobs::{job_after, job_id};
use crate::support::continuing::{CutBy, cut_after, speaks, sse_chunks};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

#[tokio::test]
async fn an_idempotency_record_holds_the_whole_continued_answer() {
    let mock = MockUpstream::start().await;
    mock.push([cut_after(&written(11), CutBy::Reset)]);
    speaks(&mock, "prefix", TEXT);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let first = json_of(gateway.chat_keyed("cut-once").await).await;
    let again = gateway.chat_keyed("cut-once").await;
    assert!(replayed(&again));
    let again = json_of(again).await;
    assert_eq!(first["choices"][0]["message"]["content"], TEXT);
    assert_eq!(again["choices"], first["choices"]);
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn the_answer_cache_keeps_the_continued_answer_whole() {
    let mock = MockUpstream::start().await;
    let idea = r#"{"idea": "番茄炒蛋配一碗米饭"}"#;
    let prefix: String = idea.chars().take(15).collect();
    mock.push([cut_after(&prefix, CutBy::Eof)]);
    speaks(&mock, "prefix", idea);
    let gateway = Gateway::options()
        .upstreams(vec![super::continuing("a", &mock, 0, Continuation::Prefix)])
        .prompt("idea", &crate::cache::cached_prompt(60_000, 60_000))
        .start()
        .await;
    let dish = json!({"dish": "番茄"});
    let made = json_of(gateway.task("idea", &dish).await).await;
    let kept = json_of(gateway.task("idea", &dish).await).await;
    assert_eq!(made["output"], json!({"idea": "番茄炒蛋配一碗米饭"}));
    assert_eq!(kept["output"], made["output"]);
    assert_eq!(kept["meta"]["cache"], "hit");
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_jobs_run_and_its_event_stream_carry_the_continuation() {
    let mock = MockUpstream::start().await;
    let ideas = r#"{"ideas": ["番茄炒蛋", "葱油拌面"]}"#;
    let prefix: String = ideas.chars().take(14).collect();
    mock.push([cut_after(&prefix, CutBy::Reset)]);
    speaks(&mock, "prefix", ideas);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let submitted = gateway
        .post(
            "/v1/tasks/fridge?async=true",
            &json!({"ingredients": ["鸡蛋"]}),
        )
        .await;
    let id = job_id(submitted).await;
    let job = job_after(&gateway, &id, 2_000).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(
        job["result"]["output"]["ideas"],
        json!(["番茄炒蛋", "葱油拌面"])
    );
    let events = gateway
        .get(&format!("/v1/jobs/{id}/events?after=1.1"))
        .await
        .text()
        .await
        .expect("events");
    let events = task_events(&events);
    let continued: Vec<_> = events
        .iter()
        .filter(|(name, _)| name == "continue")
        .collect();
    assert_eq!(continued.len(), 1, "{events:?}");
    assert_eq!(
        continued[0].1,
        json!({"attempt": 2, "upstream": "a", "chars": 14})
    );
    assert!(
        events
            .iter()
            .all(|(name, _)| name != "reset" && name != "retry")
    );
}

#[tokio::test]
async fn usage_is_summed_when_every_attempt_in_the_answer_reported_one() {
    let mock = MockUpstream::start().await;
    let prefix = written(12);
    let billed = json!({"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22});
    let mut cut = cut_after(&prefix, CutBy::Eof);
    cut.0.push(data(
        &json!({"id": "x", "choices": [], "usage": billed}).to_string(),
    ));
    mock.push([cut.clone()]);
    speaks(&mock, "prefix", TEXT);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let rest = (TEXT.chars().count() - 12) as u64;
    let summed = json!({"prompt_tokens": 20, "completion_tokens": 12 + rest,
                        "total_tokens": 32 + rest});
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["usage"], summed);
    mock.push([cut]);
    let mut streamed = chat_body(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let text = gateway
        .post("/v1/chat/completions", &streamed)
        .await
        .text()
        .await
        .expect("body");
    let with_usage: Vec<_> = sse_chunks(&text)
        .into_iter()
        .filter(|c| c.get("usage").is_some_and(|u| !u.is_null()))
        .collect();
    assert_eq!(with_usage.len(), 2, "the cut's own, then the sum: {text}");
    assert_eq!(with_usage[1]["usage"], summed);
}

#[tokio::test]
async fn the_continuations_log_line_says_so_with_the_length_of_p() {
    let mock = MockUpstream::start().await;
    mock.push([cut_after(&written(8), CutBy::Reset)]);
    speaks(&mock, "partial", TEXT);
    let env = [
        ("LADLE_UPSTREAM_CONTINUATION", "partial"),
        ("LADLE_CONTINUE_MIN_REMAINING_MS", "500"),
    ];
    let mut ladle = LadleProcess::start(&mock.url, &env).await;
    let body = json_of(ladle.chat_as("cut-8", false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], TEXT);
    ladle.terminate();
    ladle.exited(Duration::from_secs(5)).await;
    let attempts = ladle.lines_of("cut-8", "attempt ended");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0].get("continuation"), None);
    assert_eq!(attempts[0]["decision"], "retry");
    assert_eq!(attempts[1]["continuation"], true);
    assert_eq!(attempts[1]["prefix_chars"], 8);
    assert_eq!(attempts[1]["outcome"], "ok");
}
