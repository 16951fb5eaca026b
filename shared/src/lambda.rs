//! A function's router on the Lambda runtime.
//!
//! lambda_http turns a text answer into a string through `encoding_rs`, which links every legacy
//! encoding's tables (about 280 KB of a function binary) for a charset this service never sends:
//! every answer is UTF-8. Its rule for text and binary bodies is kept: a body is text when it
//! has no `Content-Encoding` and its type is textual (or no type is given), binary (base64 to
//! API Gateway) otherwise, such as a gzipped summary.

use std::future::Future;
use std::pin::Pin;

use axum::Router;
use axum::body::Body as AxumBody;
use axum::http::HeaderMap;
use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use axum::response::IntoResponse;
use http_body_util::BodyExt;
use lambda_http::{Body, Response};
use tower::ServiceExt;

use crate::{ApiError, AppState};

/// Serve `router` (with the error fallbacks of [`crate::http::service`]) on the Lambda runtime.
pub async fn run(router: Router<AppState>, state: AppState) -> Result<(), lambda_http::Error> {
    let service = ServiceExt::<lambda_http::Request>::map_response(crate::http::service(router, state), Answer);
    lambda_http::run(service).await
}

/// An axum answer on its way to API Gateway.
pub struct Answer(axum::response::Response);

impl lambda_http::IntoResponse for Answer {
    fn into_response(self) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> {
        Box::pin(into_lambda(self.0))
    }
}

async fn into_lambda(answer: axum::response::Response<AxumBody>) -> Response<Body> {
    let (parts, body) = answer.into_parts();
    let bytes = match body.collect().await {
        // The body's own buffer, not a copy (a summary can be megabytes).
        Ok(collected) => Vec::from(collected.to_bytes()),
        // Only a streamed body can fail (none of the routes streams): the API's error answer,
        // whose body cannot.
        Err(e) => return Box::pin(into_lambda(ApiError::internal(e).into_response())).await,
    };
    let body = if is_text(&parts.headers) {
        match String::from_utf8(bytes) {
            Ok(text) => Body::Text(text),
            Err(e) => Body::Binary(e.into_bytes()),
        }
    } else {
        Body::Binary(bytes)
    };
    Response::from_parts(parts, body)
}

/// lambda_http's rule: text types, JSON, JavaScript, XML and YAML, their `+suffix` forms, and an
/// answer with no type; never a compressed one.
fn is_text(headers: &HeaderMap) -> bool {
    if headers.contains_key(CONTENT_ENCODING) {
        return false;
    }
    let Some(kind) = headers.get(CONTENT_TYPE) else { return true };
    let kind = kind.to_str().unwrap_or_default();
    let mime = kind.split(';').next().unwrap_or_default().trim();
    ["text", "application/json", "application/javascript", "application/xml", "application/yaml"]
        .iter()
        .any(|p| kind.starts_with(p))
        || ["+xml", "+yaml", "+json"].iter().any(|s| mime.ends_with(s))
        || headers.get("x-lambda-http-content-encoding").is_some_and(|v| v == "text")
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn answer(kind: Option<&str>, encoding: Option<&str>, body: &'static [u8]) -> Response<Body> {
        let mut r = axum::response::Response::new(AxumBody::from(body));
        if let Some(k) = kind {
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_str(k).unwrap());
        }
        if let Some(e) = encoding {
            r.headers_mut().insert(CONTENT_ENCODING, HeaderValue::from_str(e).unwrap());
        }
        futures::executor::block_on(into_lambda(r))
    }

    #[test]
    fn utf8_answers_are_text_and_compressed_or_opaque_ones_binary() {
        let json = answer(Some("application/json"), None, "{\"name\":\"Zürich\"}".as_bytes());
        assert!(matches!(json.body(), Body::Text(t) if t == "{\"name\":\"Zürich\"}"));
        let gpx = answer(Some("application/gpx+xml; charset=utf-8"), None, b"<gpx/>");
        assert!(matches!(gpx.body(), Body::Text(_)));
        assert!(matches!(answer(Some("text/html"), None, b"<p>").body(), Body::Text(_)));
        assert!(matches!(answer(None, None, b"plain").body(), Body::Text(_)));
        let gzipped = answer(Some("application/json"), Some("gzip"), b"\x1f\x8b\x08");
        assert!(matches!(gzipped.body(), Body::Binary(b) if b == b"\x1f\x8b\x08"));
        assert!(matches!(answer(Some("image/png"), None, b"\x89PNG").body(), Body::Binary(_)));
        // Declared text but not UTF-8: sent as it is rather than altered.
        assert!(matches!(answer(Some("text/plain"), None, b"\xff\xfe").body(), Body::Binary(_)));
        assert_eq!(gzipped.headers()[CONTENT_ENCODING], "gzip");
    }
}
