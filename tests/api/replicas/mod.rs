//! Several replicas sharing one real `redis-server` (contract 6.7): two gateways
//! in this process, each with its own state and prompts folder, in front of one
//! mock upstream that counts what the fleet sends. The tests are in the
//! submodules; the replica harness is here.

use std::path::PathBuf;
use std::time::Duration;

use ladle::config::{Config, RedisSettings, Secret};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::redis::RedisServer;
use crate::support::*;

mod budgets;
mod idempotency;
mod outage;
mod prompts;

/// The admin token of the replicas.
const TOKEN: &str = "fleet-admin-token-77";

/// One gateway of the fleet.
struct Replica {
    base: String,
    prompts_dir: PathBuf,
    client: reqwest::Client,
}

/// The settings every replica of a test shares: the Redis, a short claim lease.
fn redis_settings(redis: &RedisServer) -> RedisSettings {
    RedisSettings {
        url: Secret::new(redis.url()),
        prefix: "ladle:".into(),
        lease: Duration::from_millis(600),
    }
}

impl Replica {
    /// A replica on `redis` in front of `upstream`, with its own copy of the
    /// shipped prompts (plus `extra` files), changed by `adjust`.
    async fn start(
        redis: &RedisServer,
        upstream: &MockUpstream,
        extra: &[(&str, &str)],
        adjust: impl FnOnce(&mut Config),
    ) -> Replica {
        let prompts_dir = prompts_copy();
        for (name, text) in extra {
            std::fs::write(prompts_dir.join(format!("{name}.toml")), text).expect("extra prompt");
        }
        let mut config = fast_config(&prompts_dir);
        config.admin_token = Some(Secret::new(TOKEN));
        config.redis = Some(redis_settings(redis));
        adjust(&mut config);
        let base = spawn_gateway(config, &upstream.url).await;
        Replica {
            base,
            prompts_dir,
            client: reqwest::Client::new(),
        }
    }

    fn admin(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
    }

    /// `PUT /admin/prompts/{name}`, with `If-Match` if given.
    async fn put(&self, name: &str, text: &str, if_match: Option<&str>) -> reqwest::Response {
        let mut request = self
            .admin(Method::PUT, &format!("/admin/prompts/{name}"))
            .body(text.to_owned());
        if let Some(tag) = if_match {
            request = request.header("if-match", tag);
        }
        request.send().await.expect("replica answers")
    }

    /// The live prompt's ETag on this replica, if it has the prompt.
    async fn etag(&self, name: &str) -> Option<String> {
        let response = self
            .admin(Method::GET, &format!("/admin/prompts/{name}"))
            .send()
            .await
            .expect("replica answers");
        (response.status() == 200).then(|| etag_of(&response))
    }

    /// Waits until this replica serves `etag` (or nothing, for `None`) for `name`;
    /// how long that took. Fails past the contract's 2 s.
    async fn sees(&self, name: &str, etag: Option<&str>) -> Duration {
        let started = Instant::now();
        while self.etag(name).await.as_deref() != etag {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{} did not see {name} at {etag:?} within 2 s",
                self.base
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        started.elapsed()
    }

    /// A chat request, with an `Idempotency-Key` if given.
    async fn chat(&self, key: Option<&str>) -> reqwest::Response {
        let mut request = self
            .client
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&json!({"messages": [{"role": "user", "content": "今天吃什么"}]}));
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        request.send().await.expect("replica answers")
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("replica answers")
    }

    /// `/readyz`'s body.
    async fn ready(&self) -> Value {
        json_of(self.get("/readyz").await).await
    }

    /// One metric series, 0 when absent.
    async fn metric(&self, series: &str) -> f64 {
        let text = self.get("/metrics").await.text().await.expect("metrics");
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

/// The `ETag` header of a response.
fn etag_of(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .expect("an ETag header")
        .to_owned()
}

/// A small valid text prompt whose user message carries `marker`.
fn small_prompt(marker: &str) -> String {
    format!(
        "description = \"副本测试\"\noutput = \"text\"\n\n[variables.dish]\nrequired = true\n\n\
         [messages]\nuser = \"\"\"{marker}：{{{{ dish }}}}\"\"\"\n"
    )
}

/// The user message of the upstream request at `index`.
fn sent_user_message(upstream: &MockUpstream, index: usize) -> String {
    let requests = upstream.requests();
    let messages = requests[index].body["messages"]
        .as_array()
        .expect("messages")
        .clone();
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}
