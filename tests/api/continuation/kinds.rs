//! Every failure kind of 11.4 continued, on every shape: a chat stream goes on
//! as one completion, chat JSON and a task's answer are `P` and the rest, a
//! task stream says `continue` (never `reset`), and a cut recipe normalizes
//! whole.

use ladle::engine::upstream::continuation::Continuation;
use serde_json::{Value, json};

use super::{TEXT, assert_one_whole_stream, gateway_over, gateway_over_two, written};
use crate::support::continuing::{CutBy, FIRST_ID, cut_after, speaks};
use crate::support::mock_upstream::*;
use crate::support::scripts::recipe_answer;
use crate::support::*;

#[tokio::test]
async fn every_failure_kind_after_output_is_continued_on_a_chat_stream() {
    for by in CutBy::ALL {
        let mock = MockUpstream::start().await;
        mock.push([cut_after(&written(9), by)]);
        speaks(&mock, "prefix", TEXT);
        let gateway = gateway_over(&mock, Continuation::Prefix).await;
        let response = gateway.chat(true).await;
        assert_eq!(response.status(), 200, "{by:?}");
        assert_one_whole_stream(&response.text().await.expect("body"), TEXT);
        assert_eq!(mock.requests().len(), 2, "{by:?}");
    }
}

#[tokio::test]
async fn chat_json_is_p_and_the_rest_with_the_first_id() {
    for by in [CutBy::Eof, CutBy::BusyChunk] {
        let mock = MockUpstream::start().await;
        mock.push([cut_after(&written(20), by)]);
        speaks(&mock, "partial", TEXT);
        let gateway = gateway_over(&mock, Continuation::Partial).await;
        let body = json_of(gateway.chat(false).await).await;
        assert_eq!(body["choices"][0]["message"]["content"], TEXT, "{by:?}");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["id"], FIRST_ID);
        assert_eq!(body.get("usage"), None, "the cut attempt reported none");
    }
}

#[tokio::test]
async fn a_task_stream_says_continue_and_never_reset() {
    let mock = MockUpstream::start().await;
    let ideas = r#"{"ideas": ["番茄炒蛋", "青椒土豆丝", "麻婆豆腐"]}"#;
    let prefix: String = ideas.chars().take(17).collect();
    mock.push([cut_after(&prefix, CutBy::Reset)]);
    speaks(&mock, "prefix", ideas);
    let gateway = gateway_over(&mock, Continuation::Prefix).await;
    let response = gateway
        .post_events("/v1/tasks/fridge", &json!({"ingredients": ["鸡蛋"]}))
        .await;
    let events = task_events(&response.text().await.expect("body"));
    let names = event_names(&events);
    assert_eq!(
        names,
        ["attempt", "delta", "attempt", "continue", "delta", "result"]
    );
    let continued = events.iter().find(|(name, _)| name == "continue");
    assert_eq!(
        continued.map(|(_, data)| data.clone()),
        Some(json!({"attempt": 2, "upstream": "a", "chars": 17}))
    );
    let result = &events.last().expect("a result").1;
    assert_eq!(
        result["output"],
        serde_json::from_str::<Value>(ideas).expect("JSON")
    );
    assert_eq!(result["meta"]["attempts"], 2);
}

#[tokio::test]
async fn a_recipe_cut_mid_string_is_normalized_whole() {
    let whole = fixture_text("recipe-raw-model-output.txt");
    let uncut = MockUpstream::start().await;
    uncut.push([recipe_answer()]);
    let plain = Gateway::options().mock(&uncut).start().await;
    let recipe = json!({"dish": "番茄炒蛋"});
    let expected = json_of(plain.task("recipe", &recipe).await).await;
    let mock = MockUpstream::start().await;
    let cut_at = whole.chars().count() * 2 / 3;
    let prefix: String = whole.chars().take(cut_at).collect();
    mock.push([cut_after(&prefix, CutBy::Eof)]);
    speaks(&mock, "continue_final_message", &whole);
    let gateway = gateway_over(&mock, Continuation::ContinueFinalMessage).await;
    let body = json_of(gateway.task("recipe", &recipe).await).await;
    assert_eq!(body["output"], expected["output"]);
    assert_eq!(body["meta"]["attempts"], 2);
}

#[tokio::test]
async fn a_cut_goes_to_the_same_upstream_if_it_continues_else_to_the_next_that_does() {
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.push([cut_after(&written(6), CutBy::Reset)]);
    speaks(&b, "prefix", TEXT);
    let gateway = gateway_over_two(&a, Continuation::None, &b, Continuation::Prefix).await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], TEXT);
    assert_eq!((a.requests().len(), b.requests().len()), (1, 1));
    let fallbacks = gateway
        .metric(r#"ladle_fallbacks_total{from="a",to="b"}"#)
        .await;
    assert_eq!(fallbacks, 1.0);

    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    a.push([cut_after(&written(6), CutBy::Reset)]);
    speaks(&a, "prefix", TEXT);
    let gateway = gateway_over_two(&a, Continuation::Prefix, &b, Continuation::Prefix).await;
    let body = json_of(gateway.chat(false).await).await;
    assert_eq!(body["choices"][0]["message"]["content"], TEXT);
    assert_eq!(
        (a.requests().len(), b.requests().len()),
        (2, 0),
        "stays, whatever its attempts"
    );
}
