//! Router plumbing shared by every function and the local server.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode, Uri};
use axum::routing::MethodRouter;

use crate::error::ApiError;
use crate::extract::MAX_BODY_BYTES;
use crate::state::AppState;

/// Register `path` both with and without its trailing slash (interface.md: "a trailing slash may
/// be present"). `path` is given with the slash.
pub fn route(router: Router<AppState>, path: &str, handler: MethodRouter<AppState>) -> Router<AppState> {
    let bare = path.trim_end_matches('/');
    router.route(path, handler.clone()).route(bare, handler)
}

/// Finish a group's router for serving: unknown paths and methods answer in the envelope, and
/// bodies are capped.
pub fn service(router: Router<AppState>, state: AppState) -> Router {
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("path: no endpoint at {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("method: {method} is not allowed on {}", uri.path()))
}

/// Set up logging for a binary: JSON-free plain lines, level from `RUST_LOG` (default info).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).without_time().try_init();
}
