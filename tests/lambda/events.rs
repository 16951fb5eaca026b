//! Every file in `events/` is a well-formed API Gateway HTTP API (payload 2.0) event of a route in
//! template.yaml and, with its placeholders filled in, succeeds through its function's router,
//! parsed exactly as `lambda_http` parses what Lambda delivers. The DynamoDB actions each event
//! needs are checked against the function's policies in template.yaml, both ways.

use std::collections::{BTreeMap, BTreeSet};

use axum::Router;
use axum::http::StatusCode;
use lambda_http::RequestExt;
use lambda_http::request::RequestContext;
use serde_json::Value;
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys, IssuedProject};
use shared::store::EmbeddedStore;

use crate::support::{
    FUNCTIONS, Function, Permission, Recording, allowed, event_names, event_text, event_with, function_of_event, send,
    template, template_routes,
};

/// Each event, the body `code` it must answer with, and whether the user needs a location
/// history first.
struct Case {
    name: &'static str,
    code: u16,
    needs_history: bool,
}

const CASES: &[Case] = &[
    Case { name: "users-create", code: 201, needs_history: false },
    Case { name: "users-list", code: 200, needs_history: false },
    Case { name: "users-get", code: 200, needs_history: false },
    Case { name: "users-update", code: 200, needs_history: false },
    Case { name: "users-delete", code: 200, needs_history: false },
    Case { name: "locations-ingest", code: 201, needs_history: false },
    Case { name: "locations-list", code: 200, needs_history: true },
    Case { name: "locations-list-encoded", code: 200, needs_history: true },
    Case { name: "groups-add-put", code: 201, needs_history: false },
    Case { name: "groups-add-post", code: 201, needs_history: false },
];

/// Permissions a function needs on paths none of the events takes: (function, table, action, why).
/// Each must be granted and must stay unused by the events (else drop it from this list).
const BEYOND_EVENTS: &[(&str, &str, &str, &str)] = &[(
    "LocationsFunction",
    "MainTable",
    "dynamodb:DeleteItem",
    "ingest drops the user's index entry of a deleted or long-ended trip (trips::on_locations)",
)];

/// Locations in events/locations-ingest.json.
const INGESTED: u64 = 3;

#[test]
fn every_event_file_is_covered() {
    let files: BTreeSet<String> = event_names().into_iter().collect();
    let cases: BTreeSet<String> = CASES.iter().map(|c| c.name.to_owned()).collect();
    assert_eq!(files, cases, "files in events/ vs CASES in tests/lambda/events.rs");
}

#[test]
fn events_are_http_api_events_of_template_routes() {
    let t = template();
    let mut covered: BTreeMap<&str, BTreeSet<(String, String)>> = BTreeMap::new();
    for name in event_names() {
        let text = event_text(&name);
        let f = function_of_event(&name);
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("events/{name}.json: {e}"));
        let ctx = &v["requestContext"];
        let method = ctx["http"]["method"].as_str().unwrap_or_else(|| panic!("{name}: requestContext.http.method"));
        let path = v["rawPath"].as_str().unwrap_or_else(|| panic!("{name}: rawPath"));
        let route_key = format!("{method} {path}");
        assert_eq!(v["version"], "2.0", "{name}: payload version");
        assert_eq!(v["routeKey"], route_key.as_str(), "{name}: routeKey");
        assert_eq!(ctx["routeKey"], route_key.as_str(), "{name}: requestContext.routeKey");
        assert_eq!(ctx["http"]["path"], path, "{name}: requestContext.http.path");
        assert_eq!(ctx["stage"], "$default", "{name}: the HTTP API's stage");
        assert_eq!(v["isBase64Encoded"], false, "{name}: isBase64Encoded");
        assert_eq!(v["headers"]["api-key"], "REPLACE_API_KEY", "{name}: api-key header placeholder");
        let query = v["rawQueryString"].as_str().unwrap_or_else(|| panic!("{name}: rawQueryString"));
        if !query.is_empty() {
            let parsed: BTreeMap<String, String> = serde_urlencoded::from_str(query).expect("query");
            let given: BTreeMap<String, String> = serde_json::from_value(v["queryStringParameters"].clone())
                .unwrap_or_else(|e| panic!("{name}: queryStringParameters: {e}"));
            assert_eq!(parsed, given, "{name}: queryStringParameters vs rawQueryString");
        }
        match method {
            "POST" | "PUT" => {
                let body = v["body"].as_str().unwrap_or_else(|| panic!("{name}: body must be a string"));
                serde_json::from_str::<Value>(body).unwrap_or_else(|e| panic!("{name}: body is not JSON: {e}"));
                assert_eq!(v["headers"]["content-type"], "application/json", "{name}: content-type");
            }
            _ => assert!(v.get("body").is_none(), "{name}: a {method} event carries no body"),
        }

        let req = lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{name}: lambda_http: {e}"));
        assert!(
            matches!(req.request_context_ref(), Some(RequestContext::ApiGatewayV2(_))),
            "{name}: lambda_http did not read it as an HTTP API event"
        );
        assert_eq!(req.method().as_str(), method, "{name}");
        assert_eq!(req.uri().path(), path, "{name}");

        let route = (method.to_owned(), path.to_owned());
        assert!(
            template_routes(&t, f.id).contains(&route),
            "{name}: {route_key} is not a route of {} in template.yaml",
            f.id
        );
        covered.entry(f.id).or_default().insert(route);
    }
    // One event per operation at least.
    for f in FUNCTIONS {
        for (m, p) in f.routes {
            assert!(
                covered.get(f.id).is_some_and(|c| c.contains(&(m.to_string(), p.to_string()))),
                "{}: no event in events/ for {m} {p}",
                f.id
            );
        }
    }
}

