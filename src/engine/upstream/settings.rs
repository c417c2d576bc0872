//! What an upstream is, as the configuration gives it: its settings, its proxy,
//! and the one error a client that cannot be built from them ends with (naming
//! the setting, never its value). `config` reads them from the environment and
//! the file; the engine only uses them.

use super::continuation::Continuation;
use crate::engine::secret::Secret;

/// Which proxy the upstream is reached through (`LADLE_UPSTREAM_PROXY`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum UpstreamProxy {
    /// Unset: the standard `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` / `NO_PROXY`
    /// variables apply, as for any reqwest client.
    #[default]
    FromEnvironment,
    /// `none`: no proxy, whatever the environment says.
    Off,
    /// An explicit `http://`, `https://` or `socks5://` URL; it may hold credentials.
    Url(Secret),
}

/// One upstream, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSettings {
    /// `^[a-z0-9][a-z0-9_-]{0,31}$`; in metrics, logs, events and `meta`.
    pub name: String,
    /// Base URL; requests go to `{url}/chat/completions`.
    pub url: String,
    /// Sent as `Authorization: Bearer …`.
    pub api_key: Secret,
    /// The proxy to this upstream.
    pub proxy: UpstreamProxy,
    /// Replaces the `model` of every call to this upstream.
    pub model: Option<String>,
    /// Lower is tried first.
    pub priority: u32,
    /// Shares first attempts among usable upstreams of one priority.
    pub weight: u32,
    /// Attempts in a row this upstream gets before a retry moves on (6.1).
    pub attempts: u32,
    /// Attempts in flight to it at once on this replica (contract 8).
    pub max_inflight: Option<u32>,
    /// How it continues a partial answer (contract 11.4).
    pub continuation: Continuation,
}

impl UpstreamSettings {
    /// The single-upstream settings' shorthand: one upstream named `default`.
    pub fn single(url: &str, api_key: Secret, proxy: UpstreamProxy) -> Self {
        UpstreamSettings {
            name: "default".to_owned(),
            url: url.to_owned(),
            api_key,
            proxy,
            model: None,
            priority: 0,
            weight: 1,
            attempts: 1,
            max_inflight: None,
            continuation: Continuation::None,
        }
    }
}

/// A setting the upstream client cannot use: the setting's name, and why (never
/// its value, which may be a key or hold a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct SetupError {
    /// The environment name of the setting.
    pub key: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

/// A `SetupError` for `key`.
pub fn invalid(key: &'static str, problem: impl Into<String>) -> SetupError {
    SetupError {
        key,
        problem: problem.into(),
    }
}
