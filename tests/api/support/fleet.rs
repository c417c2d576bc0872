//! Helpers for gateways in front of several upstreams, addressed by base URL.

use ladle::config::{Config, Secret, UpstreamProxy, UpstreamSettings};
use serde_json::json;

use super::gateway::*;

/// An upstream of the list, with the tests' key and no proxy.
pub fn upstream(name: &str, url: &str, priority: u32, weight: u32) -> UpstreamSettings {
    UpstreamSettings {
        name: name.to_owned(),
        priority,
        weight,
        ..UpstreamSettings::single(url, Secret::new(API_KEY), UpstreamProxy::Off)
    }
}

/// Upstream `a` first (priority 0) and `b` behind it (priority 1).
pub fn primary_and_backup(a: &str, b: &str) -> Vec<UpstreamSettings> {
    vec![upstream("a", a, 0, 1), upstream("b", b, 1, 1)]
}

/// A gateway with the fast config in front of `upstreams`, changed by `adjust`;
/// its base URL.
pub async fn serve(upstreams: Vec<UpstreamSettings>, adjust: impl FnOnce(&mut Config)) -> String {
    let prompts_dir = prompts_copy();
    let mut config = fast_config(&prompts_dir);
    config.upstreams = upstreams;
    adjust(&mut config);
    serve_config(config, std::future::pending()).await.0
}

/// A chat request with one user message.
pub async fn chat(base: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("gateway answers")
}

/// One series of the gateway's `/metrics`, 0 when absent.
pub async fn metric(base: &str, series: &str) -> f64 {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}
