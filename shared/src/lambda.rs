//! A function's router on the Lambda runtime.
//!
//! lambda_http turns a text answer into a string through `encoding_rs`, which links every legacy
//! encoding's tables (about 280 KB of a function binary) for a charset this service never sends:
//! every answer is UTF-8. Its rule for text and binary bodies is kept: a body is text when it
//! has no `Content-Encoding` and its type is textual (or no type is given), binary (base64 to
//! API Gateway) otherwise, such as a gzipped summary.

//!
//! Lambda refuses to return a response payload over 6 MB (API Gateway then answers an opaque
//! 502); such an answer becomes a 406 in the API's envelope saying so, and how to ask for a
//! smaller one: with `Accept-Encoding: gzip` (a trip's summary gzipped is about 6.5 times
//! smaller, so a day at one fix a second fits: docs/trips.md).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use axum::Router;
use axum::body::Body as AxumBody;
use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::{HeaderMap, Uri};
use axum::response::IntoResponse;
use http_body_util::BodyExt;
use lambda_http::{Body, Response};
use tower::{Service, ServiceExt};

use crate::{ApiError, AppState};

/// The most a synchronous Lambda invocation may return: 6 MB of response payload (the API
/// Gateway response JSON, a binary body base64-encoded in it).
pub const MAX_RESPONSE_PAYLOAD: usize = 6 * 1024 * 1024;

/// Room kept under [`MAX_RESPONSE_PAYLOAD`] for the status, the JSON around the body and the
/// envelope's own fields.
const PAYLOAD_ROOM: usize = 16 * 1024;

/// Serve `router` (with the error fallbacks of [`crate::http::service`]) on the Lambda runtime:
/// logs set up and state built once per cold start.
pub async fn run(router: Router<AppState>) -> Result<(), lambda_http::Error> {
    crate::http::init_tracing();
    let state = AppState::dynamodb_from_env().await;
    lambda_http::run(handler(router, state)).await
}

/// What [`run`] hands the runtime: the finished router, each answer an [`Answer`] (tests feed it
/// API Gateway events as Lambda would).
pub fn handler(
    router: Router<AppState>,
    state: AppState,
) -> impl Service<lambda_http::Request, Response = Answer, Error = Infallible, Future: Send> + Clone {
    let app = crate::http::service(router, state);
    tower::service_fn(move |req: lambda_http::Request| {
        let uri = req.uri().clone();
        let app = app.clone();
        async move { app.oneshot(req).await.map(|res| Answer { res, uri }) }
    })
}

/// An axum answer on its way to API Gateway, with the request's URI (for the envelope of an
/// answer too large to send).
pub struct Answer {
    res: axum::response::Response,
    uri: Uri,
}

impl lambda_http::IntoResponse for Answer {
    fn into_response(self) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> {
        Box::pin(into_lambda(self.res, self.uri))
    }
}

async fn into_lambda(answer: axum::response::Response<AxumBody>, uri: Uri) -> Response<Body> {
    let (parts, body) = answer.into_parts();
    let bytes = match body.collect().await {
        // The body's own buffer, not a copy (a summary can be megabytes).
        Ok(collected) => Vec::from(collected.to_bytes()),
        // Only a streamed body can fail (none of the routes streams): the API's error answer,
        // whose body cannot.
        Err(e) => return Box::pin(into_lambda(ApiError::internal(e).into_response(), uri)).await,
    };
    let body = if is_text(&parts.headers) {
        match String::from_utf8(bytes) {
            Ok(text) => Body::Text(text),
            Err(e) => Body::Binary(e.into_bytes()),
        }
    } else {
        Body::Binary(bytes)
    };
    let size = payload_size(&parts.headers, &body);
    if size > MAX_RESPONSE_PAYLOAD - PAYLOAD_ROOM {
        let gzipped = parts.headers.contains_key(CONTENT_ENCODING);
        let msg = if gzipped {
            format!(
                "Accept-Encoding: the answer is {size} bytes even compressed, more than the {MAX_RESPONSE_PAYLOAD} \
                 an AWS Lambda function may return"
            )
        } else {
            format!(
                "Accept-Encoding: the answer is {size} bytes, more than the {MAX_RESPONSE_PAYLOAD} an AWS Lambda \
                 function may return; ask with `Accept-Encoding: gzip` (several times smaller)"
            )
        };
        tracing::warn!("answer of {} too large for Lambda: {size} bytes", uri.path());
        let e = ApiError::new(crate::error::Kind::NotAcceptable, msg);
        return Box::pin(into_lambda(crate::http::in_envelope(&uri, e), uri)).await;
    }
    Response::from_parts(parts, body)
}

/// The bytes `body` and `headers` take in the API Gateway response JSON: base64 for a binary
/// body, JSON string escapes for a text one.
fn payload_size(headers: &HeaderMap, body: &Body) -> usize {
    let body = match body {
        Body::Text(t) => {
            t.len()
                + t.bytes().map(|b| usize::from(b == b'"' || b == b'\\') + if b < 0x20 { 5 } else { 0 }).sum::<usize>()
        }
        Body::Binary(b) => b.len().div_ceil(3) * 4,
        _ => 0,
    };
    body + headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 6).sum::<usize>()
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

/// Where `WAYMARK_WS_ENDPOINT` is set (the WebSocket API's stage), post the messages this
/// function commits to the project's WebSocket connections (docs/streams.md, "AWS"). Called by
/// the functions that commit messages: processor, locations, trips, trips-v2.
pub fn post_streams_from_env() {
    let env = crate::config::Env::process();
    match env.ws_endpoint().map(|e| crate::apigw::SignedApi::in_lambda(e, env)) {
        Some(Some(api)) => crate::domain::streams::connections::install(std::sync::Arc::new(api)),
        Some(None) => tracing::warn!("WAYMARK_WS_ENDPOINT is set but no AWS credentials are: streams are not posted"),
        None => {}
    }
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
        futures::executor::block_on(into_lambda(r, Uri::from_static("/v1/api/trips/summary/")))
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

    #[test]
    fn an_answer_lambda_would_refuse_is_a_406_in_the_envelope_of_its_path() {
        // Quotes are escaped in the response JSON: 3.2 MB of them take 6.4 MB there.
        let quotes: &'static [u8] = "\"".repeat(3_200_000).leak().as_bytes();
        for (path, code) in [("/v1/api/trips/summary/", "code"), ("/v2/trips/x/summary/", "code")] {
            let mut r = axum::response::Response::new(AxumBody::from(quotes));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            let res = futures::executor::block_on(into_lambda(r, Uri::from_static(path)));
            assert_eq!(res.status(), axum::http::StatusCode::NOT_ACCEPTABLE, "{path}");
            let Body::Text(t) = res.body() else { panic!("{path}: a JSON error") };
            let v: serde_json::Value = serde_json::from_str(t).unwrap();
            assert_eq!(v[code], 406, "{path}: {v}");
            let text = if path.starts_with("/v2/") { &v["description"] } else { &v["msg"] };
            assert!(text.as_str().unwrap().contains("Accept-Encoding: gzip"), "{path}: {v}");
        }
        let fits = answer(Some("application/json"), None, &[b'a'; 3_200_000]);
        assert_eq!(fits.status(), axum::http::StatusCode::OK);
    }
}
