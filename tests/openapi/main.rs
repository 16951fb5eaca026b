//! `openapi.yaml` against the router: it documents exactly the operations the functions serve,
//! and every one of them is really routed (with and without the trailing slash), answers in the
//! envelope of its generation (v1/v3 or v2), with the key rules the document states.

use std::collections::BTreeSet;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use serde_yaml::Value as Yaml;
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys};
use tower::ServiceExt;

const SPEC: &str = include_str!("../../openapi.yaml");

/// Every method an OpenAPI path item may hold, as HTTP spells it.
const METHODS: [&str; 8] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"];

type Op = (String, String);

fn spec() -> Yaml {
    serde_yaml::from_str(SPEC).expect("openapi.yaml is valid YAML")
}

fn with_slash(path: &str) -> String {
    format!("{}/", path.trim_end_matches('/'))
}

/// The (method, path) pairs `openapi.yaml` documents, paths as written: with the trailing slash,
/// except a bare path that is an operation of its own (`GET /v1/api/geofence`).
fn documented() -> Vec<Op> {
    let spec = spec();
    assert_eq!(spec["openapi"].as_str(), Some("3.0.3"));
    let paths = spec["paths"].as_mapping().expect("paths is a mapping");
    let mut ops = Vec::new();
    for (path, item) in paths {
        let path = path.as_str().expect("path is a string");
        for (key, _) in item.as_mapping().expect("path item is a mapping") {
            let key = key.as_str().expect("path item key is a string").to_ascii_uppercase();
            if METHODS.contains(&key.as_str()) {
                ops.push((key, path.to_owned()));
            }
        }
    }
    ops
}

fn served() -> Vec<Op> {
    local::all_routes().into_iter().map(|(m, p)| (m.to_owned(), p.to_owned())).collect()
}

fn set(ops: &[Op]) -> BTreeSet<Op> {
    ops.iter().cloned().collect()
}

fn app() -> Router {
    local::app(AppState::memory().expect("memory store"))
}

