//! Failover as operators expect it (contract 2, 6.1, 6.2): per-upstream attempts
//! before moving on, does-not-fit rejections routed to the next upstream, what the
//! upstream said in `upstream_rejected`, and breaker openings that stay short while
//! probes fail fast.

mod attempts;
mod breaker_times;
mod rejections;
mod stalls;
