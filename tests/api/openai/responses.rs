//! The Responses API's create (contract 12) as the official Python SDK reads it:
//! the response object, its events (one stream, and the SDK's accumulating
//! helper), a failing upstream, a refused field; and the events ladle writes
//! around a retry that voids text, a continuation and a late failure.

use ladle::config::UpstreamSettings;
use ladle::engine::upstream::continuation::Continuation;
use serde_json::{Value, json};

use super::sdk::{oracle_of, run_oracle};
use crate::support::continuing::{CutBy, cut_after, speaks};
use crate::support::mock_upstream::*;
use crate::support::scripts::BUSY_CHUNK;
use crate::support::*;

async fn oracle(app: &Gateway, scenario: &str) -> Value {
    oracle_of("openai_responses.py", app, scenario).await
}

/// An answer with reasoning first, then `pieces`, then usage.
fn thought_answer(pieces: &[&str]) -> Script {
    let mut steps = vec![data(&role()), data(&reasoning("想想火候"))];
    steps.extend(pieces.iter().map(|p| data(&content(p))));
    steps.push(data(&finish()));
    steps.push(data(
        &json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7,
                "total_tokens": 19, "completion_tokens_details": {"reasoning_tokens": 3}}})
        .to_string(),
    ));
    steps.push(data("[DONE]"));
    sse(steps)
}

#[tokio::test]
async fn the_python_sdk_reads_the_response_object_and_the_upstream_gets_the_chat_body() {
    let app = Gateway::start().await;
    app.upstream()
        .push([thought_answer(&["{\"步骤\":", " \"先炒蛋\"}"])]);
    let parsed = oracle(&app, "create").await;
    assert_eq!(parsed["status"], "completed", "{parsed}");
    assert_eq!(parsed["output_text"], "{\"步骤\": \"先炒蛋\"}");
    assert_eq!(parsed["reasoning"], json!(["想想火候"]));
    assert!(
        parsed["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("resp_") && id.len() >= 27)
    );
    assert_eq!(parsed["usage"]["input_tokens"], 12);
    assert_eq!(parsed["usage"]["output_tokens"], 7);
    assert_eq!(
        parsed["usage"]["output_tokens_details"]["reasoning_tokens"],
        3
    );
    assert_eq!(parsed["metadata"], json!({"dish": "番茄炒蛋"}));
    assert_eq!(parsed["instructions"], "你是一位中餐厨师");
    let sent = &app.upstream().requests()[0].body;
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "你是一位中餐厨师"},
               {"role": "user", "content": "番茄炒蛋怎么做？"}])
    );
    assert_eq!(sent["response_format"], json!({"type": "json_object"}));
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn the_python_sdk_reads_every_event_in_order_with_gapless_numbers() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["番茄", "炒蛋"])]);
    let parsed = oracle(&app, "stream").await;
    assert_eq!(
        parsed["types"],
        json!([
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]),
        "{parsed}"
    );
    let numbers: Vec<u64> = (0..10).collect();
    assert_eq!(parsed["sequence_numbers"], json!(numbers));
    assert_eq!(
        (parsed["text"].clone(), parsed["final_text"].clone()),
        (json!("番茄炒蛋"), json!("番茄炒蛋"))
    );
    assert_eq!(parsed["final_status"], "completed");
}

#[tokio::test]
async fn the_python_sdks_stream_helper_places_every_event() {
    let app = Gateway::start().await;
    app.upstream().push([thought_answer(&["番茄", "炒蛋"])]);
    let parsed = oracle(&app, "helper").await;
    assert_eq!(parsed["deltas"], "番茄炒蛋", "{parsed}");
    assert_eq!(parsed["output_text"], "番茄炒蛋");
    assert_eq!(parsed["status"], "completed");
}

