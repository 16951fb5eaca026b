//! template.yaml is held to the code: tables to `shared::store::TABLES`, functions to workspace
//! binaries, routes to what each function's router serves, environment to the table names.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use shared::AppState;
use shared::store::TABLES;
use shared::store::tables::{PARTITION_KEY, SORT_KEY};

use crate::support::{
    Auth, EVENT_FUNCTIONS, FUNCTIONS, Function, Route, WS_FUNCTION, resource, resources_of, send_raw, template,
    template_routes,
};

#[test]
fn tables_are_the_code_tables() {
    let t = template();
    let in_template: BTreeSet<&str> = resources_of(&t, "AWS::DynamoDB::Table").iter().map(|(id, _)| *id).collect();
    let in_code: BTreeSet<&str> = TABLES.iter().map(|d| d.resource).collect();
    assert_eq!(in_template, in_code, "AWS::DynamoDB::Table resources of template.yaml vs shared::store::TABLES");

    for def in TABLES {
        let p = &resource(&t, def.resource)["Properties"];
        let attrs: BTreeSet<(String, String)> = p["AttributeDefinitions"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: AttributeDefinitions", def.resource))
            .iter()
            .map(|a| {
                (a["AttributeName"].as_str().unwrap_or("").into(), a["AttributeType"].as_str().unwrap_or("").into())
            })
            .collect();
        let want: BTreeSet<(String, String)> =
            [(PARTITION_KEY.into(), "S".into()), (SORT_KEY.into(), "S".into())].into_iter().collect();
        assert_eq!(attrs, want, "{}: attribute definitions", def.resource);
        assert_eq!(
            p["KeySchema"],
            json!([{"AttributeName": PARTITION_KEY, "KeyType": "HASH"}, {"AttributeName": SORT_KEY, "KeyType": "RANGE"}]),
            "{}: key schema",
            def.resource
        );
        assert_eq!(p["BillingMode"], "PAY_PER_REQUEST", "{}: billing mode", def.resource);
        assert!(p.get("ProvisionedThroughput").is_none(), "{}: on-demand tables have no throughput", def.resource);
        assert_eq!(
            p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], true,
            "{}: point-in-time recovery",
            def.resource
        );
        // The store queries base tables only: an index here would exist nowhere in code.
        for idx in ["GlobalSecondaryIndexes", "LocalSecondaryIndexes"] {
            assert!(p.get(idx).is_none(), "{}: {idx} are not defined in shared::store::TABLES", def.resource);
        }
    }
}

#[test]
fn globals_and_parameters() {
    let t = template();
    let arch = &t["Parameters"]["Architecture"];
    assert_eq!(arch["Default"], "arm64");
    assert_eq!(arch["AllowedValues"], json!(["arm64", "x86_64"]));

    let g = &t["Globals"]["Function"];
    assert_eq!(g["Runtime"], "provided.al2023");
    assert_eq!(g["Handler"], "bootstrap");
    assert_eq!(g["Architectures"], json!([{"Ref": "Architecture"}]));
    assert_eq!(g["Environment"]["Variables"]["AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH"], "true");

    assert!(t["Outputs"]["ApiUrl"]["Value"].is_object(), "Outputs.ApiUrl");

    // trip_tracking_url is <base>/<token>: the base must be an absolute URL (unset, the code
    // falls back to a localhost link).
    let url = &t["Parameters"]["TrackingBaseUrl"];
    assert_eq!(url["Type"], "String", "TrackingBaseUrl");
    let default = url["Default"].as_str().expect("TrackingBaseUrl.Default");
    assert!(default.starts_with("https://") && default.len() > "https://".len(), "TrackingBaseUrl: {default}");
    assert!(url["AllowedPattern"].is_string(), "TrackingBaseUrl: an AllowedPattern keeps it from being empty");
    assert!(url["Description"].as_str().is_some_and(|d| d.contains("trip_tracking_url")), "TrackingBaseUrl");
}

/// Functions that serve trips, which render tracking links.
const TRACKING_FUNCTIONS: &[&str] = &["TripsFunction", "TripsV2Function"];

#[test]
fn trips_functions_get_the_tracking_base_url() {
    let t = template();
    for (id, _) in resources_of(&t, "AWS::Serverless::Function") {
        let got = environment(&t, id).get("WAYMARK_TRACKING_BASE_URL").cloned();
        if TRACKING_FUNCTIONS.contains(&id) {
            assert_eq!(got, Some(json!({"Ref": "TrackingBaseUrl"})), "{id}: WAYMARK_TRACKING_BASE_URL");
        } else {
            assert_eq!(got, None, "{id} renders no trips: it needs no WAYMARK_TRACKING_BASE_URL");
        }
    }
}

