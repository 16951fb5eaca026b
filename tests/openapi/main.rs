//! `openapi.yaml` against the router: it documents exactly the operations template.yaml routes to
//! the functions (whose routers `tests/lambda/template.rs` holds to their routes), and every one
//! of them is really routed (with and without the trailing slash), answers in the envelope of its
//! generation (v1/v3 or v2), with the key rules the document states. The public operations (the
//! trip tracking page, outside `/v…`, `security: []`) ask for no key and answer their own 404s;
//! they are checked to be served with a real trip's token.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::collections::BTreeSet;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use serde_yaml::Value as Yaml;
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys};
use shared::domain::trips::{self, Api, NewTrip};
use shared::project::{KeyKind, Project};
use tower::ServiceExt;

#[allow(dead_code)] // each test binary reads a part of it
#[path = "../template_yaml.rs"]
mod template_yaml;

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

/// The documented operations of the keyed API (`/v1`, `/v2`, `/v3`).
fn served() -> Vec<Op> {
    documented().into_iter().filter(|(_, p)| p.starts_with("/v")).collect()
}

/// Documented operations that only `waymark serve` has (`x-waymark-serve-only`: the SSE and
/// WebSocket streams; on AWS the WebSocket API serves streams): routed by the local server,
/// not by template.yaml.
fn serve_only() -> Vec<Op> {
    let spec = spec();
    documented()
        .into_iter()
        .filter(|(m, p)| {
            spec["paths"][p.as_str()][m.to_ascii_lowercase().as_str()]["x-waymark-serve-only"] == Yaml::Bool(true)
        })
        .collect()
}

/// The other documented operations: the trip tracking page, its data and assets (no key).
fn public() -> Vec<Op> {
    documented().into_iter().filter(|(_, p)| !p.starts_with("/v")).collect()
}

