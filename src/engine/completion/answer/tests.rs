//! Gathering an answer, chunk by chunk.

use super::*;
use crate::engine::upstream::chunk::Choice;

fn text(index: u32, content: &str) -> Chunk {
    Chunk {
        first: Choice {
            index,
            content: Some(content.into()),
            ..Choice::default()
        },
        ..Chunk::default()
    }
}

#[test]
fn choices_are_gathered_apart_by_index() {
    let mut answer = Answer::new(Gather::Whole(100));
    answer.absorb(&text(0, "AAA")).expect("fits");
    answer.absorb(&text(1, "aaa")).expect("fits");
    let both = Chunk {
        first: Choice {
            index: 0,
            content: Some(" BBB".into()),
            finish_reason: Some("stop".into()),
            ..Choice::default()
        },
        more: vec![Choice {
            index: 1,
            content: Some("bbb".into()),
            finish_reason: Some("length".into()),
            ..Choice::default()
        }],
        ..Chunk::default()
    };
    answer.absorb(&both).expect("fits");
    let texts: Vec<_> = answer
        .choices
        .iter()
        .map(|c| (c.index, c.content.as_str(), c.finish_reason.as_deref()))
        .collect();
    assert_eq!(
        texts,
        [(0, "AAA BBB", Some("stop")), (1, "aaabbb", Some("length"))]
    );
    assert_eq!(answer.content(), "AAA BBB");
}

#[test]
fn a_choice_past_the_limit_or_the_most_choices_overflows() {
    let mut answer = Answer::new(Gather::Whole(5));
    answer
        .absorb(&text(0, "12345"))
        .expect("exactly the limit fits");
    assert_eq!(answer.absorb(&text(0, "6")), Err(Overflow::TooLarge(5)));
    assert_eq!(
        Answer::new(Gather::Whole(5)).absorb(&text(MAX_CHOICES, "x")),
        Err(Overflow::Index(MAX_CHOICES))
    );
}

#[test]
fn a_relayed_stream_gathers_no_text() {
    let mut answer = Answer::new(Gather::Nothing);
    answer
        .absorb(&text(0, &"x".repeat(10_000)))
        .expect("no limit");
    assert!(answer.choices.is_empty());
    assert!(!answer.gathered());
}

#[test]
fn a_kept_stream_gathers_up_to_its_bound_then_stops_without_failing() {
    let mut answer = Answer::new(Gather::ToKeep(5));
    answer.absorb(&text(0, "番")).expect("gathers");
    assert_eq!((answer.content(), answer.gathered()), ("番", true));
    answer
        .absorb(&text(0, "茄"))
        .expect("past the bound, no failure");
    answer.absorb(&text(0, "x")).expect("nor after");
    assert!(!answer.gathered(), "what it has is not the whole answer");
    assert_eq!(answer.content(), "");
}

fn parsed(data: &str) -> Chunk {
    match crate::engine::upstream::chunk::parse(data.as_bytes(), true).expect("valid JSON") {
        crate::engine::upstream::chunk::Parsed::Chunk(chunk) => chunk,
        other => panic!("expected a chunk, got {other:?}"),
    }
}

fn tool_piece(index: u32, head: Option<(&str, &str)>, arguments: &str) -> Chunk {
    let head = match head {
        Some((id, name)) => {
            format!(r#""id":"{id}","type":"function","function":{{"name":"{name}","#)
        }
        None => r#""function":{"#.to_owned(),
    };
    let arguments = serde_json::to_string(arguments).expect("a string");
    parsed(&format!(
        r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},{head}"arguments":{arguments}}}}}]}}}}]}}"#
    ))
}

#[test]
fn tool_calls_are_assembled_by_index_with_their_arguments_in_order() {
    let mut answer = Answer::new(Gather::Whole(1_000));
    for chunk in [
        tool_piece(0, Some(("call_a", "get_weather")), ""),
        tool_piece(0, None, r#"{"city":"#),
        tool_piece(1, Some(("call_b", "get_weather")), r#"{"ci"#),
        tool_piece(0, None, r#""巴黎"}"#),
        tool_piece(1, None, r#"ty":"东京"}"#),
        parsed(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#),
    ] {
        answer.absorb(&chunk).expect("fits");
    }
    let choice = &answer.choices[0];
    let calls: Vec<_> = choice
        .tool_calls_in_order()
        .into_iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.kind(),
                c.name.as_str(),
                c.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "function", "get_weather", r#"{"city":"巴黎"}"#),
            ("call_b", "function", "get_weather", r#"{"city":"东京"}"#),
        ]
    );
    assert!(choice.content_is_null(), "only tools were called");
    assert_eq!(choice.finish_reason.as_deref(), Some("tool_calls"));
}

#[test]
fn content_then_a_tool_call_keeps_both_and_the_content_is_not_null() {
    let mut answer = Answer::new(Gather::Whole(1_000));
    answer.absorb(&text(0, "让我查一下。")).expect("fits");
    answer
        .absorb(&tool_piece(0, Some(("call_a", "f")), "{}"))
        .expect("fits");
    let choice = &answer.choices[0];
    assert_eq!(choice.content, "让我查一下。");
    assert_eq!(choice.tool_calls.len(), 1);
    assert!(!choice.content_is_null());
}

#[test]
fn a_refusal_and_logprobs_are_concatenated_in_order() {
    let mut answer = Answer::new(Gather::Whole(1_000));
    for data in [
        r#"{"choices":[{"delta":{"refusal":"抱歉，"},"logprobs":{"content":null,"refusal":[{"token":"抱歉","logprob":-0.1}]}}]}"#,
        r#"{"choices":[{"delta":{"refusal":"我不能帮忙。"},"logprobs":{"content":null,"refusal":[{"token":"我","logprob":-0.2}]}}]}"#,
    ] {
        answer.absorb(&parsed(data)).expect("fits");
    }
    let choice = &answer.choices[0];
    assert_eq!(choice.refusal, "抱歉，我不能帮忙。");
    assert!(choice.content_is_null(), "a refusal alone has null content");
    let logprobs = choice.logprobs.as_ref().expect("logprobs came");
    let refusal = logprobs.refusal.as_deref().unwrap_or_default();
    let tokens: Vec<_> = refusal.iter().map(|l| l["token"].clone()).collect();
    assert_eq!(tokens, [serde_json::json!("抱歉"), serde_json::json!("我")]);
    assert_eq!(logprobs.content, None, "no content list came");
}

#[test]
fn a_tool_calls_arguments_count_toward_the_bound() {
    let mut answer = Answer::new(Gather::Whole(20));
    answer
        .absorb(&tool_piece(0, Some(("id", "f")), "0123456789"))
        .expect("13 bytes fit");
    assert_eq!(
        answer.absorb(&tool_piece(0, None, "0123456789")),
        Err(Overflow::TooLarge(20))
    );
}

#[test]
fn the_system_fingerprint_is_kept_whichever_chunk_brings_it() {
    let mut answer = Answer::new(Gather::Whole(100));
    answer
        .absorb(&parsed(
            r#"{"id":"c","choices":[{"delta":{"role":"assistant"}}]}"#,
        ))
        .expect("fits");
    answer
        .absorb(&parsed(
            r#"{"id":"c","system_fingerprint":"fp_9","choices":[{"delta":{"content":"x"}}]}"#,
        ))
        .expect("fits");
    assert_eq!(answer.meta.system_fingerprint.as_deref(), Some("fp_9"));
}
