//! Chunks, error bodies and usage reports, on plain strings.

use super::*;

fn chunk(data: &str) -> Chunk {
    match parse(data.as_bytes(), false).expect("valid JSON") {
        Parsed::Chunk(chunk) => chunk,
        other => panic!("expected a chunk, got {other:?}"),
    }
}

#[test]
fn content_reasoning_content_and_reasoning_are_output() {
    assert!(chunk(r#"{"choices":[{"delta":{"content":"香"}}]}"#).is_output());
    assert!(chunk(r#"{"choices":[{"delta":{"reasoning_content":"想"}}]}"#).is_output());
    assert!(chunk(r#"{"choices":[{"delta":{"reasoning":"想"}}]}"#).is_output());
}

#[test]
fn a_refusal_and_every_part_of_a_tool_call_are_output() {
    assert!(chunk(r#"{"choices":[{"delta":{"refusal":"不行"}}]}"#).is_output());
    for piece in [
        r#"{"index":0,"id":"call_1","type":"function","function":{"name":"","arguments":""}}"#,
        r#"{"index":0,"function":{"name":"get_weather"}}"#,
        r#"{"index":0,"function":{"arguments":"{\""}}"#,
    ] {
        let data = format!(r#"{{"choices":[{{"delta":{{"tool_calls":[{piece}]}}}}]}}"#);
        assert!(chunk(&data).is_output(), "{data}");
    }
    let other_choice = r#"{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1"}}]}}]}"#;
    assert!(chunk(other_choice).is_output(), "in any choice");
}

#[test]
fn empty_tool_call_pieces_refusals_and_logprobs_alone_are_not_output() {
    let not_output = [
        r#"{"choices":[{"delta":{"refusal":""}}]}"#,
        r#"{"choices":[{"delta":{"refusal":null,"tool_calls":null}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
        r#"{"choices":[{"delta":{},"logprobs":{"content":[{"token":"a","logprob":-0.1}]}}]}"#,
    ];
    for data in not_output {
        assert!(!chunk(data).is_output(), "{data}");
    }
}

#[test]
fn tool_call_pieces_keep_their_index_and_a_whole_message_numbers_them_in_order() {
    let piece = chunk(
        r#"{"choices":[{"delta":{"tool_calls":[{"index":2,"id":"call_9","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}"#,
    );
    let extra = piece.first.extra.expect("a tool call");
    assert_eq!(
        extra.tool_calls,
        [ToolCallPiece {
            index: 2,
            id: Some("call_9".into()),
            kind: Some("function".into()),
            name: Some("f".into()),
            arguments: r#"{"a""#.into(),
        }]
    );
    let whole = r#"{"system_fingerprint":"fp_1","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"[]"}}]},"logprobs":{"content":[]},"finish_reason":"tool_calls"}]}"#;
    let Parsed::Chunk(whole) = parse(whole.as_bytes(), true).expect("valid") else {
        panic!("expected a chunk");
    };
    let extra = whole.first.extra.expect("tool calls");
    let numbered: Vec<_> = extra
        .tool_calls
        .iter()
        .map(|c| (c.index, c.id.as_deref()))
        .collect();
    assert_eq!(numbered, [(0, Some("a")), (1, Some("b"))]);
    assert_eq!(extra.logprobs, Some(serde_json::json!({"content": []})));
    let fingerprint = whole.meta.and_then(|m| m.system_fingerprint);
    assert_eq!(fingerprint.as_deref(), Some("fp_1"));
}

#[test]
fn role_only_empty_usage_only_and_finish_chunks_are_not_output() {
    let not_output = [
        r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
        r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
        r#"{"choices":[],"usage":{"total_tokens":3}}"#,
        r#"{"choices":null,"usage":{"total_tokens":3}}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"delta":{"content":null,"reasoning_content":""}}]}"#,
    ];
    for data in not_output {
        assert!(!chunk(data).is_output(), "{data}");
    }
}

#[test]
fn finish_reason_and_usage_are_kept() {
    let finish = chunk(r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#);
    assert_eq!(finish.first.finish_reason.as_deref(), Some("stop"));
    let usage = chunk(r#"{"choices":[],"usage":{"total_tokens":3}}"#);
    assert_eq!(
        usage.usage.as_deref(),
        Some(&serde_json::json!({"total_tokens": 3}))
    );
}

#[test]
fn done_and_error_chunks_are_recognised() {
    assert_eq!(parse(b"[DONE]", false), Ok(Parsed::Done));
    let busy = r#"{"error":{"code":"1305","message":"当前模型访问量较大，请稍后重试"}}"#;
    assert_eq!(
        parse(busy.as_bytes(), false),
        Ok(Parsed::Error("当前模型访问量较大，请稍后重试".into()))
    );
    assert_eq!(
        parse(br#"{"error":"overloaded"}"#, false),
        Ok(Parsed::Error("overloaded".into()))
    );
}

#[test]
fn a_non_streaming_completion_reads_like_one_chunk() {
    let body = r#"{"id":"c1","model":"m","choices":[{"message":{"role":"assistant","content":"hi","reasoning_content":"r"},"finish_reason":"stop"}]}"#;
    let Parsed::Chunk(whole) = parse(body.as_bytes(), true).expect("valid") else {
        panic!("expected a chunk");
    };
    assert_eq!(whole.first.content.as_deref(), Some("hi"));
    assert_eq!(whole.first.reasoning.as_deref(), Some("r"));
    assert_eq!(whole.meta.and_then(|m| m.model).as_deref(), Some("m"));
}

#[test]
fn every_choice_is_read_with_its_index() {
    let two = chunk(
        r#"{"choices":[{"index":1,"delta":{"content":"b"}},{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    );
    let choices: Vec<_> = two
        .choices()
        .map(|c| (c.index, c.content.as_deref(), c.reasoning.as_deref()))
        .collect();
    assert_eq!(choices, [(1, Some("b"), None), (0, None, None)]);
    assert_eq!(two.more[0].finish_reason.as_deref(), Some("stop"));
    let second_only =
        chunk(r#"{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{"reasoning":"想"}}]}"#);
    assert!(second_only.is_output(), "output in any choice is output");
}

#[test]
fn a_usage_with_an_unsound_count_is_dropped_whole() {
    for usage in [
        r#"{"prompt_tokens":18446744073709551615,"completion_tokens":2}"#,
        r#"{"prompt_tokens":1e+308}"#,
        r#"{"prompt_tokens":-5}"#,
        r#"{"prompt_tokens":1.5}"#,
        r#"{"prompt_tokens":"12"}"#,
        r#"{"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":-1}}"#,
        r#"[1]"#,
    ] {
        let data = format!(r#"{{"choices":[],"usage":{usage}}}"#);
        assert_eq!(chunk(&data).usage, None, "{usage}");
    }
    let sound = chunk(
        r#"{"choices":[],"usage":{"prompt_tokens":9007199254740991,"completion_tokens":0,"total_tokens":9007199254740991}}"#,
    );
    assert!(sound.usage.is_some());
}

#[test]
fn an_error_body_gives_its_message_code_and_type() {
    let body = br#"{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    assert_eq!(
        error_fields(body),
        Some(ErrorFields {
            message: Some("too long".into()),
            code: Some("context_length_exceeded".into()),
            kind: Some("invalid_request_error".into()),
        })
    );
    let numeric = error_fields(br#"{"error":{"code":1305,"message":"busy"}}"#).expect("error JSON");
    assert_eq!(numeric.code.as_deref(), Some("1305"));
    assert_eq!(error_fields(b"<html>bad gateway</html>"), None);
    assert_eq!(error_fields(br#"{"detail":"x"}"#), None);
}

#[test]
fn garbage_is_malformed() {
    assert!(parse(b"not json", false).is_err());
    // Bytes that are not UTF-8, inside a string or outside one.
    assert!(parse(b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}", true).is_err());
    assert!(parse(b"{\"choices\":[]}\xff", true).is_err());
}
