//! Integration tests: the real server on an ephemeral port, in front of a mock
//! upstream the test controls. One binary, as in zero2prod.

mod admin;
mod breakers;
mod browser;
mod chat;
mod cli;
mod drill;
mod failures;
mod fallback;
mod fleet;
mod helpers;
mod idempotency;
mod keepalive;
mod logs;
mod mock_upstream;
mod ops;
mod process;
mod proxy;
mod redis_server;
mod replicas;
mod requests;
mod resilience;
mod shutdown;
mod tasks;
mod tls;
mod upstream;
mod usage;
mod webdriver;