/// The pages' settings: optional parameters, passed to the functions serving pages only.
/// Empty is their default: `tracking::PageConfig::from_env` treats an empty variable as unset.
const TILE_SETTINGS: &[(&str, &str)] =
    &[("WAYMARK_TILE_URL", "TileUrlTemplate"), ("WAYMARK_TILE_ATTRIBUTION", "TileAttribution")];

#[test]
fn the_tracking_function_is_public_and_gets_the_tile_settings() {
    let t = template();
    for (var, param) in TILE_SETTINGS {
        let p = &t["Parameters"][param];
        assert_eq!((&p["Type"], &p["Default"]), (&json!("String"), &json!("")), "{param}: an optional string");
        for (id, _) in resources_of(&t, "AWS::Serverless::Function") {
            let got = environment(&t, id).get(*var).cloned();
            let want = ["TrackingFunction", "ConsoleFunction"].contains(&id).then(|| json!({"Ref": param}));
            assert_eq!(got, want, "{id}: {var}");
        }
    }
    // The link must open without a key: no authorizer on the API or on the function's routes.
    let api = &resource(&t, "HttpApi")["Properties"];
    assert!(api.get("Auth").is_none(), "HttpApi: an authorizer would lock out the tracking page");
    for id in ["TrackingFunction", "ConsoleFunction"] {
        let events = resource(&t, id)["Properties"]["Events"].as_object().expect("Events");
        for (name, e) in events {
            assert!(e["Properties"].get("Auth").is_none(), "{id}.Events.{name}: public, no Auth");
        }
    }
}

/// Globals' environment overlaid with the function's own, as SAM merges them.
fn environment(t: &Value, function_id: &str) -> BTreeMap<String, Value> {
    let mut env: BTreeMap<String, Value> = BTreeMap::new();
    for vars in [
        &t["Globals"]["Function"]["Environment"]["Variables"],
        &resource(t, function_id)["Properties"]["Environment"]["Variables"],
    ] {
        if let Some(m) = vars.as_object() {
            env.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    env
}

#[test]
fn every_function_gets_every_table_name() {
    let t = template();
    for (id, _) in resources_of(&t, "AWS::Serverless::Function") {
        let env = environment(&t, id);
        for def in TABLES {
            assert_eq!(
                env.get(def.env),
                Some(&json!({"Ref": def.resource})),
                "{id}: environment variable {} must be !Ref {}",
                def.env,
                def.resource
            );
        }
        let p = &resource(&t, id)["Properties"];
        for key in ["Runtime", "Handler", "Architectures"] {
            assert!(p.get(key).is_none(), "{id}: {key} comes from Globals; do not override it per function");
        }
    }
}

/// Binary targets of the workspace's packages: binary name -> package name.
fn workspace_binaries() -> BTreeMap<String, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = crate::support::workspace_root().join("Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--no-deps", "--offline", "--format-version", "1", "--manifest-path"])
        .arg(&manifest)
        .output()
        .expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let mut bins = BTreeMap::new();
    for pkg in meta["packages"].as_array().expect("packages") {
        for target in pkg["targets"].as_array().expect("targets") {
            if target["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bin")) {
                bins.insert(
                    target["name"].as_str().expect("name").to_owned(),
                    pkg["name"].as_str().expect("name").to_owned(),
                );
            }
        }
    }
    bins
}

