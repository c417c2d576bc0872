//! ladle: a streaming LLM completion gateway.
//!
//! Codemap (docs/architecture.md has the whole map and a request's way through it):
//! - `engine`: what decides and does an attempt, and names nothing outside it: the
//!   attempt loop (`completion`, the only code that sleeps between attempts), the
//!   retry policy, breakers, local budgets, failure classes, bulkheads, the
//!   upstream client with SSE and chunks, normalization, metrics, trace context.
//! - `app`: the router and its layers; `server`: the sockets and the drain.
//! - `start`: the one start of every background loop; `background`: their owner,
//!   drained at shutdown; `state`: `AppState` and its wiring.
//! - `routes`: thin handlers that turn HTTP into a `request::Call`; `request`: one
//!   pipeline for every completion route, key lookup included.
//! - `relay`: progress → OpenAI stream/JSON, task events or Responses events; the
//!   commit point; replays.
//! - `kept`: a finished answer as it is kept, one versioned record.
//! - `idempotency`, `cache`, `jobs`, `prompts`, `clients`, `budget`: the concepts
//!   with their backends inside (memory, the SQLite state file, Redis).
//! - `fleet`: the Redis handle and its health; `state_file`: the SQLite handle;
//!   `store_down`: what either says when it could not do what was asked.
//! - `config`: one validated `Config`; `cli`: the only reader of the environment.
//! - `error`: `ApiError`, mapped and rendered in one place.
//! - `ops`: the request observer, request ids and bodies, logs.
//! - `wall`: wall-clock time; `demo`: the simulated upstream of `ladle demo`.
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
