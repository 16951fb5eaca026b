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
        .layer(axum::middleware::from_fn(request_span))
        .with_state(state)
}

/// Every request gets an id, answered as `x-request-id` and carried by a `request` span (so
/// every line it logs, its processor pass's among them, names it) and by
/// [`crate::request_id::scope`] (so the webhook messages it causes record it, and their
/// delivery attempts log it). On Lambda it is API Gateway's request id; locally the client's
/// `x-request-id` when it is a plain token, else a new one.
async fn request_span(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use tracing::Instrument;
    let id = request_id_of(&req);
    let span = tracing::info_span!("request", request_id = %id);
    // The access line's fields only when it is written (debug): not a copy of every path.
    let line = tracing::enabled!(tracing::Level::DEBUG)
        .then(|| (req.method().clone(), req.uri().path().to_owned(), std::time::Instant::now()));
    let mut res = crate::request_id::scope(id.clone(), next.run(req)).instrument(span.clone()).await;
    if let Some((method, path, started)) = line {
        let (status, ms) = (res.status().as_u16(), started.elapsed().as_millis() as u64);
        span.in_scope(|| tracing::debug!(%method, %path, status, ms, "answered"));
    }
    if let Ok(v) = axum::http::HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", v);
    }
    res
}

fn request_id_of(req: &axum::extract::Request) -> String {
    use lambda_http::request::RequestContext;
    if let Some(RequestContext::ApiGatewayV2(ctx)) = req.extensions().get::<RequestContext>()
        && let Some(id) = ctx.request_id.as_deref().filter(|id| crate::request_id::acceptable(id))
    {
        return id.to_owned();
    }
    match req.headers().get("x-request-id").and_then(|v| v.to_str().ok()) {
        Some(id) if crate::request_id::acceptable(id) => id.to_owned(),
        _ => crate::ids::random_hex(8),
    }
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

/// Set up logging for a binary: levels from `RUST_LOG` (`info`, `warn,shared=debug`: a level and
/// per-target levels; default info), read as `Targets`, not an `EnvFilter`, whose
/// regular-expression engine was a megabyte of every function binary. Plain lines locally; one
/// JSON object a line on Lambda (`AWS_LAMBDA_FUNCTION_NAME` set), with the current span's fields
/// (the request id) in each, as CloudWatch Logs Insights reads them.
pub fn init_tracing() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let env = crate::config::Env::process();
    let filter = env
        .get("RUST_LOG")
        .and_then(|s| s.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    // Colours only on a terminal: a log file or CloudWatch gets plain text.
    let fmt =
        tracing_subscriber::fmt::layer().without_time().with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let _ = if env.has("AWS_LAMBDA_FUNCTION_NAME") {
        let json = fmt.json().with_current_span(true).with_span_list(false);
        tracing_subscriber::registry().with(json).with(filter).try_init()
    } else {
        tracing_subscriber::registry().with(fmt).with(filter).try_init()
    };
}
