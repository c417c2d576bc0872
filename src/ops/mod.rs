//! Operating the gateway: request ids, logs, the request observer and the facts
//! it reports, and the limit on slow request bodies. (The metrics' handles are
//! the engine's: `engine::metrics`.)

pub mod facts;
pub mod observe;
pub mod request_body;
pub mod request_id;
pub mod telemetry;
