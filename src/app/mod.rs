//! Wiring: the router with its layers. Serving it is `server`'s.

pub mod observe;

use std::convert::Infallible;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderName, Request, Response};
use axum::routing::{get, post};
use hyper::body::Incoming;
use tower::{Service, ServiceBuilder};
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};

use self::observe::ObserveLayer;
use crate::clients::gate::gate;
use crate::ops::request_body::Bounds;
use crate::ops::request_id::{self, HEADER, MakeIds};
use crate::relay::CompletionRoute;
use crate::routes;
use crate::state::AppState;

/// The whole service: the router inside the layers that need no route.
///
/// Layers given to `Router::layer` wrap each route one by one, boxed, and axum
/// clones a route's whole boxed stack for every request. Only the observer needs
/// the matched route, so only it is a router layer; the rest wrap the router once.
pub fn app(
    state: AppState,
) -> impl Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Send + 'static,
> + Clone
+ Send
+ 'static {
    let request_id = HeaderName::from_static(HEADER);
    ServiceBuilder::new()
        .map_request(request_id::drop_unfit)
        .layer(SetRequestIdLayer::new(request_id.clone(), MakeIds::new()))
        .layer(PropagateRequestIdLayer::new(request_id))
        .service(router(state))
}

/// Every route, each observed.
fn router(state: AppState) -> Router {
    let mut v1 = Router::new()
        .route(CompletionRoute::CHAT, post(routes::chat::completions))
        .route(CompletionRoute::TASK, post(routes::tasks::run))
        .route(CompletionRoute::RESPONSES, post(routes::responses::create))
        .route(
            "/v1/responses/{id}",
            get(routes::responses_stored::retrieve).delete(routes::responses_stored::delete),
        )
        .route(
            "/v1/responses/{id}/cancel",
            post(routes::responses_stored::cancel),
        )
        .route(
            "/v1/jobs/{id}",
            get(routes::jobs::read).delete(routes::jobs::cancel),
        )
        .route("/v1/jobs/{id}/events", get(routes::job_events::read))
        .route("/v1/models", get(routes::models::list))
        .route("/v1/models/{*id}", get(routes::models::read));
    // Only with client keys: without, `/v1/*` has no layer to pass.
    if let Some(clients) = state.clients.clone() {
        v1 = v1.route_layer(axum::middleware::from_fn_with_state(clients, gate));
    }
    Router::new()
        .merge(v1)
        .route("/healthz", get(routes::ops::healthz))
        .route("/readyz", get(routes::ops::readyz))
        .route("/metrics", get(routes::ops::metrics))
        .merge(routes::admin::router())
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::not_found)
        .layer(ObserveLayer::new(
            state.metrics.clone(),
            Bounds {
                time: state.config.body_read_timeout,
                max_bytes: state.config.max_body_bytes,
            },
            state.clients.is_some(),
        ))
        .with_state(state)
}
