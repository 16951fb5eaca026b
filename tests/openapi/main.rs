//! `openapi.yaml` against the router: it documents exactly the operations the functions serve,
//! and every one of them is really routed (with and without the trailing slash), with the key
//! rules the document states.

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

/// The (method, path with trailing slash) pairs `openapi.yaml` documents.
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
                ops.push((key, with_slash(path)));
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

async fn call(app: &Router, method: &str, path: &str, key: Option<&str>) -> (StatusCode, String, Option<Value>) {
    let mut req = Request::builder().method(Method::from_bytes(method.as_bytes()).expect("method")).uri(path);
    if let Some(k) = key {
        req = req.header("Api-Key", k);
    }
    let res = app.clone().oneshot(req.body(Body::empty()).expect("request")).await.expect("the router is infallible");
    let status = res.status();
    let allow = res.headers().get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    (status, allow, serde_json::from_slice(&bytes).ok())
}

/// The error envelope `{status: false, msg, code: <status>, data: null}`.
fn assert_error_envelope(what: &str, status: StatusCode, body: Option<&Value>) {
    let body = body.unwrap_or_else(|| panic!("{what}: body is not JSON"));
    assert_eq!(body["status"], Value::Bool(false), "{what}: {body}");
    assert_eq!(body["code"], Value::from(status.as_u16()), "{what}: {body}");
    assert!(body["data"].is_null(), "{what}: {body}");
    assert!(body["msg"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(4), "{what}: {body}");
}

/// Each path as the spec writes it (with the slash) and as it may also be called (without).
fn both_forms(path: &str) -> [String; 2] {
    [path.to_owned(), path.trim_end_matches('/').to_owned()]
}

#[test]
fn spec_documents_exactly_the_served_operations() {
    let documented = documented();
    let served = served();
    assert_eq!(
        set(&documented).len(),
        documented.len(),
        "openapi.yaml lists an operation twice (paths are compared with a trailing slash): {documented:?}"
    );
    assert_eq!(set(&served).len(), served.len(), "all_routes() has a duplicate: {served:?}");
    for (m, p) in &served {
        assert!(p.starts_with("/v") && p.ends_with('/'), "{m} {p}: ROUTES paths carry the trailing slash");
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
            let (status, _, body) = call(&app, &method, &p, None).await;
            let what = format!("{method} {p} without a key");
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body:?}");
            assert_error_envelope(&what, status, body.as_ref());
        }
    }
}

#[tokio::test]
async fn other_methods_answer_405_in_the_envelope() {
    let app = app();
    let served = served();
    let paths: BTreeSet<&str> = served.iter().map(|(_, p)| p.as_str()).collect();
    for path in paths {
        let allowed: BTreeSet<&str> = served.iter().filter(|(_, p)| p == path).map(|(m, _)| m.as_str()).collect();
        // A GET route answers HEAD too (HTTP semantics); that is not a separate operation.
        let implied = |m: &str| m == "HEAD" && allowed.contains("GET");
        for method in METHODS.iter().filter(|m| !allowed.contains(*m) && !implied(m)) {
            for p in both_forms(path) {
                let (status, allow, body) = call(&app, method, &p, None).await;
                let what = format!("{method} {p}");
                assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{what}: {body:?}");
                let listed: BTreeSet<&str> = allow.split(',').map(str::trim).filter(|m| *m != "HEAD").collect();
                assert_eq!(listed, allowed, "{what}: Allow header '{allow}'");
                if *method != "HEAD" {
                    assert_error_envelope(&what, status, body.as_ref());
                }
            }
        }
    }
}

/// The key got past authentication: requests here carry no body or query, so an accepted key
/// ends in 400 (missing input) or 200 (a plain list), never 401/403.
fn accepted(status: StatusCode) -> bool {
    status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN && status != StatusCode::METHOD_NOT_ALLOWED
}

/// Operations whose `security` lists `PublishableKey` accept the publishable SDK key; every
/// other operation answers it 403. The secret key is accepted everywhere.
#[tokio::test]
async fn publishable_key_rules_match_the_spec() {
    let state = AppState::memory().expect("memory store");
    let issued = projects::create(state.store.as_ref(), "openapi", &ChosenKeys::default()).await.expect("project");
    let app = local::app(state);
    let spec = spec();
    let default_security = &spec["security"];
    for (method, path) in served() {
        let op = &spec["paths"][path.as_str()][method.to_ascii_lowercase().as_str()];
        let security = if op["security"].is_null() { default_security } else { &op["security"] };
        let schemes: Vec<&str> = security
            .as_sequence()
            .expect("security is a list")
            .iter()
            .flat_map(|req| req.as_mapping().into_iter().flat_map(|m| m.keys().filter_map(Yaml::as_str)))
            .collect();
        assert!(schemes.contains(&"ApiKey"), "{method} {path}: every operation takes the secret key");
        let sdk = schemes.contains(&"PublishableKey");
        let (status, _, body) = call(&app, &method, &path, Some(&issued.publishable_key)).await;
        let what = format!("{method} {path} with the publishable key");
        if sdk {
            assert!(accepted(status), "{what}: documented as allowed, got {status}: {body:?}");
        } else {
            assert_eq!(status, StatusCode::FORBIDDEN, "{what}: documented as secret-only: {body:?}");
            assert_error_envelope(&what, status, body.as_ref());
        }
        let (status, _, body) = call(&app, &method, &path, Some(&issued.api_key)).await;
        assert!(accepted(status), "{method} {path} with the secret key, got {status}: {body:?}");
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
    }
}
