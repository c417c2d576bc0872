//! Integration tests: the real server on an ephemeral port, in front of a mock
//! upstream the test controls. One binary, as in zero2prod.

mod accounts;
mod admin;
mod bounds;
mod breaker;
mod browser;
mod budget;
mod bulkheads;
mod cache;
mod chat;
mod cli;
mod clients;
mod continuation;
mod deadline;
mod drill;
mod fallback;
mod idempotency;
mod jobs;
mod keepalive;
mod logs;
mod openai;
mod ops;
mod proxy;
mod readme;
mod replicas;
mod requests;
mod retry;
mod shutdown;
mod support;
mod tasks;
mod timing;
mod tls;
mod upstream;
mod usage;
