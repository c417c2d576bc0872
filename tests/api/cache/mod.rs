//! The answer cache (contract 7.3) from outside: hits that make no upstream call,
//! misses kept, stale answers instead of retryable errors, in the JSON answer, the
//! event stream and a job's run; `Cache-Control`; the key following the prompt
//! and the variables; the admin routes; the bound, the 1 MiB limit, and the real
//! state file across a restart. Across replicas: `replicas.rs`.

mod answers;
mod kept;
mod keys;
mod replicas;

use serde_json::{Value, json};

use crate::support::gateway::Options;
use crate::support::mock_upstream::*;
use crate::support::*;

/// A small cached task whose answers are fresh for `ttl_ms` and serve instead
/// of an error for `stale_ms`.
pub fn cached_prompt(ttl_ms: u64, stale_ms: u64) -> String {
    format!(
        r#"description = "ideas, kept"
output = "json"

[cache]
ttl_ms = {ttl_ms}
stale_if_error_ms = {stale_ms}

[variables.dish]
required = true

[messages]
user = "给「{{{{ dish }}}}」出个主意"
"#
    )
}

/// A gateway in front of `upstream`, to be started, serving the cached task
/// `ideas` with its answers fresh for a minute and stale for another.
pub fn kept_a_minute(upstream: &MockUpstream) -> Options {
    Gateway::options()
        .mock(upstream)
        .prompt("ideas", &cached_prompt(60_000, 60_000))
}

/// An answer the cached task's `json` output accepts, naming `idea`.
pub fn idea(idea: &str) -> Script {
    sse_answer(&[&format!(r#"{{"idea": "{idea}"}}"#)])
}

/// Asks the cached task `name` about `dish`, with `cache_control` if any; the
/// status and body.
pub async fn ask(
    endpoint: &Endpoint,
    name: &str,
    dish: &str,
    cache_control: Option<&str>,
) -> (u16, Value) {
    let mut request = endpoint.post_request(&format!("/v1/tasks/{name}"), &json!({"dish": dish}));
    if let Some(value) = cache_control {
        request = request.header("cache-control", value);
    }
    let response = request.send().await.expect("the gateway answers");
    let status = response.status().as_u16();
    (status, json_of(response).await)
}

/// `(meta.cache, output.idea)` of a cached task's answer.
pub fn said(body: &Value) -> (String, String) {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    (text(&body["meta"]["cache"]), text(&body["output"]["idea"]))
}

/// The gateway's `ladle_cache_total` for `task` and `outcome`.
pub async fn counted(endpoint: &Endpoint, task: &str, outcome: &str) -> f64 {
    let series = format!("ladle_cache_total{{task=\"{task}\",outcome=\"{outcome}\"}}");
    metric_value(&endpoint.metrics().await, &series).unwrap_or(0.0)
}
