//! The official clients as the oracle: the `openai` Python SDK and LangChain's
//! `ChatOpenAI` (pinned in `tests/sdk/requirements.txt`, in the venv
//! `.ci/sdk-venv` makes) drive the real gateway in front of a mock upstream that
//! streams tool calls, refusals and log-probabilities, and errors; each scenario
//! of `tests/sdk/openai_chat.py` prints what the SDK parsed, and the test holds it
//! to what the upstream sent.

use serde_json::{Value, json};

use super::two_tool_calls;
use crate::support::mock_upstream::*;
use crate::support::*;

/// The venv's Python; the test fails, saying how to make it, when it is missing.
fn python() -> std::path::PathBuf {
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/sdk-venv/bin/python");
    assert!(
        python.exists(),
        "the SDK oracle needs its venv: run `bash .ci/sdk-venv` (Python 3 and PyPI; \
         .ci/run does it), or skip these tests with `--skip openai::sdk:: --skip openai::responses`"
    );
    python
}

/// Runs one scenario of the chat oracle against `app`; what it printed.
async fn oracle(app: &Gateway, scenario: &str) -> Value {
    oracle_of("openai_chat.py", app, scenario).await
}

/// Runs one scenario of the oracle `script` (in `tests/sdk/`) against `app`;
/// what it printed.
pub async fn oracle_of(script: &str, app: &Gateway, scenario: &str) -> Value {
    run_oracle(python(), script, app, scenario).await
}

/// Runs one scenario of `script` (in `tests/sdk/`, run by `program` from the
/// crate's folder) against `app`; what it printed.
pub async fn run_oracle(
    program: impl AsRef<std::ffi::OsStr>,
    script: &str,
    app: &Gateway,
    scenario: &str,
) -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = std::process::Command::new(program);
    command
        .arg(root.join("tests/sdk").join(script))
        .arg(scenario)
        .current_dir(root)
        .env("LADLE_BASE_URL", app.url("/v1"))
        .env("LADLE_MODEL_NAME", "test-model");
    // Off the runtime's thread: the gateway it calls runs on it.
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the wait ends")
        .expect("the oracle's program runs");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{scenario} failed:\n{said}");
    serde_json::from_slice(&output.stdout).expect("one line of JSON")
}

fn expected_calls() -> Value {
    json!([
        {"id": "call_a", "type": "function", "name": "get_weather",
         "arguments": "{\"city\":\"巴黎\"}", "parsed": {"city": "巴黎"}},
        {"id": "call_b", "type": "function", "name": "get_weather",
         "arguments": "{\"city\":\"东京\"}", "parsed": {"city": "东京"}},
    ])
}

fn tool_stream() -> Script {
    let mut steps = vec![data(&role())];
    steps.extend(two_tool_calls().iter().map(|e| data(e)));
    sse(steps)
}

#[tokio::test]
async fn the_python_sdk_reads_assembled_tool_calls() {
    let app = Gateway::start().await;
    app.upstream().push([tool_stream()]);
    let parsed = oracle(&app, "tools").await;
    assert_eq!(parsed["tool_calls"], expected_calls(), "{parsed}");
    assert_eq!(parsed["content"], json!(null));
    assert_eq!(parsed["finish_reason"], "tool_calls");
    assert_eq!(parsed["system_fingerprint"], "fp_t");
}

#[tokio::test]
async fn the_python_sdk_and_its_stream_helper_read_relayed_tool_calls() {
    let app = Gateway::start().await;
    app.upstream().push([tool_stream(), tool_stream()]);
    let parsed = oracle(&app, "tools_stream").await;
    assert_eq!(parsed["tool_calls"], expected_calls(), "{parsed}");
    assert_eq!(
        parsed["tool_call_deltas"], 5,
        "each piece relayed: {parsed}"
    );
    assert_eq!(parsed["finish_reason"], "tool_calls");
    let helper: Vec<Value> = expected_calls()
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| json!({"id": c["id"], "name": c["name"], "arguments": c["arguments"]}))
        .collect();
    assert_eq!(parsed["helper_tool_calls"], json!(helper));
}

#[tokio::test]
async fn the_python_sdk_reads_a_refusal_and_its_logprobs() {
    let app = Gateway::start().await;
    let piece = json!({"choices": [{"index": 0, "delta": {"refusal": "抱歉，不行。"},
        "logprobs": {"content": null,
            "refusal": [{"token": "抱歉", "logprob": -0.1, "bytes": [230], "top_logprobs": []}]}}]});
    app.upstream().push([sse(vec![
        data(&role()),
        data(&piece.to_string()),
        data(&finish()),
        data("[DONE]"),
    ])]);
    let parsed = oracle(&app, "refusal").await;
    assert_eq!(parsed["refusal"], "抱歉，不行。", "{parsed}");
    assert_eq!(parsed["content"], json!(null));
    assert_eq!(parsed["logprobs"]["refusal"][0]["token"], "抱歉");
}

#[tokio::test]
async fn the_python_sdk_raises_bad_request_and_not_found_for_the_upstreams_400_and_404() {
    let app = Gateway::start().await;
    let error = |code: &str| {
        json!({"error": {"message": "no", "type": "invalid_request_error", "code": code}})
            .to_string()
    };
    for (upstream, scenario, class) in [
        (400, "bad_request", "BadRequestError"),
        (404, "not_found", "NotFoundError"),
    ] {
        app.upstream()
            .push([status(upstream, &error("context_length_exceeded"))]);
        let parsed = oracle(&app, scenario).await;
        assert_eq!(parsed["class"], class, "{parsed}");
        assert_eq!(parsed["status"], upstream);
        assert_eq!(parsed["body"]["code"], "upstream_rejected");
        assert_eq!(parsed["body"]["upstream"]["status"], upstream);
    }
}

#[tokio::test]
async fn the_python_sdk_lists_and_retrieves_models() {
    let app = Gateway::start().await;
    let parsed = oracle(&app, "models").await;
    assert_eq!(parsed["ids"], json!(["test-model"]), "{parsed}");
    assert_eq!(parsed["owned_by"], json!(["ladle"]));
    assert_eq!(parsed["retrieved"], "test-model");
}

#[tokio::test]
async fn langchains_bind_tools_invoke_returns_the_tool_call() {
    let app = Gateway::start().await;
    app.upstream().push([tool_stream()]);
    let parsed = oracle(&app, "langchain_tools").await;
    let calls = parsed["tool_calls"].as_array().expect("tool calls");
    let seen: Vec<(&Value, &Value, &Value)> = calls
        .iter()
        .map(|c| (&c["id"], &c["name"], &c["args"]))
        .collect();
    assert_eq!(
        seen,
        [
            (
                &json!("call_a"),
                &json!("get_weather"),
                &json!({"city": "巴黎"})
            ),
            (
                &json!("call_b"),
                &json!("get_weather"),
                &json!({"city": "东京"})
            ),
        ],
        "{parsed}"
    );
    assert_eq!(parsed["invalid_tool_calls"], json!([]));
}
