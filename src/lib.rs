//! ladle: a streaming LLM completion gateway.
//!
//! Codemap (the README's `## Architecture` has the whole map):
//! - `config`: one validated `Config` from TOML and `LADLE_*` variables.
//! - `upstream`: the only HTTP client (reqwest, one per worker thread); `sse` and
//!   `chunk` parse without HTTP.
//! - `retry`: the retry policy as pure functions.
//! - `completion`: the attempt loop under one deadline; the only code that sleeps.
//! - `relay`: progress → OpenAI stream/JSON or task events; the commit point.
//! - `prompts`: TOML prompt files, rendering, and the store behind an interface.
//! - `normalize`: the model's text → recipe/JSON/text output, pure.
//! - `routes`, `app`: thin HTTP handlers and wiring; `server`: the accept loop
//!   (header-read timeout, graceful drain).
//! - `ops`: metrics, logs, request ids. `demo`: a simulated upstream.
//! - `fleet`: prompts, idempotency records and retry budgets shared through Redis.
//!
//! Invariants: output state belongs to one attempt; nothing reaches a streaming
//! client before the first output; no task outlives its request; every error that
//! leaves a handler is an `ApiError`.

pub mod app;
pub mod background;
pub mod breaker;
pub mod budget;
pub mod cli;
pub mod completion;
pub mod config;
pub mod demo;
pub mod error;
pub mod failure;
pub mod fleet;
pub mod idempotency;
pub mod normalize;
pub mod ops;
pub mod prompts;
pub mod relay;
pub mod request;
pub mod retry;
pub mod routes;
pub mod server;
pub mod state;
pub mod upstream;

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
