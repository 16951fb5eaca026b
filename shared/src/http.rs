//! Router plumbing shared by every function and the local server.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::routing::MethodRouter;

use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::extract::MAX_BODY_BYTES;
use crate::http_error::V2Error;
use crate::state::AppState;

/// Register `path` both with and without its trailing slash (openapi.yaml, Conventions: "every
/// path is also served without it"). `path` is given with the slash.
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

/// Answers longer than this (64 KiB) are gzipped for clients that accept it; shorter ones are sent
/// as they are (compressing a page of a list would cost more CPU than it saves on the wire).
pub const COMPRESS_ABOVE_BYTES: u16 = u16::MAX;

/// gzip (its fastest level) for answers above [`COMPRESS_ABOVE_BYTES`] when the request's
/// `Accept-Encoding` allows it, on the routes that can answer megabytes: a trip's summary. On AWS
/// a Lambda function's answer is limited to 6 MB (base64 included); a summary of 100,000 fixes is
/// about 22 MB of JSON and 3.4 MB gzipped (gzip -1 of a summary body: 6.5 times smaller). Not on
/// the locations function, which stays under the 8 MB binary limit without the gzip code.
pub fn compress_long<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    use tower_http::CompressionLevel;
    use tower_http::compression::CompressionLayer;
    use tower_http::compression::predicate::{DefaultPredicate, Predicate, SizeAbove};
    let when = DefaultPredicate::new().and(SizeAbove::new(COMPRESS_ABOVE_BYTES));
    router.layer(CompressionLayer::new().quality(CompressionLevel::Fastest).compress_when(when))
}

/// An error in the envelope of the API generation the path belongs to.
pub fn in_envelope(uri: &Uri, e: ApiError) -> Response {
    if uri.path().starts_with("/v2/") { V2Error(e).into_response() } else { e.into_response() }
}

async fn not_found(uri: Uri) -> Response {
    in_envelope(&uri, ApiError::not_found(format!("path: no endpoint at {}", uri.path())))
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let e = ApiError::new(
        crate::error::Kind::MethodNotAllowed,
        format!("method: {method} is not allowed on {}", uri.path()),
    );
    in_envelope(&uri, e)
}

/// Set up logging for a binary: JSON-free plain lines, levels from `RUST_LOG` (`info`,
/// `warn,shared=debug`: a level and per-target levels; default info). Read as `Targets`, not an
/// `EnvFilter`, whose regular-expression engine was a megabyte of every function binary.
pub fn init_tracing() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| s.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    let _ =
        tracing_subscriber::registry().with(tracing_subscriber::fmt::layer().without_time()).with(filter).try_init();
}
