//! One log line and one counter per request, whatever route answered.
//!
//! The arrival instant is stored in the request, so a handler's deadline starts
//! when the request arrived, not when its body finished reading.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio::time::Instant;

use super::metrics::Metrics;
use super::request_id::RequestId;

/// When the request arrived.
#[derive(Debug, Clone, Copy)]
pub struct Arrival(pub Instant);

/// Counts and logs each request by route and status.
pub async fn observe(State(metrics): State<Metrics>, mut request: Request, next: Next) -> Response {
    let arrived = Instant::now();
    request.extensions_mut().insert(Arrival(arrived));
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let request_id = RequestId::of(&request);
    let method = request.method().clone();
    let response = next.run(request).await;
    let elapsed = arrived.elapsed();
    let status = response.status().as_u16();
    metrics.request(&route, status, elapsed);
    tracing::info!(
        request_id = %request_id,
        route = %route,
        method = %method,
        status,
        elapsed_ms = elapsed.as_millis() as u64,
        "request answered"
    );
    response
}