fn is_public(method: &str, path: &str) -> bool {
    public().iter().any(|(m, p)| m == method && p == path)
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
/// A well-formed tracking token that names no trip, for `{token}` path parameters.
const SAMPLE_TOKEN: &str = "0123456789abcdef0123456789abcdef";
/// An asset the tracking page has, for `{file}` path parameters.
const SAMPLE_FILE: &str = "track.js";

/// A path with its parameters filled in.
fn fill(path: &str, token: &str, file: &str) -> String {
    path.replace("{id}", SAMPLE_ID).replace("{token}", token).replace("{file}", file)
}

async fn call(app: &Router, method: &str, path: &str, cred: Cred<'_>) -> (StatusCode, String, Option<Value>) {
    let uri = fill(path, SAMPLE_TOKEN, SAMPLE_FILE);
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

/// The error envelope of the path's generation: v1/v3 `{status: false, msg, code, data: null,
/// errors, error}` (`error` Roam's object, its `ErrorCode` the status's: GS401 for a key
/// problem, GS402 for a 400 naming a field, GS404, else GS400), v2 `{code, message, description,
/// errors}`; `code` is the HTTP status.
fn assert_error_envelope(path: &str, what: &str, status: StatusCode, body: Option<&Value>) {
    let body = body.unwrap_or_else(|| panic!("{what}: body is not JSON"));
    assert_eq!(body["code"], Value::from(status.as_u16()), "{what}: {body}");
    if is_v2(path) {
        let message = body["message"].as_str().unwrap_or("");
        assert!(!message.is_empty() && message.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{what}: {body}");
        assert!(body["description"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
        assert!(body["errors"].is_array(), "{what}: {body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(4), "{what}: {body}");
    } else {
        assert_eq!(body["status"], Value::Bool(false), "{what}: {body}");
        assert!(body["data"].is_null(), "{what}: {body}");
        assert!(body["msg"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
        assert!(body["errors"].is_array(), "{what}: {body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(6), "{what}: {body}");
        let error = &body["error"];
        let named = body["errors"].as_array().is_some_and(|e| !e.is_empty());
        let code = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => "GS401",
            StatusCode::BAD_REQUEST if named => "GS402",
            StatusCode::NOT_FOUND => "GS404",
            _ => "GS400",
        };
        assert_eq!(error["ErrorCode"], code, "{what}: {body}");
        assert!(error["ErrorMessage"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
        if code == "GS402" {
            // Roam's shape: {field: [messages]}, the field `errors` names.
            let field = body["errors"][0]["field"].as_str().unwrap_or("");
            assert!(error["details"][field].as_array().is_some_and(|m| !m.is_empty()), "{what}: {body}");
        } else {
            assert_eq!(error["details"], body["msg"], "{what}: {body}");
        }
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
    for (m, p) in &served {
        assert!(
            p.ends_with('/') || is_distinct_bare(p, &served),
            "{m} {p}: keyed paths carry the trailing slash (a bare path only beside its slash form)"
        );
    }
    // Each documented path is routed in both spellings, as template.yaml routes it (but the
    // streams of `waymark serve` alone).
    let only_local = serve_only();
    assert!(only_local.len() == 2, "the SSE and WebSocket streams: {only_local:?}");
    let spelled: BTreeSet<Op> = documented
        .iter()
        .filter(|op| !only_local.contains(op))
        .flat_map(|(m, p)| both_forms(p).into_iter().map(|p| (m.clone(), p)))
        .collect();
    let routed = template_yaml::http_routes(&template_yaml::template());
    let missing: Vec<_> = routed.difference(&spelled).collect();
    let extra: Vec<_> = spelled.difference(&routed).collect();
    assert!(missing.is_empty(), "routed by template.yaml but not in openapi.yaml: {missing:?}");
    assert!(extra.is_empty(), "in openapi.yaml but not routed by template.yaml: {extra:?}");
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
            // A key that is no project's: the same 401, Roam's GS401 naming it in `details`.
            let bad = if is_v2(&p) { Cred::Bearer("wm_at_0000") } else { Cred::ApiKey("wm_sk_0000") };
            let (status, _, body) = call(&app, &method, &p, bad).await;
            let what = format!("{method} {p} with an unknown key");
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body:?}");
            assert_error_envelope(&p, &what, status, body.as_ref());
        }
    }
}

/// Public operations are documented as such (`security: []`) and answer without a key: the page,
/// its data and every documented asset of a real trip's link with 200, and an unknown token or
/// asset with the function's own 404, not the router's fallback (its envelope). A key, if one is
/// sent anyway, changes nothing.
#[tokio::test]
async fn public_operations_are_served_without_a_key() {
    let state = AppState::memory().expect("memory store");
    let store = state.store.as_ref();
    let issued = projects::create(store, "openapi", &ChosenKeys::default()).await.expect("project");
    let p =
        Project { project_id: issued.project_id.clone(), account_id: issued.account_id.clone(), kind: KeyKind::Secret };
    let trip = trips::create(store, &p, Api::V1, NewTrip::default()).await.expect("trip");
    let token = trip.tracking_token;
    let app = local::app(state);
    let spec = spec();

    // What the router's fallback answers, to tell it apart from a public operation's own 404.
    let is_fallback = |body: &Option<Value>| {
        body.as_ref().is_some_and(|b| {
            b["status"] == Value::Bool(false) && b["msg"].as_str().is_some_and(|m| m.starts_with("path: no endpoint"))
        })
    };
    let (status, _, body) = call(&app, "GET", &format!("/track/{token}/nothing-here/"), Cred::None).await;
    assert!(status == StatusCode::NOT_FOUND && is_fallback(&body), "the fallback: {status} {body:?}");

    let public = public();
    assert!(!public.is_empty());
    for (method, path) in &public {
        let op = &spec["paths"][path.as_str()][method.to_ascii_lowercase().as_str()];
        assert_eq!(
            op["security"].as_sequence().map(Vec::len),
            Some(0),
            "{method} {path}: a public operation is documented with `security: []`"
        );
        // The files the spec lists for `{file}` (a path without it has one value to try).
        let files: Vec<String> = op["parameters"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|prm| prm["name"].as_str() == Some("file"))
            .map(|prm| match prm["schema"]["enum"].as_sequence() {
                Some(files) => files.iter().filter_map(Yaml::as_str).map(str::to_owned).collect(),
                // Files named by a pattern: the example.
                None => vec![prm["schema"]["example"].as_str().expect("file: an enum or an example").to_owned()],
            })
            .unwrap_or_else(|| vec![SAMPLE_FILE.to_owned()]);
        for form in both_forms(path) {
            for file in &files {
                let uri = fill(&form, &token, file);
                for (cred, what) in [(Cred::None, "without a key"), (Cred::ApiKey(&issued.api_key), "with the API key")]
                {
                    let (status, _, body) = call(&app, method, &uri, cred).await;
                    assert_eq!(status, StatusCode::OK, "{method} {uri} {what}: {body:?}");
                }
            }
            // A page of no parameter (the console's) has nothing unknown to ask for.
            if !form.contains('{') {
                continue;
            }
            let unknown = fill(&form, SAMPLE_TOKEN, "nothing.js");
            let (status, _, body) = call(&app, method, &unknown, Cred::None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {unknown}: {body:?}");
            assert!(!is_fallback(&body), "{method} {unknown}: answered by the router's fallback, not the operation");
        }
    }
}

#[tokio::test]
async fn other_methods_answer_405_in_the_envelope() {
    let app = app();
    let served: Vec<Op> = served().into_iter().chain(public()).collect();
    // A distinct bare path and its slash form answer the same methods: those of both.
    let paths: BTreeSet<String> = served.iter().map(|(_, p)| with_slash(p)).collect();
    for path in &paths {
        let group: Vec<&Op> = served.iter().filter(|(_, p)| with_slash(p) == *path).collect();
        let allowed: BTreeSet<&str> = group.iter().map(|(m, _)| m.as_str()).collect();
        // The forms the group is served at (a path written without the slash has only that one).
        let forms: BTreeSet<String> = group.iter().flat_map(|(_, p)| both_forms(p)).collect();
        // A GET route answers HEAD too (HTTP semantics); that is not a separate operation.
        let implied = |m: &str| m == "HEAD" && allowed.contains("GET");
        for method in METHODS.iter().filter(|m| !allowed.contains(*m) && !implied(m)) {
            for p in &forms {
                let p = p.as_str();
                let (status, allow, body) = call(&app, method, p, Cred::None).await;
                let what = format!("{method} {p}");
                assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{what}: {body:?}");
                let listed: BTreeSet<&str> = allow.split(',').map(str::trim).filter(|m| *m != "HEAD").collect();
                assert_eq!(listed, allowed, "{what}: Allow header '{allow}'");
                if *method != "HEAD" {
                    assert_error_envelope(p, &what, status, body.as_ref());
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
    // A stream accepted answers an endless body: its credentials are the stream tests' (and its
    // refusals are checked above).
    let only_local = serve_only();
    for (method, path) in served().into_iter().filter(|op| !only_local.contains(op)) {
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

/// Operations that answer 202 when their work outlives the request (a user's erasure).
const MAY_FINISH_LATER: &[(&str, &str)] = &[("DELETE", "/v1/api/user/")];

/// Every operation documents the error statuses it can answer with, in the error envelope; a
/// public one documents its own 404 and no key errors.
#[test]
fn operations_document_their_errors() {
    let spec = spec();
    for (method, path) in documented() {
        let op = &spec["paths"][path.as_str()][method.to_ascii_lowercase().as_str()];
        let responses = op["responses"].as_mapping().expect("responses");
        let codes: BTreeSet<&str> = responses.keys().filter_map(Yaml::as_str).collect();
        if is_public(&method, &path) {
            // A 404 where the path names something (a token, a file).
            let codes_needed: &[&str] = if path.contains('{') { &["200", "404"] } else { &["200"] };
            for code in codes_needed.iter().copied() {
                assert!(codes.contains(code), "{method} {path}: no {code} response");
            }
            for code in ["401", "403"] {
                assert!(!codes.contains(code), "{method} {path}: public, yet documents {code}");
            }
            assert!(op["requestBody"].is_null(), "{method} {path}: a public operation takes no body");
            continue;
        }
        // One success: 200, or 201 for an operation that creates (the HTTP status is the body's
        // code); an operation that may finish in the background also documents its 202.
        let successes: Vec<&&str> = codes.iter().filter(|c| c.starts_with('2') || **c == "101").collect();
        if MAY_FINISH_LATER.contains(&(method.as_str(), path.as_str())) {
            assert_eq!(successes, [&"200", &"202"], "{method} {path}: 200 when done, 202 when not yet");
        } else {
            assert!(
                successes == [&"200"] || successes == [&"201"] || successes == [&"101"],
                "{method} {path}: one success, 200 or 201: {successes:?}"
            );
        }
        for code in ["400", "401", "500"] {
            assert!(codes.contains(code), "{method} {path}: no {code} response");
        }
        let has_body = !op["requestBody"].is_null();
        assert_eq!(codes.contains("413"), has_body, "{method} {path}: 413 exactly when there is a body");
        // Errors are documented in the envelope of the path's generation.
        for (code, response) in responses {
            if code.as_str().is_some_and(|c| c.starts_with('2') || c == "101") {
                continue;
            }
            let r = response["$ref"].as_str().unwrap_or_else(|| panic!("{method} {path} {code:?}: not a $ref"));
            let v2 = r.starts_with("#/components/responses/V2");
            assert_eq!(v2, is_v2(&path), "{method} {path} {code:?}: {r} is the other generation's error");
        }
    }
}
