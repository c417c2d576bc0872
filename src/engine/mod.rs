//! The engine: what decides and does an attempt, knowing no HTTP and naming
//! nothing outside this folder (a tidy test reads every path). Today it holds the
//! pure policies and what they count with: the retry policy and the deadline
//! (`retry`), the circuit breaker (`breaker`), the family of attempt failures and
//! their one classification (`failure`), bulkheads and the one way in
//! (`bulkhead`), normalization of the model's text (`normalize`) and the depth
//! bound it applies (`nesting`), the metrics' handles (`metrics`), trace
//! context (`trace`), and the upstream client with its settings (`upstream`,
//! `secret`). The edge (routes, the request pipeline, the relays, the
//! stores) imports from here, never the other way round.

pub mod breaker;
pub mod budget;
pub mod bulkhead;
pub mod completion;
pub mod failure;
pub mod metrics;
pub mod nesting;
pub mod normalize;
pub mod retry;
pub mod secret;
pub mod trace;
pub mod upstream;
