//! A real Prometheus (Debian package `prometheus`; `.ci/run` installs it) on a
//! free loopback port with a data folder of its own, scraping and evaluating
//! every second, with ladle's shipped alert rules; stopped by PID when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::eventually::eventually;
use super::fixtures::temp_dir;
use super::free_port;

/// The rule file and dashboard the repository ships.
pub fn operations_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/operations")
        .join(name)
}

/// A running Prometheus.
pub struct Prometheus {
    base: String,
    child: Child,
    client: reqwest::Client,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port`) every second, with the
    /// shipped alert rules evaluated every second; panics, naming the package,
    /// if it is not installed.
    pub async fn start(targets: &[String]) -> Prometheus {
        let dir = temp_dir("prometheus");
        let rules = operations_file("alerts.yml");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - '{}'\n\
             scrape_configs:\n  - job_name: ladle\n    static_configs:\n      - targets: [{}]\n",
            rules.display(),
            targets.join(", ")
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("log file"))
            .spawn()
            .expect("prometheus is installed (Debian package `prometheus`; .ci/run installs it)");
        let prometheus = Prometheus {
            base: format!("http://127.0.0.1:{port}"),
            child,
            client: reqwest::Client::new(),
        };
        let ready = format!("{}/-/ready", prometheus.base);
        let log = dir.join("prometheus.log");
        let what = super::Lazy(|| {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            format!("Prometheus to be ready; its log:\n{said}")
        });
        eventually(Duration::from_secs(20), what, async || {
            let answer = prometheus.client.get(&ready).send().await;
            answer.is_ok_and(|r| r.status().is_success())
        })
        .await;
        prometheus
    }

    /// `GET /api/v1/{path}` with `query`; its `data`, which must be there.
    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let url = format!("{}/api/v1/{path}", self.base);
        let response = self.client.get(url).query(query).send().await;
        let body: Value = response
            .expect("Prometheus answers")
            .json()
            .await
            .expect("a JSON answer");
        assert_eq!(body["status"], "success", "{path} {query:?}: {body}");
        body["data"].clone()
    }

    /// The alerts now, each with its `labels` and `state` (`pending`, `firing`).
    pub async fn alerts(&self) -> Vec<Value> {
        let data = self.api("alerts", &[]).await;
        data["alerts"].as_array().cloned().unwrap_or_default()
    }

    /// An instant query's result vector.
    pub async fn query(&self, expr: &str) -> Vec<Value> {
        let data = self.api("query", &[("query", expr)]).await;
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// The rules Prometheus loaded, each with its `health` and `lastError`.
    pub async fn rules(&self) -> Vec<Value> {
        let data = self.api("rules", &[]).await;
        let groups = data["groups"].as_array().cloned().unwrap_or_default();
        groups
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
