//! How deep JSON may nest anywhere ladle accepts or keeps it (contract 10).
//!
//! serde_json refuses to read a document nested deeper than 128 levels, and ladle
//! keeps what it accepted inside records of its own (a job's request, its result,
//! a webhook's body) a few levels deeper. Without a lower bound at the edges, a
//! variable nested 126 levels deep is accepted and then cannot be read back: one
//! such row stopped every job for everyone. So a request body and a model's
//! output are refused past `MOST_LEVELS`, well below the reader's limit, and
//! every wrapper fits between the two.

use serde_json::Value;

/// The deepest nesting (objects and arrays) a request body or a task's output
/// may have.
pub const MOST_LEVELS: usize = 64;

/// Whether JSON text nests deeper than `MOST_LEVELS`, read byte by byte without
/// parsing (brackets inside strings are skipped). Text that is not JSON is
/// judged by its brackets alone: the parser that reads it next says the rest.
pub fn text_too_deep(text: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MOST_LEVELS {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Whether a value nests deeper than `MOST_LEVELS` (walked without recursion).
pub fn too_deep(value: &Value) -> bool {
    let mut level: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((value, depth)) = level.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        if depth > MOST_LEVELS {
            return true;
        }
        level.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!(
            "{{\"a\": {}1{}}}",
            "[".repeat(levels - 1),
            "]".repeat(levels - 1)
        )
    }

    #[test]
    fn text_and_value_agree_at_the_limit() {
        for (levels, deep) in [(1, false), (MOST_LEVELS, false), (MOST_LEVELS + 1, true)] {
            let text = nested(levels);
            let value: Value = serde_json::from_str(&text).expect("valid JSON");
            assert_eq!(text_too_deep(text.as_bytes()), deep, "{levels} as text");
            assert_eq!(too_deep(&value), deep, "{levels} as a value");
        }
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!(r#"{{"a": "{}\"[", "b": ["\\"]}}"#, "[{".repeat(100));
        assert!(!text_too_deep(text.as_bytes()), "{text}");
        let value: Value = serde_json::from_str(&text).expect("valid JSON");
        assert!(!too_deep(&value));
    }

    #[test]
    fn empty_containers_count_as_a_level() {
        let text = format!(
            "{}{}",
            "[".repeat(MOST_LEVELS + 1),
            "]".repeat(MOST_LEVELS + 1)
        );
        let value: Value = serde_json::from_str(&text).expect("valid JSON");
        assert!(text_too_deep(text.as_bytes()));
        assert!(too_deep(&value));
    }
}
