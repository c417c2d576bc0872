//! The request's deadline (contract 6.4, 6.5): the caller's `X-Request-Timeout-Ms`,
//! the first-output timeout, and the deadline ending every request on time,
//! however the upstream floods or the client reads.

mod bounds;
mod timeouts;
