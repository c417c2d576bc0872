use std::time::Duration;

use serde_json::json;

use super::*;
use crate::engine::completion::answer::{Logprobs, ToolCall};

fn named() -> Named {
    Named {
        request_id: "r-1".into(),
        created: 1_796_126_791,
        response_id: None,
    }
}

/// A chat answer with all a choice can hold: reasoning, a tool call, a refusal
/// in a second choice, log-probabilities.
fn chat() -> Finished {
    let mut first = ChoiceAnswer::new(0);
    first.reasoning = "先想想".into();
    first.tool_calls = vec![ToolCall {
        index: 0,
        id: "call_1".into(),
        kind: None,
        name: "fridge".into(),
        arguments: r#"{"room":"厨房"}"#.into(),
    }];
    first.finish_reason = Some("tool_calls".into());
    let mut second = ChoiceAnswer::new(1);
    second.content = "红烧肉".into();
    second.refusal = "不".into();
    second.logprobs = Some(Logprobs {
        content: Some(vec![json!({"token": "红", "logprob": -0.1})]),
        refusal: None,
    });
    second.finish_reason = Some("stop".into());
    Finished {
        choices: vec![first, second],
        usage: Some(json!({"total_tokens": 9})),
        meta: Meta {
            id: Some("chatcmpl-up".into()),
            model: Some("glm-4-plus-0111".into()),
            system_fingerprint: None,
        },
        output: None,
        attempts: 2,
        upstream: "primary".into(),
        model: "glm-4-plus".into(),
        elapsed: Duration::from_millis(1_250),
        cache: None,
        gathered: true,
    }
}

#[test]
fn the_stored_encoding_is_pinned() {
    // Pinned: replicas of different builds read each other's records.
    let kept = KeptAnswer::new(&chat(), named());
    let stored = r#"{"v":2,"request_id":"r-1","created":1796126791,"choices":[{"index":0,"reasoning":"先想想","tool_calls":[{"index":0,"id":"call_1","name":"fridge","arguments":"{\"room\":\"厨房\"}"}],"finish_reason":"tool_calls"},{"index":1,"content":"红烧肉","refusal":"不","logprobs":{"content":[{"token":"红","logprob":-0.1}]},"finish_reason":"stop"}],"usage":{"total_tokens":9},"meta":{"id":"chatcmpl-up","model":"glm-4-plus-0111"},"attempts":2,"upstream":"primary","model":"glm-4-plus","elapsed_ms":1250}"#;
    assert_eq!(kept.encode(), stored);
    assert_eq!(KeptAnswer::decode(stored), Some(kept));

    // A task's answer is its output: the model's text it came from is not kept.
    let mut task = chat();
    task.meta = Meta::default();
    task.output = Some(Output::of(&json!({"title": "宫保鸡丁"})));
    task.cache = Some(Cached::Hit {
        at: 1_796_126_791_000,
    });
    let named = Named {
        response_id: Some("resp_x".into()),
        ..named()
    };
    let stored = r#"{"v":2,"request_id":"r-1","created":1796126791,"response_id":"resp_x","usage":{"total_tokens":9},"output":{"title":"宫保鸡丁"},"attempts":2,"upstream":"primary","model":"glm-4-plus","elapsed_ms":1250,"cache":{"outcome":"hit","at":1796126791000}}"#;
    assert_eq!(KeptAnswer::new(&task, named).encode(), stored);
}

#[test]
fn what_is_read_back_is_the_answer_that_was_kept() {
    let finished = chat();
    let kept = KeptAnswer::decode(&KeptAnswer::new(&finished, named()).encode()).expect("reads");
    let again = kept.finished();
    assert_eq!(again.choices, finished.choices);
    assert_eq!(again.usage, finished.usage);
    assert_eq!(again.meta, finished.meta);
    assert_eq!(
        (again.attempts, again.upstream, again.model, again.elapsed),
        (2, "primary".into(), "glm-4-plus".into(), finished.elapsed)
    );
    assert!(again.gathered);
    assert_eq!(kept.named(), named());
}

#[test]
fn another_version_or_a_broken_record_is_nothing_kept() {
    let stored = KeptAnswer::new(&chat(), named()).encode();
    assert_eq!(
        KeptAnswer::decode(&stored.replace(r#""v":2"#, r#""v":3"#)),
        None
    );
    // The cache's version 1 record.
    let older = r#"{"v":1,"request":"{}","output":{"title":"宫保鸡丁"},"model":"glm","upstream":"primary","made_at":1796126791000}"#;
    assert_eq!(KeptAnswer::decode(older), None);
    assert_eq!(KeptAnswer::decode("{broken"), None);
}
