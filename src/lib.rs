//! ladle: a streaming LLM completion gateway.
//!
//! Codemap (docs/architecture.md has the whole map and a request's way through it):
//! - `app`: the router and its layers.
//! - `background`: the one owner of background tasks, drained at shutdown.
//! - `breaker`: one upstream's circuit breaker, pure.
//! - `budget`: retry budgets behind the `Budget` trait (local, and shared by a fleet).
//! - `cache`: the answer cache: kept task answers (the state file, or Redis).
//! - `bulkhead`: at most N at once, by name, per scope (client, task, upstream).
//! - `clients`: client keys: who may call `/v1/*`, and each key's share.
//! - `cli`: the command line; the only reader of the environment and config file.
//! - `completion`: the attempt loop under one deadline; the only code that sleeps.
//! - `config`: one validated `Config`; `settings` is the one table of defaults.
//! - `demo`: the simulated upstream of `ladle demo`.
//! - `error`: `ApiError`, rendered into a response in one place.
//! - `failure`: what happened to an attempt, classified once.
//! - `fleet`: the Redis handle and its health.
//! - `idempotency`: keyed requests' records (memory and Redis) and detached runs.
//! - `jobs`: background jobs and webhooks; their store (SQLite, or Redis for a fleet).
//! - `nesting`: how deep JSON may nest where ladle accepts or keeps it.
//! - `normalize`: the model's text → recipe/JSON/text output, pure.
//! - `ops`: metrics, the request observer, request ids and bodies, logs.
//! - `prompts`: prompt files, rendering, and the stores (files and Redis).
//! - `relay`: progress → OpenAI stream/JSON or task events; the commit point.
//! - `request`: one pipeline for both completion routes, key lookup included.
//! - `retry`: the retry policy as pure functions.
//! - `routes`: thin handlers that turn HTTP into a `request::Call`.
//! - `server`: serving, the accept loop and its limits, the drain on shutdown.
//! - `state`: `AppState` and its wiring.
//! - `state_file`: the SQLite state file's handle: one writer thread, group commit.
//! - `trace`: W3C trace context: the caller's trace passed on, one span per attempt.
//! - `upstream`: the only HTTP client (reqwest); the order of upstreams, SSE, chunks.
//!
//! Invariants (`tests/tidy` checks the mechanical ones): one clock; output state per
//! attempt, and nothing reaches a streaming client before the first output; nothing on
//! the request path spawns; every error leaving a handler is an `ApiError`; Redis is
//! never needed to answer; no import cycles, no file over 400 lines.

pub mod app;
pub mod background;
pub mod budget;
pub mod cache;
pub mod cli;
pub mod clients;
pub mod config;
pub mod demo;
pub mod engine;
pub mod error;
pub mod fleet;
pub mod idempotency;
pub mod jobs;
pub mod kept;
pub mod ops;
pub mod prompts;
pub mod relay;
pub mod request;
pub mod routes;
pub mod server;
mod start;
pub mod state;
pub mod state_file;
pub mod store_down;
pub mod wall;

/// What the unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    /// Property tests with `cases` cases, their regressions kept beside the source
    /// file (`*.proptest-regressions`), not in a folder of their own.
    pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
        proptest::test_runner::Config {
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
            )),
            ..proptest::test_runner::Config::with_cases(cases)
        }
    }
}
