//! The prompt file format: TOML in, a compiled, checked [`Prompt`] out.
//!
//! A prompt is only accepted if it would work: the TOML parses, the fields make
//! sense, both templates compile, and they render with the declared defaults plus a
//! sample value for every required variable. The loader, `ladle check` and the
//! admin API all call [`Prompt::parse`], so they cannot disagree. No I/O, no clock.

use std::collections::BTreeMap;
use std::time::Duration;

use minijinja::{Environment, UndefinedBehavior};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::normalize::OutputKind;

/// A compiled prompt template, ready to render.
#[derive(Debug)]
pub struct Prompt {
    /// The task name (the file's stem).
    pub name: String,
    /// What the task is for.
    pub description: String,
    /// How the model's text is turned into output.
    pub output: OutputKind,
    /// Whole-request budget for this task.
    pub deadline: Option<Duration>,
    /// Budget a busy retry must leave for this task.
    pub min_remaining: Option<Duration>,
    /// The model, when the task names one.
    pub model: Option<String>,
    /// Passed to the upstream as they are.
    pub params: Map<String, Value>,
    /// Declared variables, by name.
    pub variables: BTreeMap<String, Variable>,
    /// The file's text, as saved.
    pub source: String,
    /// A hash of `source`.
    pub etag: String,
    templates: Environment<'static>,
    roles: Vec<&'static str>,
}

/// One declared template variable.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variable {
    /// Whether the caller must give it.
    #[serde(default)]
    pub required: bool,
    /// Used when the caller gives none.
    pub default: Option<Value>,
    /// Longest accepted value, in characters.
    pub max_chars: Option<usize>,
    /// The JSON type the value must have; absent accepts any.
    #[serde(rename = "type")]
    pub kind: Option<VariableType>,
}

/// JSON types a variable can require.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VariableType {
    /// A JSON string.
    String,
    /// A whole JSON number.
    Integer,
    /// Any JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A JSON array.
    Array,
}

/// Why a prompt file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PromptError {
    /// What is wrong.
    pub message: String,
    /// 1-based line in the file, where known.
    pub line: Option<usize>,
    /// 1-based column in the file, where known.
    pub column: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    #[serde(default)]
    description: String,
    output: OutputKind,
    deadline_ms: Option<u64>,
    min_remaining_ms: Option<u64>,
    model: Option<String>,
    #[serde(default)]
    params: Map<String, Value>,
    #[serde(default)]
    variables: BTreeMap<String, Variable>,
    messages: Messages,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Messages {
    system: Option<String>,
    user: String,
}

/// Whether `name` may name a task (`^[a-z0-9][a-z0-9_-]{0,63}$`). Checked before
/// any path is built from it.
pub fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

impl Prompt {
    /// Parses, compiles and test-renders a prompt file.
    pub fn parse(name: &str, source: &str) -> Result<Prompt, PromptError> {
        let file: PromptFile = toml::from_str(source).map_err(|e| toml_error(source, &e))?;
        check_fields(&file)?;
        let mut templates = Environment::new();
        templates.set_undefined_behavior(UndefinedBehavior::Strict);
        let mut roles = Vec::new();
        let sources = [
            ("system", file.messages.system),
            ("user", Some(file.messages.user)),
        ];
        for (role, text) in sources {
            let Some(text) = text else { continue };
            templates
                .add_template_owned(role, text)
                .map_err(|e| template_error(source, role, &e))?;
            roles.push(role);
        }
        let prompt = Prompt {
            name: name.to_owned(),
            description: file.description,
            output: file.output,
            deadline: file.deadline_ms.map(Duration::from_millis),
            min_remaining: file.min_remaining_ms.map(Duration::from_millis),
            model: file.model,
            params: file.params,
            variables: file.variables,
            source: source.to_owned(),
            etag: etag(source),
            templates,
            roles,
        };
        prompt.check_sample_render()?;
        Ok(prompt)
    }

    /// Renders every template with [`Prompt::sample_context`], placing a failure
    /// (an undefined variable, say) on its line in the file.
    fn check_sample_render(&self) -> Result<(), PromptError> {
        let context = minijinja::Value::from(minijinja::value::Serde(self.sample_context()));
        for role in &self.roles {
            self.templates
                .get_template(role)
                .and_then(|template| template.render(&context))
                .map_err(|e| {
                    let placed = template_error(&self.source, role, &e);
                    PromptError {
                        message: format!(
                            "messages.{role}: does not render with sample values: {}",
                            describe(&e)
                        ),
                        ..placed
                    }
                })?;
        }
        Ok(())
    }

    /// Renders the messages for a bound context of variables.
    pub fn render(&self, context: &Map<String, Value>) -> Result<Vec<Value>, String> {
        let context = minijinja::Value::from(minijinja::value::Serde(context));
        self.roles
            .iter()
            .map(|role| {
                let template = self
                    .templates
                    .get_template(role)
                    .map_err(|e| e.to_string())?;
                let content = template.render(&context).map_err(|e| describe(&e))?;
                Ok(serde_json::json!({"role": role, "content": content}))
            })
            .collect()
    }

