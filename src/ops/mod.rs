//! Operating the gateway: request ids, metrics, logs, and the request observer.

pub mod metrics;
pub mod observe;
pub mod request_id;
pub mod telemetry;
