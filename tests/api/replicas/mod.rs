//! Several replicas sharing one real `redis-server` (contract 6.7): two gateways
//! in this process, each with its own state and prompts folder, in front of one
//! mock upstream that counts what the fleet sends (`Gateway::replica`).

mod budgets;
mod cache;
mod clients;
mod clocks;
mod idempotency;
mod job_bounds;
mod job_events;
mod job_store;
mod jobs;
mod long_outage;
mod outage;
mod persistence;
mod prompts;
mod responses;