#[tokio::test]
async fn a_failing_upstream_raises_the_sdks_status_error_and_an_unsupported_field_is_refused() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(status(503, r#"{"error":{"message":"overloaded"}}"#));
    let parsed = oracle(&app, "failed").await;
    assert_eq!(
        (parsed["class"].clone(), parsed["status"].clone()),
        (json!("InternalServerError"), json!(503)),
        "{parsed}"
    );
    assert_eq!(parsed["code"], "upstream_busy");
    let parsed = oracle(&app, "refused").await;
    assert_eq!(
        (parsed["class"].clone(), parsed["status"].clone()),
        (json!("BadRequestError"), json!(400)),
        "{parsed}"
    );
    assert!(
        parsed["message"]
            .as_str()
            .is_some_and(|m| m.contains("`tools`")),
        "{parsed}"
    );
}

/// The events of a streamed create, as `(type, data)`.
async fn streamed(app: &Gateway) -> Vec<(String, Value)> {
    let body = json!({"model": "m", "input": "番茄炒蛋怎么做？", "stream": true});
    let text = app
        .post("/v1/responses", &body)
        .await
        .text()
        .await
        .expect("events");
    task_events(&text)
}

#[tokio::test]
async fn a_retry_that_voids_text_ends_its_item_incomplete_and_starts_a_new_one() {
    let app = Gateway::start().await;
    app.upstream().push([
        sse(vec![
            data(&role()),
            data(&content("番茄")),
            data(BUSY_CHUNK),
        ]),
        sse_answer(&["番茄炒蛋"]),
    ]);
    let events = streamed(&app).await;
    let done: Vec<&Value> = events
        .iter()
        .filter(|(kind, _)| kind == "response.output_item.done")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(done.len(), 2, "{events:?}");
    assert_eq!(
        (
            done[0]["item"]["status"].clone(),
            done[0]["output_index"].clone()
        ),
        (json!("incomplete"), json!(0))
    );
    assert_eq!(
        (
            done[1]["item"]["status"].clone(),
            done[1]["output_index"].clone()
        ),
        (json!("completed"), json!(1))
    );
    let last = &events.last().expect("an end").1;
    assert_eq!(last["response"]["output"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        last["response"]["output"][0]["content"][0]["text"],
        "番茄炒蛋"
    );
}

#[tokio::test]
async fn a_continuation_simply_goes_on_in_the_same_item() {
    let mock = MockUpstream::start().await;
    mock.push([cut_after("番茄炒", CutBy::Reset)]);
    speaks(&mock, "prefix", "番茄炒蛋，先炒蛋。");
    let app = Gateway::options()
        .upstreams(vec![UpstreamSettings {
            continuation: Continuation::Prefix,
            ..upstream("a", &mock.url, 0, 1)
        }])
        .start()
        .await;
    let events = streamed(&app).await;
    let added = events
        .iter()
        .filter(|(kind, _)| kind == "response.output_item.added")
        .count();
    assert_eq!(added, 1, "{events:?}");
    let last = &events.last().expect("an end");
    assert_eq!(last.0, "response.completed");
    assert_eq!(
        last.1["response"]["output"][0]["content"][0]["text"],
        "番茄炒蛋，先炒蛋。"
    );
}

#[tokio::test]
async fn a_failure_after_output_ends_the_stream_with_response_failed() {
    let app = Gateway::start().await;
    app.upstream().push([sse(vec![
        data(&role()),
        data(&content("番茄")),
        Step::Reset,
    ])]);
    app.upstream()
        .fallback(status(401, r#"{"error":{"message":"bad key"}}"#));
    let events = streamed(&app).await;
    let (kind, data) = events.last().expect("an end");
    assert_eq!(kind, "response.failed", "{events:?}");
    assert_eq!(data["response"]["status"], "failed");
    assert!(data["response"]["error"]["code"].is_string(), "{data}");
}

#[tokio::test]
async fn a_background_stream_closed_after_some_deltas_is_resumed_with_starting_after() {
    let app = Gateway::start().await;
    let pieces = ["番", "茄", "炒", "蛋", "，", "先", "炒", "蛋", "。", "好"];
    app.upstream()
        .push([crate::support::scripts::paced_answer(&pieces, 30)]);
    let parsed = oracle(&app, "background").await;
    assert_eq!(parsed["created_status"], "queued", "{parsed}");
    let whole: String = pieces.concat();
    let joined = format!(
        "{}{}",
        parsed["before"].as_str().unwrap_or_default(),
        parsed["after"].as_str().unwrap_or_default()
    );
    assert_eq!(joined, whole, "{parsed}");
    let numbers: Vec<u64> = serde_json::from_value(parsed["numbers"].clone()).expect("numbers");
    let expected: Vec<u64> = (0..numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "gapless across the resume");
    assert_eq!(parsed["final_status"], "completed");
    assert_eq!(parsed["retrieved_status"], "completed");
    assert_eq!(parsed["retrieved_text"], whole.as_str());
    assert_eq!(
        parsed["readings_equal"], true,
        "a finished stream read twice is the same"
    );
    assert_eq!(app.upstream().requests().len(), 1);
}

#[tokio::test]
async fn a_background_response_is_cancelled_and_stays_so() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(sse(vec![data(&role()), Step::Stall]));
    let parsed = oracle(&app, "cancel").await;
    assert_eq!(parsed["created"], "queued", "{parsed}");
    assert_eq!(parsed["cancelled"], "cancelled");
    assert_eq!(parsed["retrieved"], "cancelled");
}

#[tokio::test]
async fn an_unknown_or_malformed_response_id_is_404_not_found() {
    let app = Gateway::start().await;
    for id in ["resp_nope", "job_abc", "resp_0123456789012345678901"] {
        let (status, error) = error_of(app.get(&format!("/v1/responses/{id}")).await).await;
        assert_eq!(
            (status, error["code"].clone()),
            (404, json!("not_found")),
            "{id}"
        );
    }
}

#[tokio::test]
async fn previous_response_id_sends_the_stored_turn_before_the_new_input() {
    let app = Gateway::start().await;
    app.upstream().push([
        sse_answer(&["先炒蛋再炒番茄"]),
        sse_answer(&["炒蛋，加番茄"]),
    ]);
    let parsed = oracle(&app, "previous").await;
    assert_eq!(parsed["first"], "completed", "{parsed}");
    assert_eq!(parsed["second_text"], "炒蛋，加番茄");
    assert_eq!(parsed["previous_response_id"], parsed["first_id"]);
    let sent = app.upstream().requests();
    assert_eq!(
        sent[1].body["messages"],
        super::second_turn_messages(),
        "the earlier turn, its instructions excepted"
    );
    let unknown = json!({"input": "x", "previous_response_id": "resp_0123456789012345678901"});
    let (status, error) = error_of(app.post("/v1/responses", &unknown).await).await;
    assert_eq!((status, error["code"].clone()), (404, json!("not_found")));
}

/// Runs one scenario of the Node oracle (`tests/sdk/openai_responses.mjs`, with
/// the SDK `bash .ci/sdk-node` installs) against `app`; what it printed.
async fn node_oracle(app: &Gateway, scenario: &str) -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        root.join("target/sdk-node/node_modules/openai").exists(),
        "the Node SDK oracle needs its SDK: run `bash .ci/sdk-node` (Node.js and npm; \
         .ci/run does it), or skip these tests with `--skip openai::responses::node`"
    );
    run_oracle("node", "openai_responses.mjs", app, scenario).await
}

#[tokio::test]
async fn node_the_sdk_reads_a_create_a_stream_and_a_status_error() {
    let app = Gateway::start().await;
    app.upstream()
        .push([sse_answer(&["番茄", "炒蛋"]), sse_answer(&["番茄", "炒蛋"])]);
    let parsed = node_oracle(&app, "create").await;
    assert_eq!(
        (parsed["status"].clone(), parsed["output_text"].clone()),
        (json!("completed"), json!("番茄炒蛋")),
        "{parsed}"
    );
    let parsed = node_oracle(&app, "stream").await;
    assert_eq!(parsed["text"], "番茄炒蛋", "{parsed}");
    assert_eq!(parsed["types"][0], "response.created");
    assert_eq!(
        parsed["types"].as_array().and_then(|t| t.last()),
        Some(&json!("response.completed"))
    );
    let numbers: Vec<u64> = serde_json::from_value(parsed["numbers"].clone()).expect("numbers");
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    app.upstream()
        .fallback(status(503, r#"{"error":{"message":"overloaded"}}"#));
    let parsed = node_oracle(&app, "failed").await;
    assert_eq!(
        (parsed["class"].clone(), parsed["status"].clone()),
        (json!("InternalServerError"), json!(503)),
        "{parsed}"
    );
}

#[tokio::test]
async fn node_the_sdk_resumes_a_background_stream_with_starting_after() {
    let app = Gateway::start().await;
    let pieces = ["番", "茄", "炒", "蛋", "，", "先", "炒", "蛋", "。"];
    app.upstream()
        .push([crate::support::scripts::paced_answer(&pieces, 30)]);
    let parsed = node_oracle(&app, "background").await;
    let joined = format!(
        "{}{}",
        parsed["before"].as_str().unwrap_or_default(),
        parsed["after"].as_str().unwrap_or_default()
    );
    assert_eq!(joined, pieces.concat(), "{parsed}");
    let numbers: Vec<u64> = serde_json::from_value(parsed["numbers"].clone()).expect("numbers");
    assert_eq!(
        numbers,
        (0..numbers.len() as u64).collect::<Vec<_>>(),
        "gapless"
    );
    assert_eq!(parsed["status"], "completed");
    assert_eq!(
        parsed["after_cancel"], "completed",
        "a finished response is left as it is"
    );
    assert_eq!(parsed["retrieved"], pieces.concat());
}
