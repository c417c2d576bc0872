//! The mapping of a create to the chat body, and what it refuses.

use super::*;

fn sent(body: Value) -> Value {
    let asked = parse(body.to_string().as_bytes(), Some("m")).expect("understood");
    serde_json::from_slice(&asked.body()).expect("JSON")
}

#[test]
fn input_and_instructions_become_messages_and_the_knobs_their_chat_names() {
    let chat = sent(json!({
        "input": [
            {"role": "developer", "content": "只说中文"},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "番茄"}, {"type": "input_text", "text": "炒蛋"}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "好的"}]},
        ],
        "instructions": "你是厨师",
        "max_output_tokens": 300, "temperature": 0.2, "top_p": 0.9,
        "text": {"format": {"type": "json_schema", "name": "recipe", "schema": {"type": "object"}, "strict": true}},
    }));
    assert_eq!(
        chat["messages"],
        json!([{"role": "system", "content": "你是厨师"},
               {"role": "system", "content": "只说中文"},
               {"role": "user", "content": "番茄炒蛋"},
               {"role": "assistant", "content": "好的"}])
    );
    assert_eq!(
        (chat["max_tokens"].clone(), chat["temperature"].clone()),
        (json!(300), json!(0.2))
    );
    assert_eq!(
        chat["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "recipe", "schema": {"type": "object"}, "strict": true}})
    );
    assert_eq!(
        (chat["stream"].clone(), chat["model"].clone()),
        (json!(true), json!("m"))
    );
    assert_eq!(
        sent(json!({"input": "hi"}))["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
}

#[test]
fn what_is_not_served_is_refused_naming_it() {
    for (body, named) in [
        (json!({"input": "x", "tools": []}), "`tools`"),
        (
            json!({"input": "x", "reasoning": {"effort": "low"}}),
            "`reasoning`",
        ),
        (
            json!({"input": [{"type": "function_call_output", "output": "1"}]}),
            "function_call_output",
        ),
        (
            json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
            "input_image",
        ),
        (
            json!({"input": "x", "background": true, "store": false}),
            "`background`",
        ),
        (
            json!({"input": "x", "previous_response_id": 1}),
            "`previous_response_id`",
        ),
        (json!({"input": "x", "metadata": {"a": 1}}), "`metadata`"),
        (json!({"input": []}), "`input`"),
    ] {
        let said = match parse(body.to_string().as_bytes(), Some("m")) {
            Err(ApiError::InvalidRequest(said)) => said,
            other => panic!("{body}: {other:?}"),
        };
        assert!(said.contains(named), "{body}: {said}");
    }
}
