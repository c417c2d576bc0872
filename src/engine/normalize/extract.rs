//! Finds the first complete JSON value in free-form model text.
//!
//! Models put their JSON inside prose and Markdown code fences, and sometimes
//! stop in the middle of an object when they reach their token limit. This
//! module only locates a complete value; it never repairs or guesses. Its
//! invariant: whatever it returns is exactly what `serde_json` parses from one
//! contiguous slice of the input that starts at a `{` or `[` and ends at the
//! matching close.
//!
//! Bracket matching is string-aware, so braces inside JSON strings (including
//! strings with escaped quotes) do not count. The scan works on bytes. That is
//! safe for UTF-8 text because every byte it looks at (`{`, `}`, `[`, `]`, `"`
//! and `\`) is ASCII, and ASCII bytes never occur inside a multi-byte character.
//!
//! Each candidate start is scanned once up to its matching close and parsed at
//! most once, so one candidate costs O(n). The worst case, many openings that
//! never close, is O(n²); model answers are a few kilobytes, and a well-formed
//! answer returns at its first candidate.

use serde_json::{Map, Value};

/// Returns the first complete JSON object or array in `text`, or `None`.
///
/// Candidates are tried in order of their opening `{` or `[`. A candidate whose
/// brackets never close, or whose slice does not parse, is skipped, so a
/// truncated value yields `None` unless a later candidate is complete.
pub fn first_json_value(text: &str) -> Option<Value> {
    first_parsed(text, |byte| byte == b'{' || byte == b'[')
}

/// Returns the first complete JSON object in `text`, or `None`.
///
/// Only `{` starts a candidate. An array is therefore never returned, but an
/// object inside an array still is: `[{"title": "x"}]` yields the inner object.
pub fn first_json_object(text: &str) -> Option<Map<String, Value>> {
    match first_parsed(text, |byte| byte == b'{')? {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// Tries every byte accepted by `is_start` as a candidate and returns the
/// first one whose bracketed slice parses.
fn first_parsed(text: &str, is_start: impl Fn(u8) -> bool) -> Option<Value> {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .enumerate()
        .filter(|&(_, &byte)| is_start(byte))
        .find_map(|(start, _)| {
            let end = matching_close(bytes, start)?;
            // Both ends are ASCII bytes, so the slice lies on character
            // boundaries; `get` keeps that an invariant rather than a panic.
            serde_json::from_str::<Value>(text.get(start..=end)?).ok()
        })
}

/// Returns the index of the bracket that closes the one at `start`, or `None`
/// when the text ends first.
///
/// Any closing bracket lowers the depth, whatever its kind. A mismatched pair
/// such as `{]` is caught later, because its slice does not parse.
fn matching_close(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth: usize = 0;
    let mut in_string = false;
    let mut escaped = false;
    for (index, &byte) in bytes.iter().enumerate().skip(start) {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                // The byte at `start` is an opening bracket, so the depth is at
                // least one here; `checked_sub` only guards misuse.
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn value(text: &str) -> Option<Value> {
        first_json_value(text)
    }

    fn object(text: &str) -> Option<Value> {
        first_json_object(text).map(Value::Object)
    }

    #[test]
    fn a_fenced_block_with_prose_around_it_is_found() {
        let text = "好的，菜谱如下：\n\n```json\n{\"title\": \"香酥鸭\"}\n```\n\n祝您愉快！";
        assert_eq!(object(text), Some(json!({"title": "香酥鸭"})));
    }

    #[test]
    fn prose_before_and_after_a_bare_object_is_ignored() {
        let text = "Sure! Here it is: {\"a\": 1, \"b\": [2, 3]} Hope that helps.";
        assert_eq!(value(text), Some(json!({"a": 1, "b": [2, 3]})));
    }

    #[test]
    fn braces_inside_strings_do_not_count() {
        assert_eq!(value(r#"x {"a": "}{"} y"#), Some(json!({"a": "}{"})));
        assert_eq!(
            value(r#"{"a": "[[[", "b": "]"}"#),
            Some(json!({"a": "[[[", "b": "]"}))
        );
    }

    #[test]
    fn escaped_quotes_and_backslashes_inside_strings_are_handled() {
        assert_eq!(
            value(r#"{"a": "say \"}\" now"}"#),
            Some(json!({"a": "say \"}\" now"}))
        );
        assert_eq!(value(r#"{"a": "C:\\"} tail }"#), Some(json!({"a": "C:\\"})));
    }

    #[test]
    fn truncated_input_gives_none() {
        assert_eq!(value(r#"```json {"title": "香酥鸭", "steps": ["炸"#), None);
        assert_eq!(object(r#"{"title": "x", "tips": ["a""#), None);
        assert_eq!(value(""), None);
        assert_eq!(value("no json here at all"), None);
    }

    #[test]
    fn a_complete_value_inside_a_truncated_one_is_still_found() {
        let text = r#"{"title": "x", "nutrition": {"calories": 720}, "steps": ["#;
        assert_eq!(object(text), Some(json!({"calories": 720})));
    }

    #[test]
    fn the_first_of_two_objects_wins() {
        assert_eq!(value(r#"{"a": 1} and {"b": 2}"#), Some(json!({"a": 1})));
    }

    #[test]
    fn a_candidate_that_does_not_parse_is_skipped() {
        assert_eq!(value(r#"use {braces} or {"a": 1}"#), Some(json!({"a": 1})));
        assert_eq!(value(r#"{"a": 1] {"b": 2}"#), Some(json!({"b": 2})));
    }

    #[test]
    fn arrays_are_values_but_not_objects() {
        assert_eq!(
            value(r#"list: [1, "二", {"c": 3}] end"#),
            Some(json!([1, "二", {"c": 3}]))
        );
        assert_eq!(
            object(r#"list: [1, "二", {"c": 3}] end"#),
            Some(json!({"c": 3}))
        );
        assert_eq!(object("[1, 2, 3]"), None);
    }

    #[test]
    fn multibyte_text_around_and_inside_is_handled() {
        let text = "前言【注意】😀 {\"菜名\": \"香酥鸭🦆\", \"说明\": \"「外酥」{里嫩}\"} 后记😀";
        assert_eq!(
            value(text),
            Some(json!({"菜名": "香酥鸭🦆", "说明": "「外酥」{里嫩}"}))
        );
    }

    #[test]
    fn key_order_of_the_model_is_preserved() {
        let found = first_json_object(r#"{"z": 1, "a": 2, "m": 3}"#).expect("object is complete");
        let keys: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config(256))]

        #[test]
        fn any_string_value_survives_a_round_trip_through_prose(
            content in any::<String>(),
            before in "[^\\[{]{0,20}",
            after in any::<String>(),
        ) {
            // Arrange: prose that opens no candidate, then one serialized object.
            let expected = json!({"text": content, "n": [1, 2]});
            let text = format!("{before}```json\n{expected}\n```{after}");

            // Act and assert: the exact object comes back, whatever it holds.
            prop_assert_eq!(first_json_value(&text), Some(expected.clone()));
            prop_assert_eq!(first_json_object(&text).map(Value::Object), Some(expected));
        }

        #[test]
        fn extraction_never_panics_on_arbitrary_text(text in any::<String>()) {
            let _ = first_json_value(&text);
            let _ = first_json_object(&text);
        }
    }
}