/// A project on a recording in-memory store, with one user created through the users function.
struct Fixture {
    state: AppState,
    store: Recording,
    project: IssuedProject,
    user_id: String,
}

impl Fixture {
    async fn new() -> Self {
        let store = Recording::new(EmbeddedStore::memory().expect("in-memory store"));
        let state = AppState::new(store.clone());
        let project =
            projects::create(state.store.as_ref(), "lambda-events", &ChosenKeys::default()).await.expect("project");
        let mut fx = Self { state, store, project, user_id: "REPLACE_USER_ID".into() };
        let body = fx.ok("users-create", 201).await;
        fx.user_id = body["data"]["user_id"].as_str().expect("user_id").to_owned();
        fx
    }

    fn router(&self, f: &Function) -> Router {
        shared::http::service((f.router)(), self.state.clone())
    }

    /// Feed events/<name>.json to its function's router, as Lambda would.
    async fn run(&self, name: &str) -> (StatusCode, Value) {
        let text = event_with(name, &self.project.api_key, &self.user_id);
        let req = lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{name}: lambda_http: {e}"));
        send(&self.router(function_of_event(name)), req).await
    }

    async fn ok(&self, name: &str, code: u16) -> Value {
        let (status, body) = self.run(name).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(body["status"], true, "{name}: {body}");
        assert_eq!(body["code"], code, "{name}: {body}");
        body
    }
}

/// What the answer to each event must hold beyond the envelope.
fn check_data(name: &str, fx: &Fixture, data: &Value) {
    let user = fx.user_id.as_str();
    match name {
        "users-create" => {
            let id = data["user_id"].as_str().expect("user_id");
            assert!(id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{name}: user_id {id}");
        }
        "users-list" => assert!(data["users"].as_array().expect("users").iter().any(|u| u["id"] == user), "{data}"),
        "users-get" => assert_eq!(data["users"][0]["id"], user, "{data}"),
        "users-update" => assert_eq!(data["description"], "Driver 7 (night shift)", "{data}"),
        "users-delete" => assert_eq!(data["is_deleted"], true, "{data}"),
        "locations-ingest" => assert_eq!(data["stored"], INGESTED, "{data}"),
        "locations-list" => {
            assert_eq!(data["locations"].as_array().expect("locations").len() as u64, INGESTED, "{data}")
        }
        "locations-list-encoded" => {
            assert_eq!(data["count"], INGESTED, "{data}");
            assert!(data["polyline"].as_str().is_some_and(|p| !p.is_empty()), "{data}");
        }
        "groups-add-put" | "groups-add-post" => {
            assert!(data.as_str().is_some_and(|s| s.starts_with("1 user")), "{data}")
        }
        other => panic!("no data check for {other}"),
    }
}

#[tokio::test]
async fn every_event_succeeds_through_its_function_within_its_policy() {
    let t = template();
    let mut used: BTreeMap<&str, BTreeSet<Permission>> = BTreeMap::new();
    for case in CASES {
        let f = function_of_event(case.name);
        let fx = Fixture::new().await;
        if case.needs_history {
            fx.ok("locations-ingest", 201).await;
        }
        fx.store.take();
        let body = fx.ok(case.name, case.code).await;
        check_data(case.name, &fx, &body["data"]);

        let needed = fx.store.take();
        let granted = allowed(&t, f.id);
        let missing: Vec<&Permission> = needed.difference(&granted).collect();
        assert!(missing.is_empty(), "{}: {} needs {missing:?}, which template.yaml does not grant", case.name, f.id);
        used.entry(f.id).or_default().extend(needed);
    }
    for f in FUNCTIONS {
        let granted = allowed(&t, f.id);
        let mut needed = used.remove(f.id).unwrap_or_default();
        for (id, table, action, why) in BEYOND_EVENTS.iter().filter(|b| b.0 == f.id) {
            let p = (table.to_string(), action.to_string());
            assert!(
                granted.contains(&p),
                "{id}: BEYOND_EVENTS lists {p:?} ({why}), which template.yaml does not grant"
            );
            assert!(!needed.contains(&p), "{id}: {p:?} is used by an event now: drop it from BEYOND_EVENTS");
            needed.insert(p);
        }
        let unused: Vec<&Permission> = granted.difference(&needed).collect();
        assert!(
            unused.is_empty(),
            "{}: template.yaml grants {unused:?}, which none of its events uses (least privilege: drop it, \
             or add an event in events/ that needs it)",
            f.id
        );
    }
}
