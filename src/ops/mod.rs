//! Operating the gateway: request ids, logs, the facts a request's log line
//! reports (written by handlers and relays, read by the observer in `app`), and
//! the limit on slow request bodies. (The metrics' handles are
//! the engine's: `engine::metrics`.)

pub mod connection;
pub mod facts;
pub mod request_body;
pub mod request_id;
pub mod telemetry;
