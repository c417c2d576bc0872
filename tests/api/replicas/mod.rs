//! The fleet as a whole on one real `redis-server` (contract 6.7): Redis going
//! away, at start, under load and for longer than a lease, and replicas whose
//! clocks disagree. Each concept's own Redis tests are in its folder's `replicas`
//! module (`cache::replicas`, `jobs::replicas`, …), so `--skip replicas::` skips
//! every test that needs `redis-server`.

mod clocks;
mod long_outage;
mod outage;
