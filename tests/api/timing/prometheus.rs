//! The shipped alert rules and dashboard against real Prometheus tools: the
//! rules pass `promtool check rules` and their unit tests (`promtool test
//! rules`), each alert with a case that fires and one that stays silent; and a
//! real Prometheus, scraping a real ladle whose upstreams turn busy, fires the
//! breaker-open and all-upstreams-busy alerts and answers every query of the
//! dashboard with data (so its queries name real series).
//!
//! Needs Debian's `prometheus` package (`prometheus` and `promtool`); without
//! it these tests fail, saying what to install.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::jobs::{ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::prometheus::{Prometheus, operations_file};
use crate::support::redis::RedisServer;
use crate::support::scripts::{answer_with_usage, recipe_answer};
use crate::support::*;

/// Runs `promtool` with `args` in `docs/operations/`; it must succeed.
fn promtool(args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(operations_file(""))
        .output()
        .expect("promtool is installed (Debian package `prometheus`; .ci/run installs it)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?}:\n{said}");
    said
}

/// The alert names of the rule file.
fn alert_names(rules: &str) -> BTreeSet<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|name| name.trim().to_owned())
        .collect()
}

/// Per alert of the unit tests: whether some case expects it firing, and whether
/// some case expects it silent (an `alertname` without `exp_alerts`).
fn cases(tests: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let mut current: Option<(String, bool)> = None;
    for line in tests.lines().map(str::trim) {
        if line.starts_with("- eval_time:") || line.starts_with("- name:") {
            found.extend(current.take());
        } else if let Some(name) = line.strip_prefix("alertname:") {
            current = Some((name.trim().to_owned(), false));
        } else if line.starts_with("exp_alerts:")
            && let Some((_, fires)) = current.as_mut()
        {
            *fires = line != "exp_alerts: []";
        }
    }
    found.extend(current);
    found
}

#[test]
fn the_rules_pass_promtool_and_every_alert_has_a_case_that_fires_and_one_that_does_not() {
    let checked = promtool(&["check", "rules", "alerts.yml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&["test", "rules", "alerts.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    let rules = std::fs::read_to_string(operations_file("alerts.yml")).expect("alerts.yml");
    let tests = std::fs::read_to_string(operations_file("alerts.test.yml")).expect("tests");
    let names = alert_names(&rules);
    assert!(names.len() >= 9, "{names:?}");
    let cases = cases(&tests);
    for name in &names {
        let fires = cases.iter().any(|(n, fires)| n == name && *fires);
        let silent = cases.iter().any(|(n, fires)| n == name && !*fires);
        assert!(
            fires && silent,
            "{name}: firing case {fires}, silent case {silent}"
        );
    }
}

/// Every PromQL expression of the dashboard, wherever its panel sits.
fn dashboard_queries(node: &Value, into: &mut Vec<String>) {
    match node {
        Value::Object(fields) => {
            if let Some(Value::String(expr)) = fields.get("expr") {
                into.push(expr.clone());
            }
            fields.values().for_each(|v| dashboard_queries(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| dashboard_queries(v, into)),
        _ => {}
    }
}

/// A busy refusal, as the flaky upstreams say it.
fn busy() -> Script {
    status(
        503,
        r#"{"error": {"message": "当前模型访问量较大，请稍后重试"}}"#,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_fires_the_upstream_alerts_and_runs_every_dashboard_query() {
    let mut redis = RedisServer::start().await;
    let (a, b) = (MockUpstream::start().await, MockUpstream::start().await);
    // A good start on a, then both upstreams turn busy.
    a.push([answer_with_usage("好"), recipe_answer(), ideas()]);
    a.fallback(busy());
    b.push([sse_answer(&["b 好"])]);
    b.fallback(busy());
    let gateway = Gateway::options()
        .redis(&redis)
        .upstreams(primary_and_backup(&a.url, &b.url))
        .adjust(|c| {
            c.breaker_settings = breaker(2, 60_000);
            c.jobs.runner.max_runs = 1;
        })
        .start()
        .await;
    let target = gateway.base.trim_start_matches("http://").to_owned();
    let prometheus = Prometheus::start(&[target]).await;

    // The good start: a keyed chat with usage, a recipe kept then hit, a job.
    assert_eq!(gateway.chat_keyed("order-1").await.status(), 200);
    let dish = json!({"dish": "香酥鸭"});
    for cache in ["miss", "hit"] {
        let answer = json_of(gateway.task("recipe", &dish).await).await;
        assert_eq!(answer["meta"]["cache"], cache, "{answer}");
    }
    let id = job_id(submit(&gateway, "蛋").await).await;
    assert_eq!(job_after(&gateway, &id, 3000).await["status"], "succeeded");
    // a turns busy: one answer falls back to b; then b is busy too, and both
    // breakers open.
    assert_eq!(gateway.chat(false).await.status(), 200);
    let open = |name: &str| format!("ladle_breaker_state{{upstream=\"{name}\"}}");
    eventually(Duration::from_secs(5), "both breakers open", async || {
        let _ = gateway.chat(false).await;
        gateway.metric(&open("a")).await == 1.0 && gateway.metric(&open("b")).await == 1.0
    })
    .await;
    // Redis goes away: its errors are counted.
    redis.stop();

    let firing = |alerts: &[Value], name: &str, upstream: Option<&str>| {
        alerts.iter().any(|alert| {
            alert["labels"]["alertname"] == name
                && alert["state"] == "firing"
                && upstream.is_none_or(|u| alert["labels"]["upstream"] == u)
        })
    };
    let expected = [
        ("LadleBreakerOpen", Some("a")),
        ("LadleBreakerOpen", Some("b")),
        ("LadleAllUpstreamsBusy", None),
    ];
    let what = "the breaker-open and all-upstreams-busy alerts firing";
    eventually(Duration::from_secs(40), what, async || {
        let alerts = prometheus.alerts().await;
        expected
            .iter()
            .all(|(name, upstream)| firing(&alerts, name, *upstream))
    })
    .await;
    for rule in prometheus.rules().await {
        assert_eq!(rule["health"], "ok", "{rule}");
    }

    let text = std::fs::read_to_string(operations_file("grafana-ladle.json")).expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    dashboard_queries(&dashboard, &mut queries);
    assert!(queries.len() >= 20, "{queries:?}");
    let mut empty = Vec::new();
    for expr in &queries {
        if prometheus.query(expr).await.is_empty() {
            empty.push(expr.as_str());
        }
    }
    assert!(empty.is_empty(), "queries with no data: {empty:#?}");
}
