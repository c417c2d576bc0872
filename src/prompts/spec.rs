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

pub use super::place::PromptError;
use super::place::{describe, template_error, toml_error};
use crate::cache::CachePolicy;
use crate::engine::normalize::OutputKind;

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
    /// `[cache]`: how long the task's answers serve again (off by default).
    pub cache: CachePolicy,
    /// Requests of this task in flight at once on this replica (contract 8).
    pub max_inflight: Option<u32>,
    /// Declared variables, by name.
    pub variables: BTreeMap<String, Variable>,
    /// The file's text, as saved.
    pub source: String,
    /// A hash of `source`.
    pub etag: String,
    templates: Environment<'static>,
    /// The same templates with `QUICK_FUEL`: a render that fits is made on the
    /// request's own thread.
    quick: Environment<'static>,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    #[serde(default)]
    description: String,
    output: OutputKind,
    deadline_ms: Option<u64>,
    min_remaining_ms: Option<u64>,
    model: Option<String>,
    max_inflight: Option<u32>,
    #[serde(default)]
    params: Map<String, Value>,
    #[serde(default)]
    cache: CachePolicy,
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
        if source.len() > MAX_SOURCE_BYTES {
            return Err(PromptError {
                message: format!("the prompt file is over {MAX_SOURCE_BYTES} bytes"),
                line: None,
                column: None,
            });
        }
        let file: PromptFile = toml::from_str(source).map_err(|e| toml_error(source, &e))?;
        check_fields(&file)?;
        let mut templates = Environment::new();
        templates.set_undefined_behavior(UndefinedBehavior::Strict);
        templates.set_fuel(Some(RENDER_FUEL));
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
            cache: file.cache,
            max_inflight: file.max_inflight,
            variables: file.variables,
            source: source.to_owned(),
            etag: etag(source),
            quick: with_fuel(&templates, QUICK_FUEL),
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
                    let why = match e.kind() {
                        minijinja::ErrorKind::OutOfFuel => RenderFailed::Limits.to_string(),
                        _ => describe(&e),
                    };
                    PromptError {
                        message: format!(
                            "messages.{role}: does not render with sample values: {why}"
                        ),
                        ..placed
                    }
                })?;
        }
        // The limits, on the whole render (the roles together).
        self.render(&self.sample_context())
            .map(drop)
            .map_err(|failed| PromptError {
                message: format!("does not render with sample values: {failed}"),
                line: None,
                column: None,
            })
    }

    /// Renders the messages for a bound context of variables, within the limits:
    /// `RENDER_FUEL` steps per template, `MAX_RENDERED_BYTES` of text in all.
    pub fn render(&self, context: &Map<String, Value>) -> Result<Vec<Value>, RenderFailed> {
        self.render_in(&self.templates, context, RenderFailed::Limits)
    }

    /// `render` within `QUICK_FUEL` steps per template: cheap enough for the
    /// request's own thread; `RenderFailed::Longer` if it needs more.
    pub fn render_quick(&self, context: &Map<String, Value>) -> Result<Vec<Value>, RenderFailed> {
        self.render_in(&self.quick, context, RenderFailed::Longer)
    }

    fn render_in(
        &self,
        templates: &Environment<'static>,
        context: &Map<String, Value>,
        out_of_fuel: RenderFailed,
    ) -> Result<Vec<Value>, RenderFailed> {
        let context = minijinja::Value::from(minijinja::value::Serde(context));
        let mut written = 0;
        self.roles
            .iter()
            .map(|role| {
                let template = templates
                    .get_template(role)
                    .map_err(|e| RenderFailed::Error(e.to_string()))?;
                let content = template.render(&context).map_err(|e| match e.kind() {
                    minijinja::ErrorKind::OutOfFuel => out_of_fuel.clone(),
                    _ => RenderFailed::Error(describe(&e)),
                })?;
                written += content.len();
                if written > MAX_RENDERED_BYTES {
                    return Err(RenderFailed::Limits);
                }
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
    if file.max_inflight == Some(0) {
        return Err(field("max_inflight must be at least 1".into()));
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

/// The largest prompt file (contract 10).
pub const MAX_SOURCE_BYTES: usize = 1 << 20;

/// The steps (minijinja's fuel: instructions, and about one per 64 bytes of data
/// made) one template may take to render: on this project's 2-core machine about
/// 40 ms of loop work, or about 100 ms of string building (a template doubling a
/// string), and at most about 128 MiB of data (docs/performance.md has the
/// measurement).
pub const RENDER_FUEL: u64 = 2_000_000;

/// The steps a render may take on the request's own thread (about 0.4 ms of loop
/// work at most, by `RENDER_FUEL`'s measure); one that needs more is made again
/// on the blocking pool with the whole budget. The shipped prompts need a few
/// thousand (a test says so).
pub const QUICK_FUEL: u64 = 20_000;

/// The templates of `templates` with `fuel` steps each.
fn with_fuel(templates: &Environment<'static>, fuel: u64) -> Environment<'static> {
    let mut copy = templates.clone();
    copy.set_fuel(Some(fuel));
    copy
}

/// The most text a render may produce, every message together.
pub const MAX_RENDERED_BYTES: usize = 1 << 20;

/// Why a render gave no messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderFailed {
    /// It ran past its step budget or produced more than `MAX_RENDERED_BYTES`.
    #[error("the template exceeded its limits")]
    Limits,
    /// The template failed (an undefined variable, a bad filter argument).
    #[error("{0}")]
    Error(String),
    /// It needs more steps than `QUICK_FUEL`: render it with the whole budget.
    #[error("the template needs more than a quick render")]
    Longer,
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
