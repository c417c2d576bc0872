//! What requests and upstreams put into the metrics: a label fed by requests
//! holds its first 100 values, then `other`; a usage report with an unsound
//! token count is dropped whole, neither reported nor counted.

use std::collections::BTreeSet;

use serde_json::json;

use crate::support::mock_upstream::*;
use crate::support::scripts::answer_with_usage;
use crate::support::*;

/// The `ladle_tokens_total` series of a scrape: each one's labels and value.
fn token_series(metrics: &str) -> Vec<(String, f64)> {
    metrics
        .lines()
        .filter(|line| line.starts_with("ladle_tokens_total{"))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The value of the `model` label in a series.
fn model_of(series: &str) -> &str {
    let start = series.find("model=\"").expect("a model label") + "model=\"".len();
    let rest = &series[start..];
    &rest[..rest.find('"').expect("a closing quote")]
}

#[tokio::test]
async fn the_model_label_holds_the_first_100_models_then_other() {
    let app = Gateway::start().await;
    app.upstream().fallback(answer_with_usage("好"));
    for n in 0..150 {
        let model = format!("model-{n:03}");
        let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        let response = app.post("/v1/chat/completions", &body).await;
        assert_eq!(response.status(), 200, "{model}");
    }
    let series = token_series(&app.metrics().await);
    let models: BTreeSet<&str> = series.iter().map(|(s, _)| model_of(s)).collect();
    let mut expected: BTreeSet<String> = (0..100).map(|n| format!("model-{n:03}")).collect();
    expected.insert("other".to_owned());
    let expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    assert_eq!(models, expected);
    // The 50 later models are counted, under `other`: 12 prompt tokens each.
    let other_prompt: f64 = series
        .iter()
        .filter(|(s, _)| model_of(s) == "other" && s.contains("kind=\"prompt\""))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(other_prompt, 600.0);
}

/// An answer whose usage report counts `prompt_tokens` as `count` (JSON text).
fn answer_with_prompt_tokens(count: &str) -> Script {
    let usage = format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":{count},"completion_tokens":3,"total_tokens":5}}}}"#
    );
    sse(vec![
        data(&content("好")),
        data(&finish()),
        data(&usage),
        data("[DONE]"),
    ])
}

/// Every token counted so far, all series together.
async fn tokens_counted(app: &Gateway) -> f64 {
    token_series(&app.metrics().await)
        .iter()
        .map(|(_, v)| v)
        .sum()
}

#[tokio::test]
async fn a_usage_with_a_token_count_out_of_range_or_not_an_integer_is_dropped_whole() {
    let app = Gateway::options()
        .prompt("tiny", &small_prompt("标记"))
        .start()
        .await;
    for count in [
        "18446744073709551615",
        "1e+308",
        "-5",
        "9007199254740992",
        "1.5",
    ] {
        app.upstream().push([
            answer_with_prompt_tokens(count),
            answer_with_prompt_tokens(count),
        ]);
        let chat = json_of(app.chat(false).await).await;
        assert_eq!(chat["choices"][0]["message"]["content"], "好", "{count}");
        assert_eq!(chat.get("usage"), None, "{count}: {chat}");
        let task = json_of(app.task("tiny", &json!({"dish": "鱼"})).await).await;
        assert_eq!(task["output"], "好", "{count}: {task}");
        assert_eq!(task["meta"].get("usage"), None, "{count}: {task}");
        assert_eq!(tokens_counted(&app).await, 0.0, "{count}");
    }
    // The largest sound count is reported and counted.
    app.upstream()
        .push([answer_with_prompt_tokens("9007199254740991")]);
    let chat = json_of(app.chat(false).await).await;
    let expected = json!({"prompt_tokens": 9_007_199_254_740_991_u64, "completion_tokens": 3, "total_tokens": 5});
    assert_eq!(chat["usage"], expected);
    let counted = tokens_counted(&app).await;
    assert_eq!(counted, 9_007_199_254_740_991.0 + 3.0, "{counted}");
}
