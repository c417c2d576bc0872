//! Turns the model's whole text into the output a task promises (contract 3.3).
//!
//! Models answer in prose, wrap JSON in Markdown fences, mix key names and spell
//! numbers in words. This module is the one place that absorbs that variety, so
//! everything after it sees one shape per output kind.
//!
//! Invariants:
//! - Everything here is a pure function of its input: no I/O, no clock, no
//!   global state. The caller decides what an [`InvalidOutput`] means for retries.
//! - Nothing is invented. Text that does not contain what the task needs gives
//!   an [`InvalidOutput`], never a guessed value.
//! - Object key order follows the model's text. This relies on `serde_json`'s
//!   `preserve_order` feature, which the crate enables.
//!
//! Submodules: [`extract`] finds the JSON value in free text, [`numbers`] reads
//! human-written quantities, and [`recipe`] applies the recipe rules.

pub mod extract;
pub mod numbers;
pub mod recipe;

use serde_json::Value;

/// Which shape the task's output takes (from the prompt file's `output` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputKind {
    /// A recipe object, normalized by [`recipe::normalize_recipe`].
    Recipe,
    /// The first complete JSON object or array in the text, unchanged.
    Json,
    /// The model's text as one JSON string.
    Text,
}

impl OutputKind {
    /// The prompt file's name for it.
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Recipe => "recipe",
            OutputKind::Json => "json",
            OutputKind::Text => "text",
        }
    }
}

/// Why the model's text could not be turned into the task's output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidOutput {
    /// The text holds no complete JSON object or array.
    #[error("no complete JSON value in the model's text")]
    NoJson,
    /// The text holds a JSON value, but no object that could be a recipe.
    #[error("the recipe is not a JSON object")]
    NotAnObject,
    /// The recipe lacks a required field, or has it as `null`.
    #[error("the recipe has no `{0}`")]
    MissingField(&'static str),
    /// The JSON nests deeper than ladle keeps (`nesting::MOST_LEVELS`).
    #[error(
        "the JSON nests deeper than {} levels",
        crate::engine::nesting::MOST_LEVELS
    )]
    TooDeep,
}

/// Turns the model's whole text into the task's output value.
///
/// `Text` keeps the text as it is. `Json` returns the first complete JSON object
/// or array. `Recipe` takes the first complete JSON object and applies the
/// recipe rules; when the text holds JSON but no object at all, the error is
/// [`InvalidOutput::NotAnObject`] rather than [`InvalidOutput::NoJson`].
pub fn normalize(kind: OutputKind, text: &str) -> Result<Value, InvalidOutput> {
    let output = normalized(kind, text)?;
    match crate::engine::nesting::too_deep(&output) {
        true => Err(InvalidOutput::TooDeep),
        false => Ok(output),
    }
}

fn normalized(kind: OutputKind, text: &str) -> Result<Value, InvalidOutput> {
    match kind {
        OutputKind::Text => Ok(Value::String(text.to_owned())),
        OutputKind::Json => extract::first_json_value(text).ok_or(InvalidOutput::NoJson),
        OutputKind::Recipe => match extract::first_json_object(text) {
            Some(object) => recipe::normalize_recipe(object),
            None if extract::first_json_value(text).is_some() => Err(InvalidOutput::NotAnObject),
            None => Err(InvalidOutput::NoJson),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_golden_sample_normalizes_to_the_expected_output() {
        // Arrange
        let samples = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
        let raw = std::fs::read_to_string(format!("{samples}recipe-raw-model-output.txt"))
            .expect("the raw sample exists beside the crate");
        let expected = std::fs::read_to_string(format!("{samples}recipe-normalized.json"))
            .expect("the normalized sample exists beside the crate");
        let expected: Value = serde_json::from_str(&expected).expect("the sample is JSON");

        // Act
        let output = normalize(OutputKind::Recipe, &raw).expect("the sample is a valid recipe");

        // Assert
        assert_eq!(output, expected);
        let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        assert_eq!(
            keys(&output),
            keys(&expected),
            "key order follows the model"
        );
    }

    #[test]
    fn normalize_dispatches_on_the_output_kind() {
        let text = "说明 [1, 2] 然后 {\"a\": 1}";
        assert_eq!(normalize(OutputKind::Text, text), Ok(json!(text)));
        assert_eq!(normalize(OutputKind::Json, text), Ok(json!([1, 2])));
        assert_eq!(
            normalize(OutputKind::Json, "no json"),
            Err(InvalidOutput::NoJson)
        );
        assert_eq!(
            normalize(OutputKind::Recipe, text),
            Err(InvalidOutput::MissingField("title"))
        );
        assert_eq!(
            normalize(OutputKind::Recipe, "[1, 2]"),
            Err(InvalidOutput::NotAnObject)
        );
        assert_eq!(
            normalize(OutputKind::Recipe, "没有 JSON"),
            Err(InvalidOutput::NoJson)
        );
        assert_eq!(
            normalize(OutputKind::Recipe, "{\"title\": \"x\", \"steps\": ["),
            Err(InvalidOutput::NoJson)
        );
    }

    #[test]
    fn output_nested_past_the_limit_is_invalid() {
        let levels = crate::engine::nesting::MOST_LEVELS;
        let nested = |n: usize| format!("答：{}1{}", "[".repeat(n), "]".repeat(n));
        assert!(normalize(OutputKind::Json, &nested(levels)).is_ok());
        assert_eq!(
            normalize(OutputKind::Json, &nested(levels + 1)),
            Err(InvalidOutput::TooDeep)
        );
        // What serde_json still reads (127 levels) is refused all the same.
        assert_eq!(
            normalize(OutputKind::Json, &nested(127)),
            Err(InvalidOutput::TooDeep)
        );
    }

    #[test]
    fn output_kinds_are_written_in_lowercase() {
        let kinds: Vec<OutputKind> =
            serde_json::from_str(r#"["recipe", "json", "text"]"#).expect("lowercase names parse");
        assert_eq!(
            kinds,
            [OutputKind::Recipe, OutputKind::Json, OutputKind::Text]
        );
        assert!(serde_json::from_str::<OutputKind>(r#""Recipe""#).is_err());
    }
}
