//! What the integration tests stand on: gateways started in this process or as
//! the real binary, the mock and real upstreams in front of which they run, the
//! real programs some tests need (redis-server, tinyproxy, Chromium), and one way
//! to wait for something to happen (`eventually`).
//!
//! A test file takes `use crate::support::*;` (the gateway, its requests, the
//! answers' readers, the fixtures and `eventually`) and, for the mock's scripts,
//! `use crate::support::mock_upstream::*;`.

pub mod answers;
pub mod browser;
pub mod config;
pub mod continuing;
pub mod drill;
pub mod events;
pub mod eventually;
pub mod fixtures;
pub mod flood;
pub mod gateway;
pub mod http;
pub mod mock_upstream;
pub mod process;
pub mod prometheus;
pub mod proxy;
pub mod raw;
pub mod receiver;
pub mod redis;
pub mod scripts;
pub mod tls;

use std::time::Duration;

pub use answers::*;
pub use config::*;
pub use eventually::*;
pub use fixtures::*;
pub use gateway::Gateway;
pub use http::*;

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// Milliseconds between two instants.
pub fn ms(from: tokio::time::Instant, to: tokio::time::Instant) -> u128 {
    to.saturating_duration_since(from).as_millis()
}

/// `n` milliseconds.
pub fn millis(n: u64) -> Duration {
    Duration::from_millis(n)
}