#[test]
fn every_function_builds_a_workspace_binary() {
    let t = template();
    let bins = workspace_binaries();
    let in_template: BTreeSet<&str> = resources_of(&t, "AWS::Serverless::Function").iter().map(|(id, _)| *id).collect();
    let known: BTreeSet<&str> =
        FUNCTIONS.iter().map(|f| f.id).chain(EVENT_FUNCTIONS.iter().map(|f| f.id)).chain([WS_FUNCTION.0]).collect();
    assert_eq!(
        in_template, known,
        "functions of template.yaml vs the FUNCTIONS and EVENT_FUNCTIONS this test knows (tests/lambda/support.rs)"
    );

    // (id, binary, package): an HTTP function's package is named after its binary.
    let expected = FUNCTIONS
        .iter()
        .map(|f| (f.id, f.binary, f.binary))
        .chain(EVENT_FUNCTIONS.iter().map(|f| (f.id, f.binary, f.package)))
        .chain([(WS_FUNCTION.0, WS_FUNCTION.1, WS_FUNCTION.1)]);
    for (id, want_binary, want_package) in expected {
        let r = resource(&t, id);
        assert_eq!(r["Metadata"]["BuildMethod"], "rust-cargolambda", "{id}: BuildMethod");
        // cargo-lambda builds from the workspace root (shared/ and Cargo.lock live there).
        assert_eq!(r["Properties"]["CodeUri"], ".", "{id}: CodeUri");
        let binary = r["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}: Metadata.BuildProperties.Binary"));
        let package = bins
            .get(binary)
            .unwrap_or_else(|| panic!("{id}: Binary '{binary}' is no binary of the workspace ({bins:?})"));
        assert_eq!(binary, want_binary, "{id}: builds '{binary}' but is checked as '{want_binary}'");
        assert_eq!(package, want_package, "{id}: binary '{binary}' belongs to package '{package}'");
    }
}

/// Workspace binaries that are not Lambda functions of template.yaml, and why.
const NOT_IN_TEMPLATE: &[(&str, &str)] = &[("waymark", "the local server and admin CLI")];

#[test]
fn every_workspace_binary_is_a_function_or_listed() {
    let t = template();
    let packaged: BTreeSet<String> = resources_of(&t, "AWS::Serverless::Function")
        .iter()
        .filter_map(|(_, r)| r["Metadata"]["BuildProperties"]["Binary"].as_str().map(str::to_owned))
        .collect();
    for bin in workspace_binaries().keys() {
        let listed = NOT_IN_TEMPLATE.iter().find(|(b, _)| b == bin);
        match (packaged.contains(bin), listed) {
            (false, None) => panic!("binary '{bin}' is neither a function of template.yaml nor in NOT_IN_TEMPLATE"),
            (true, Some(_)) => {
                panic!("binary '{bin}' is a function of template.yaml now: drop it from NOT_IN_TEMPLATE")
            }
            _ => {}
        }
    }
}

/// Whether the router answers `method path` itself (rather than its 404/405 fallback). Requests
/// carry no key, so a served route of a keyed function answers 401 before any handler logic; a
/// public function's handler answers on its own (for a path with `{token}` in it: not found).
async fn serves(f: &Function, router: &axum::Router, method: &str, path: &str) -> bool {
    let req = Request::builder().method(method).uri(path).body(Body::empty()).expect("request");
    let reply = send_raw(router, req).await;
    if reply.is_fallback() {
        return false;
    }
    match (f.auth, reply.status) {
        (Auth::ApiKey | Auth::Bearer, StatusCode::UNAUTHORIZED) => true,
        (Auth::Public, status) if status != StatusCode::UNAUTHORIZED => true,
        (_, other) => {
            panic!("{}: {method} {path} without a key answered {other}: {}", f.id, String::from_utf8_lossy(&reply.body))
        }
    }
}

#[tokio::test]
async fn routes_are_what_each_function_serves() {
    let t = template();
    // Every path the template routes (both spellings), probed with every method.
    let mut paths: BTreeSet<String> = BTreeSet::new();
    for f in FUNCTIONS {
        paths.extend(template_routes(&t, f.id).into_iter().map(|(_, p)| p));
    }
    let methods = ["GET", "POST", "PUT", "PATCH", "DELETE"];

    for f in FUNCTIONS {
        let declared = template_routes(&t, f.id);
        let router = shared::http::service((f.router)(), AppState::memory().expect("memory store"));
        let mut served: BTreeSet<Route> = BTreeSet::new();
        for path in &paths {
            for m in methods {
                if serves(f, &router, m, path).await {
                    served.insert((m.to_owned(), path.clone()));
                }
            }
        }
        assert_eq!(
            served, declared,
            "{}: routes {}::router() serves vs its HttpApi events in template.yaml",
            f.id, f.binary
        );
    }

    // One HTTP API route goes to one function.
    let mut owner: BTreeMap<Route, &str> = BTreeMap::new();
    for f in FUNCTIONS {
        for r in template_routes(&t, f.id) {
            if let Some(other) = owner.insert(r.clone(), f.id) {
                panic!("{r:?} is routed to both {other} and {}", f.id);
            }
        }
    }
}
