//! Operating the gateway: request ids, metrics, logs, the request observer, and
//! the limit on slow request bodies.

pub mod facts;
pub mod metrics;
pub mod observe;
pub mod request_body;
pub mod request_id;
pub mod telemetry;
