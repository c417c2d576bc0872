//! Background jobs across replicas sharing one real `redis-server` (contract 7.1
//! "Replicas", 11.1, 11.2): runs, the Redis job store itself, event streams, the
//! fleet's bounds, and a Redis without its append-only file.

mod bounds;
mod events;
mod persistence;
mod runs;
mod store;
