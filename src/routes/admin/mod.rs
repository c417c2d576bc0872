//! The admin API and the prompt editor page.

use axum::Router;
use axum::response::Html;
use axum::routing::get;

use crate::app::AppState;

/// The editor page, embedded in the binary.
const PAGE: &str = include_str!("admin_page.html");

/// Admin routes.
pub fn router() -> Router<AppState> {
    Router::new().route("/admin", get(|| async { Html(PAGE) }))
}