/// A credential as a request carries it.
#[derive(Debug, Clone, Copy)]
enum Cred<'a> {
    None,
    /// `Api-Key: <key>` (secret or publishable key).
    ApiKey(&'a str),
    /// `Authorization: Bearer <access token>`.
    Bearer(&'a str),
}

/// A well-formed id that names nothing, for `{id}` path parameters.
const SAMPLE_ID: &str = "0123456789abcdef01234567";

async fn call(app: &Router, method: &str, path: &str, cred: Cred<'_>) -> (StatusCode, String, Option<Value>) {
    let uri = path.replace("{id}", SAMPLE_ID);
    let mut req = Request::builder().method(Method::from_bytes(method.as_bytes()).expect("method")).uri(uri);
    match cred {
        Cred::None => {}
        Cred::ApiKey(k) => req = req.header("Api-Key", k),
        Cred::Bearer(t) => req = req.header(header::AUTHORIZATION, format!("Bearer {t}")),
    }
    let res = app.clone().oneshot(req.body(Body::empty()).expect("request")).await.expect("the router is infallible");
    let status = res.status();
    let allow = res.headers().get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    (status, allow, serde_json::from_slice(&bytes).ok())
}

fn is_v2(path: &str) -> bool {
    path.starts_with("/v2/")
}

/// The error envelope of the path's generation: v1/v3 `{status: false, msg, code, data: null}`,
/// v2 `{code, message, description}`; `code` is the HTTP status.
fn assert_error_envelope(path: &str, what: &str, status: StatusCode, body: Option<&Value>) {
    let body = body.unwrap_or_else(|| panic!("{what}: body is not JSON"));
    assert_eq!(body["code"], Value::from(status.as_u16()), "{what}: {body}");
    if is_v2(path) {
        let message = body["message"].as_str().unwrap_or("");
        assert!(!message.is_empty() && message.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{what}: {body}");
        assert!(body["description"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(3), "{what}: {body}");
    } else {
        assert_eq!(body["status"], Value::Bool(false), "{what}: {body}");
        assert!(body["data"].is_null(), "{what}: {body}");
        assert!(body["msg"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(4), "{what}: {body}");
    }
}

/// Each path as the spec writes it (with the slash) and as it may also be called (without); a
/// bare path (an operation of its own) has the one form.
fn both_forms(path: &str) -> Vec<String> {
    let bare = path.trim_end_matches('/');
    if bare == path { vec![bare.to_owned()] } else { vec![path.to_owned(), bare.to_owned()] }
}

/// A path without the trailing slash is served only as an operation distinct from its slash
/// form's (both answer at the bare path, so they are one path for the method check).
fn is_distinct_bare(path: &str, served: &[Op]) -> bool {
    !path.ends_with('/') && served.iter().any(|(_, p)| p.ends_with('/') && with_slash(path) == *p)
}

#[test]
fn spec_documents_exactly_the_served_operations() {
    let documented = documented();
    let served = served();
    assert_eq!(set(&documented).len(), documented.len(), "openapi.yaml lists an operation twice: {documented:?}");
    assert_eq!(set(&served).len(), served.len(), "all_routes() has a duplicate: {served:?}");
    for (m, p) in &served {
        assert!(
            p.starts_with("/v") && (p.ends_with('/') || is_distinct_bare(p, &served)),
            "{m} {p}: ROUTES paths carry the trailing slash (a bare path only beside its slash form)"
        );
    }
    let missing: Vec<_> = set(&served).difference(&set(&documented)).cloned().collect();
    let extra: Vec<_> = set(&documented).difference(&set(&served)).cloned().collect();
    assert!(missing.is_empty(), "served but not in openapi.yaml: {missing:?}");
    assert!(extra.is_empty(), "in openapi.yaml but not served: {extra:?}");
}

#[tokio::test]
async fn every_operation_is_routed_and_asks_for_a_key() {
    let app = app();
    for (method, path) in served() {
        for p in both_forms(&path) {
            let (status, _, body) = call(&app, &method, &p, Cred::None).await;
            let what = format!("{method} {p} without a key");
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body:?}");
            assert_error_envelope(&p, &what, status, body.as_ref());
        }
    }
}

#[tokio::test]
async fn other_methods_answer_405_in_the_envelope() {
    let app = app();
    let served = served();
    // A distinct bare path and its slash form answer the same methods: those of both.
    let paths: BTreeSet<String> = served.iter().map(|(_, p)| with_slash(p)).collect();
    for path in &paths {
        let allowed: BTreeSet<&str> =
            served.iter().filter(|(_, p)| with_slash(p) == *path).map(|(m, _)| m.as_str()).collect();
        // A GET route answers HEAD too (HTTP semantics); that is not a separate operation.
        let implied = |m: &str| m == "HEAD" && allowed.contains("GET");
        for method in METHODS.iter().filter(|m| !allowed.contains(*m) && !implied(m)) {
            for p in both_forms(path) {
                let (status, allow, body) = call(&app, method, &p, Cred::None).await;
                let what = format!("{method} {p}");
                assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{what}: {body:?}");
                let listed: BTreeSet<&str> = allow.split(',').map(str::trim).filter(|m| *m != "HEAD").collect();
                assert_eq!(listed, allowed, "{what}: Allow header '{allow}'");
                if *method != "HEAD" {
                    assert_error_envelope(&p, &what, status, body.as_ref());
                }
            }
        }
    }
}

/// The credential got past authentication: requests here carry no body and no query, so an
/// accepted credential ends in 400 (missing input), 404 (the sample id) or 200 (a plain list),
/// never 401/403/405.
fn accepted(status: StatusCode) -> bool {
    status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN && status != StatusCode::METHOD_NOT_ALLOWED
}

/// The security schemes an operation accepts (its own `security`, else the document's).
fn schemes<'a>(spec: &'a Yaml, op: &'a Yaml) -> Vec<&'a str> {
    let security = if op["security"].is_null() { &spec["security"] } else { &op["security"] };
    security
        .as_sequence()
        .expect("security is a list")
        .iter()
        .flat_map(|req| req.as_mapping().into_iter().flat_map(|m| m.keys().filter_map(Yaml::as_str)))
        .collect()
}

/// Each credential is accepted exactly where the operation's `security` lists its scheme:
/// `ApiKey` (secret key), `PublishableKey` (publishable SDK key, else 403 where the secret key
/// is wanted), `bearer` (v2 access token); anywhere else it is a 401 in the path's envelope.
#[tokio::test]
async fn credentials_match_the_documented_security() {
    let state = AppState::memory().expect("memory store");
    let issued = projects::create(state.store.as_ref(), "openapi", &ChosenKeys::default()).await.expect("project");
    let app = local::app(state);
    let spec = spec();
    for (method, path) in served() {
        let op = &spec["paths"][path.as_str()][method.to_ascii_lowercase().as_str()];
        let schemes = schemes(&spec, op);
        assert!(!schemes.is_empty(), "{method} {path}: no security documented");
        for (scheme, cred) in [
            ("ApiKey", Cred::ApiKey(&issued.api_key)),
            ("PublishableKey", Cred::ApiKey(&issued.publishable_key)),
            ("bearer", Cred::Bearer(&issued.access_token)),
        ] {
            let (status, _, body) = call(&app, &method, &path, cred).await;
            let what = format!("{method} {path} with the {scheme} credential");
            if schemes.contains(&scheme) {
                assert!(accepted(status), "{what}: documented as accepted, got {status}: {body:?}");
                continue;
            }
            let expected = if scheme == "PublishableKey" && schemes.contains(&"ApiKey") {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::UNAUTHORIZED
            };
            assert_eq!(status, expected, "{what}: not documented as accepted: {body:?}");
            assert_error_envelope(&path, &what, status, body.as_ref());
        }
    }
}

/// Every operation documents the error statuses it can answer with, in the error envelope.
#[test]
fn operations_document_their_errors() {
    let spec = spec();
    for (method, path) in documented() {
        let op = &spec["paths"][path.as_str()][method.to_ascii_lowercase().as_str()];
        let responses = op["responses"].as_mapping().expect("responses");
        let codes: BTreeSet<&str> = responses.keys().filter_map(Yaml::as_str).collect();
        for code in ["200", "400", "401", "500"] {
            assert!(codes.contains(code), "{method} {path}: no {code} response");
        }
        let has_body = !op["requestBody"].is_null();
        assert_eq!(codes.contains("413"), has_body, "{method} {path}: 413 exactly when there is a body");
        // Errors are documented in the envelope of the path's generation.
        for (code, response) in responses {
            if code.as_str() == Some("200") {
                continue;
            }
            let r = response["$ref"].as_str().unwrap_or_else(|| panic!("{method} {path} {code:?}: not a $ref"));
            let v2 = r.starts_with("#/components/responses/V2");
            assert_eq!(v2, is_v2(&path), "{method} {path} {code:?}: {r} is the other generation's error");
        }
    }
}
