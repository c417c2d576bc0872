//! The client keys' side of HTTP: a route layer on `/v1/*` (only when
//! `LADLE_CLIENT_KEYS_FILE` is set) that answers `401`, `403` and `429` before
//! anything else runs, in that order, and tells the handlers and the request's
//! log line who the caller is.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use super::Clients;
use crate::engine::bulkhead::Slot;
use crate::error::ApiError;

/// Who made the request: the client key's name (`""` when no key was accepted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

/// A slot the request holds until its response body ends (a stream's whole
/// life); the request observer keeps it that long.
#[derive(Debug, Clone)]
pub struct HeldUntilEnd(pub Arc<Mutex<Option<Slot>>>);

/// The gate of every `/v1/*` route.
pub async fn gate(
    State(clients): State<Arc<Clients>>,
    mut request: Request,
    next: Next,
) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let client = match clients.authenticate(authorization) {
        Ok(client) => client,
        Err(error) => return refused(error, ""),
    };
    let path = request.uri().path();
    if let Some(task) = path.strip_prefix("/v1/tasks/")
        && let Err(error) = client.may_run(task)
    {
        return refused(error, client.name());
    }
    // Completion requests and job submits count; job reads and cancels do not.
    let counts = request.method() == Method::POST;
    let slot = match counts {
        true => match clients.admit(&client, Instant::now()) {
            Ok(slot) => slot,
            Err(error) => return refused(error, client.name()),
        },
        false => None,
    };
    let caller = Caller(client.name().to_owned());
    request.extensions_mut().insert(caller.clone());
    let mut response = next.run(request).await;
    response.extensions_mut().insert(caller);
    if let Some(slot) = slot {
        let held = HeldUntilEnd(Arc::new(Mutex::new(Some(slot))));
        response.extensions_mut().insert(held);
    }
    response
}

/// A refusal, naming the caller for the log line and the metrics.
fn refused(error: ApiError, name: &str) -> Response {
    let mut response = error.into_response();
    response.extensions_mut().insert(Caller(name.to_owned()));
    response
}
