//! Binding a caller's variables to a prompt and building the upstream request.
//!
//! Variables are checked before any upstream call, so a bad request costs nothing
//! upstream: a missing required variable, a value of the wrong JSON type or one over
//! `max_chars` (counted in characters, not bytes) is a `422` naming the variable.
//! Variables the prompt does not declare are dropped.

use serde_json::{Map, Value};

use std::sync::{Arc, LazyLock};

use tokio::sync::Semaphore;

use super::spec::{Prompt, RenderFailed};
use crate::error::ApiError;

/// The messages and parameters a prompt renders to.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// Chat messages, in order.
    pub messages: Vec<Value>,
    /// Upstream parameters from the prompt file.
    pub params: Map<String, Value>,
}

/// Checks the caller's variables against the declarations and fills in defaults.
pub fn bind(prompt: &Prompt, given: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    let mut bound = Map::new();
    for (name, var) in &prompt.variables {
        let invalid = |problem: String| ApiError::InvalidVariables {
            name: name.clone(),
            problem,
        };
        let value = match given.get(name).filter(|v| !v.is_null()) {
            Some(value) => value.clone(),
            None => match (&var.default, var.required) {
                (Some(default), _) => default.clone(),
                (None, true) => return Err(invalid("is required".into())),
                (None, false) => continue,
            },
        };
        if let Some(kind) = var.kind
            && !kind.admits(&value)
        {
            return Err(invalid(format!(
                "must be of type {}",
                format!("{kind:?}").to_lowercase()
            )));
        }
        if let Some(max) = var.max_chars {
            let chars = match &value {
                Value::String(text) => text.chars().count(),
                other => other.to_string().chars().count(),
            };
            if chars > max {
                return Err(invalid(format!(
                    "is {chars} characters long; at most {max} are allowed"
                )));
            }
        }
        bound.insert(name.clone(), value);
    }
    Ok(bound)
}

/// Binds and renders: what an upstream call, a preview and `check` all use. A
/// render past its limits is the caller's doing (its variables): `422
/// invalid_variables`.
pub fn render(prompt: &Prompt, given: &Map<String, Value>) -> Result<Rendered, ApiError> {
    let context = bind(prompt, given)?;
    rendered(prompt, prompt.render(&context))
}

/// The messages of a render, or what made it fail as a contract error.
fn rendered(
    prompt: &Prompt,
    messages: Result<Vec<Value>, RenderFailed>,
) -> Result<Rendered, ApiError> {
    let messages = messages.map_err(|failed| ApiError::InvalidVariables {
        name: "*".into(),
        problem: match failed {
            RenderFailed::Limits | RenderFailed::Longer => RenderFailed::Limits.to_string(),
            RenderFailed::Error(problem) => format!("the template failed to render: {problem}"),
        },
    })?;
    Ok(Rendered {
        messages,
        params: prompt.params.clone(),
    })
}

/// Renders at once, process-wide: one per CPU core, so that hostile templates, each
/// within its step budget, cannot together take every core or much memory.
static RENDERS: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(2, usize::from)));

/// `render`, off the event loop when it is long: a render within `QUICK_FUEL`
/// steps is made here; one that needs more goes to the blocking pool, since it
/// takes up to its whole step budget and the streams on this worker's event loop
/// must keep their pace meanwhile. It ends within that budget even if its client
/// leaves.
pub async fn render_off_loop(
    prompt: Arc<Prompt>,
    given: Map<String, Value>,
) -> Result<Rendered, ApiError> {
    let failed = || ApiError::InvalidVariables {
        name: "*".into(),
        problem: "the template failed to render".into(),
    };
    // Most renders take a few thousand steps: here, at once, without the two
    // thread hand-offs a blocking render costs.
    let context = bind(&prompt, &given)?;
    match prompt.render_quick(&context) {
        Err(RenderFailed::Longer) => {}
        quick => return rendered(&prompt, quick),
    }
    let _turn = RENDERS.acquire().await.map_err(|_| failed())?;
    tokio::task::spawn_blocking(move || rendered(&prompt, prompt.render(&context)))
        .await
        .map_err(|_| failed())?
}
