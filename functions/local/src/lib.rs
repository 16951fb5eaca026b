//! The `waymark` binary's library: every group's router on one port, and the admin commands.

pub mod cli;

use axum::Router;
use shared::AppState;

/// Every endpoint group, as the Lambda functions serve them one by one.
pub fn routes() -> Router<AppState> {
    Router::new().merge(users::router()).merge(locations::router()).merge(groups::router())
}

/// The whole service over `state`, ready to serve.
pub fn app(state: AppState) -> Router {
    shared::http::service(routes(), state)
}