    /// Defaults, plus a sample for each required variable: what `check` renders.
    pub fn sample_context(&self) -> Map<String, Value> {
        self.variables
            .iter()
            .filter_map(|(name, var)| {
                let value = var
                    .default
                    .clone()
                    .or_else(|| var.required.then(|| sample(var)))?;
                Some((name.clone(), value))
            })
            .collect()
    }
}

fn sample(var: &Variable) -> Value {
    match var.kind {
        Some(VariableType::Integer) => Value::from(2),
        Some(VariableType::Number) => Value::from(1.5),
        Some(VariableType::Boolean) => Value::from(true),
        Some(VariableType::Array) => serde_json::json!(["鸡蛋", "番茄"]),
        Some(VariableType::String) | None => Value::from("示例"),
    }
}

fn check_fields(file: &PromptFile) -> Result<(), PromptError> {
    let field = |message: String| PromptError {
        message,
        line: None,
        column: None,
    };
    if file.deadline_ms == Some(0) {
        return Err(field("deadline_ms must be greater than 0".into()));
    }
    if let (Some(deadline), Some(remaining)) = (file.deadline_ms, file.min_remaining_ms)
        && remaining >= deadline
    {
        return Err(field(
            "min_remaining_ms must be less than deadline_ms".into(),
        ));
    }
    for (name, var) in &file.variables {
        if let (Some(kind), Some(default)) = (var.kind, &var.default)
            && !kind.admits(default)
        {
            return Err(field(format!(
                "variables.{name}: default is not of type {kind:?}"
            )));
        }
    }
    Ok(())
}

impl VariableType {
    /// Whether `value` has this JSON type.
    pub fn admits(self, value: &Value) -> bool {
        match self {
            VariableType::String => value.is_string(),
            VariableType::Integer => value.is_i64() || value.is_u64(),
            VariableType::Number => value.is_number(),
            VariableType::Boolean => value.is_boolean(),
            VariableType::Array => value.is_array(),
        }
    }
}

/// A content hash, quoted as an HTTP entity tag (FNV-1a, 64 bits: enough to tell
/// versions of one small file apart, and stable across builds and restarts).
pub fn etag(source: &str) -> String {
    let hash = source.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("\"{hash:016x}\"")
}

fn toml_error(source: &str, error: &toml::de::Error) -> PromptError {
    let (line, column) = match error.span() {
        Some(span) => line_column(source, span.start),
        None => (None, None),
    };
    PromptError {
        message: error.message().to_owned(),
        line,
        column,
    }
}

/// A template error, placed in the file: minijinja counts lines within the template,
/// so the template's first line in the file is added.
fn template_error(source: &str, role: &str, error: &minijinja::Error) -> PromptError {
    let offset = template_start_line(source, role);
    PromptError {
        message: format!("messages.{role}: {}", describe(error)),
        line: error.line().map(|l| l + offset.unwrap_or(1) - 1),
        column: None,
    }
}

fn describe(error: &minijinja::Error) -> String {
    match error.detail() {
        Some(detail) => format!("{}: {detail}", error.kind()),
        None => error.kind().to_string(),
    }
}

/// The 1-based file line where the `role = """` template text starts. Only lines
/// after the `[messages]` header count (when there is one), so a `user` key in
/// `[params]` is not taken for the template.
fn template_start_line(source: &str, role: &str) -> Option<usize> {
    let header = source
        .lines()
        .position(|line| line.trim() == "[messages]")
        .map_or(0, |index| index + 1);
    source
        .lines()
        .enumerate()
        .skip(header)
        .find_map(|(index, line)| {
            let trimmed = line.trim_start();
            let rest = trimmed
                .strip_prefix(role)?
                .trim_start()
                .strip_prefix('=')?
                .trim_start();
            // A `"""` string starts on the next line when the opening quotes end the line.
            Some(if rest == "\"\"\"" || rest == "'''" {
                index + 2
            } else {
                index + 1
            })
        })
}

fn line_column(source: &str, offset: usize) -> (Option<usize>, Option<usize>) {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (Some(line), Some(column))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undefined_variable_is_reported_on_its_line_in_the_file() {
        let source = "output = \"text\"\n[params]\nuser = \"caller-1\"\n[messages]\nsystem = \"你好\"\nuser = \"\"\"\n第一行\n{{ missing }}\"\"\"\n";
        let error = Prompt::parse("t", source).expect_err("`missing` is undefined");
        assert!(error.message.contains("messages.user"), "{}", error.message);
        assert_eq!(error.line, Some(8));
    }

    #[test]
    fn a_toml_error_is_placed_by_characters_not_bytes() {
        let source = "description = \"菜谱\" x\noutput = \"text\"\n";
        let error = Prompt::parse("t", source).expect_err("trailing garbage");
        assert_eq!((error.line, error.column), (Some(1), Some(20)));
    }
}
