//! What the integration tests stand on: gateways started in this process or as
//! the real binary, the mock and real upstreams in front of which they run, and
//! the real programs some tests need (redis-server, tinyproxy, Chromium).

pub mod browser;
pub mod fleet;
pub mod gateway;
pub mod mock_upstream;
pub mod process;
pub mod proxy;
pub mod redis;
pub mod tls;

pub use gateway::*;
