//! The conformance suite: request examples written from docs.roam.ai (our own values), and the
//! requests open-source Roam clients send (headers as they spell them, with the fields their
//! models read as the response; `source` names the file), all in `tests/conformance/*.json`,
//! replayed against the app on both backends, each answer compared
//! with the documented one: HTTP status, `code`, v1 `msg` and v2 `message` must be equal, and
//! every documented field present with the same JSON type and nesting. A documented `null`
//! matches only `null`, unless the fixture lists the field's path in `nullable` (a value Roam
//! shows as null in one state and filled in another, e.g. `arrived_at`). What differs is listed
//! in the fixture's `differences` (and in docs/compatibility.md's table): the suite fails when a
//! new difference appears or a listed one is gone.

use std::collections::BTreeSet;
use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};

use crate::both;
use crate::helpers::TestApp;

/// One fixture file.
struct Fixture {
    name: String,
    doc: Value,
}

fn fixtures() -> Vec<Fixture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/conformance")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|p| Fixture {
            name: p.file_stem().unwrap().to_string_lossy().into_owned(),
            doc: serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        })
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Compare the documented `want` with the answer `got` at `path`: every documented field must be
/// there with the same type (null only where null is documented, or either way at a path listed
/// in `nullable`); arrays by their first element. Returns the fields compared; differences are
/// pushed as `path: what`.
fn compare(path: &str, want: &Value, got: &Value, nullable: &BTreeSet<String>, diffs: &mut BTreeSet<String>) -> usize {
    match (want, got) {
        (Value::Null, _) | (_, Value::Null) if nullable.contains(path) => 1,
        (Value::Object(w), Value::Object(g)) => {
            let mut n = 0;
            for (k, wv) in w {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                n += 1;
                match g.get(k) {
                    None => {
                        diffs.insert(format!("{p}: missing"));
                    }
                    // Metadata is the caller's own data, not a shape: its type is compared only.
                    Some(gv) if k == "metadata" => n += compare(&p, &json!({}), gv, nullable, diffs),
                    Some(gv) => n += compare(&p, wv, gv, nullable, diffs),
                }
            }
            n
        }
        (Value::Array(w), Value::Array(g)) => match (w.first(), g.first()) {
            (Some(wf), Some(gf)) => compare(&format!("{path}[0]"), wf, gf, nullable, diffs),
            (Some(_), None) => {
                diffs.insert(format!("{path}: empty"));
                1
            }
            _ => 1,
        },
        (w, g) if kind(w) == kind(g) => 1,
        (w, g) => {
            diffs.insert(format!("{path}: {}, documented {}", kind(g), kind(w)));
            1
        }
    }
}

/// Placeholders (`{user_id}`, ...) filled in with what the setup created.
fn fill(v: &Value, vars: &[(&str, String)]) -> Value {
    let mut text = v.to_string();
    for (k, val) in vars {
        text = text.replace(&format!("{{{k}}}"), val);
    }
    serde_json::from_str(&text).expect("filled json")
}

async fn send(app: &TestApp, req: &Value) -> (StatusCode, Value) {
    let mut uri = req["path"].as_str().unwrap().to_owned();
    if let Some(q) = req["query"].as_object() {
        let pairs: Vec<(String, String)> = q
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())))
            .collect();
        uri = format!("{uri}?{}", serde_urlencoded::to_string(pairs).unwrap());
    }
    let mut r = Request::builder().method(req["method"].as_str().unwrap()).uri(uri);
    // A client's own headers as it sends them (`{api_key}` is the key), else the documented ones.
    if let Some(h) = req["headers"].as_object() {
        for (k, v) in h {
            r = r.header(k.as_str(), v.as_str().unwrap().replace("{api_key}", &app.project.api_key));
        }
    } else {
        r = match req["auth"].as_str() {
            Some("bearer_api_key") => r.header("Authorization", format!("Bearer {}", app.project.api_key)),
            Some("none") => r,
            _ => r.header("Api-Key", &app.project.api_key),
        };
    }
    let body = match req.get("body") {
        Some(b) => {
            if req["headers"].is_null() {
                r = r.header("Content-Type", "application/json");
            }
            Body::from(b.to_string())
        }
        None => Body::empty(),
    };
    app.send(r.body(body).unwrap()).await
}

/// What the fixtures refer to: two users with a fix each, a group, a v1 and a v2 trip, an ended
/// v1 trip with a route, and today's date (for lists of what the fixtures create).
async fn setup(app: &TestApp) -> Vec<(&'static str, String)> {
    let user = app.create_user(json!({"depot": "east"})).await;
    let user_2 = app.create_user(json!({})).await;
    let (s, r) = app.post("/v1/api/group/user/", &json!({"group_id": "grp-east", "users": [user]})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let fix = json!({"coordinates": [-73.9857, 40.7484], "recorded_at": "2024-05-01T08:00:00.000", "altitude": 14.5,
        "tz_offset": "-0400", "vertical_accuracy": 6.2, "network_status": true, "tracking_mode": "active",
        "battery_remaining": 64, "activity": "MOVING", "app_context": "F", "battery_status": "unplugged", "speed": 3.4,
        "location_permission": true, "horizontal_accuracy": 9.8, "course": 212.0});
    let (s, r) = app.post("/v1/api/location/", &json!({"user_id": user, "locations": [fix]})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = app.post("/v1/api/trips/", &json!({"user_id": user, "origins": [[-73.9857, 40.7484]]})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let trip = r["data"][0]["id"].as_str().unwrap().to_owned();
    // As fixture 08 sends it, so the fixtures that read this trip document what it holds.
    let v2 = json!({"user_id": user, "name": "Morning round", "description": "three drops", "metadata": {"route": "R7"},
        "stops": [{"name": "Drop 1", "description": "front desk", "metadata": {"parcel": "P-1"}, "address": "5th Ave",
        "geometry_radius": 60, "geometry": {"type": "Point", "coordinates": [-73.9857, 40.7484]}}]});
    let req = json!({"method": "POST", "path": "/v2/trips", "auth": "bearer_api_key", "body": v2});
    let (s, r) = send(app, &req).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let v2_trip = r["trip"]["id"].as_str().unwrap().to_owned();
    // An ended trip with a route, for the clients that list a user's history and export it.
    let (s, r) = app
        .post(
            "/v1/api/trips/",
            &json!({"user_id": user, "origins": [[-73.9857, 40.7484]],
        "destinations": [[-73.9772, 40.7527]]}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let ended = r["data"][0]["id"].as_str().unwrap().to_owned();
    let now = chrono::Utc::now();
    let at = |m: i64| (now - chrono::Duration::minutes(m)).format("%Y-%m-%dT%H:%M:%S").to_string();
    let (s, r) =
        app.post("/v1/api/trips/controls/", &json!({"trip_id": ended, "action": "start", "started_at": at(30)})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let fixes: Vec<Value> = (0..5)
        .map(|i| {
            let mut f = fix.clone();
            f["coordinates"] = json!([-73.9857 + f64::from(i) * 0.002, 40.7484 + f64::from(i) * 0.001]);
            f["recorded_at"] = json!(at(25 - 4 * i64::from(i)));
            f
        })
        .collect();
    let (s, r) = app.post("/v1/api/location/", &json!({"user_id": user, "locations": fixes})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) =
        app.post("/v1/api/trips/controls/", &json!({"trip_id": ended, "action": "end", "ended_at": at(2)})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let today = chrono::Utc::now().date_naive();
    vec![
        ("today", today.to_string()),
        ("tomorrow", (today + chrono::Days::new(1)).to_string()),
        ("user_id", user),
        ("user_id_2", user_2),
        ("group_id", "grp-east".into()),
        ("trip_id", trip),
        ("v2_trip_id", v2_trip),
        ("ended_trip_id", ended),
    ]
}

both!(roam_documented_examples_answer_as_documented, |app| async move {
    let vars = setup(&app).await;
    let (mut operations, mut fields, mut differences) = (0, 0, 0);
    let mut report = Vec::new();
    for f in fixtures() {
        let declared: BTreeSet<String> =
            f.doc["differences"].as_array().into_iter().flatten().map(|d| d.as_str().unwrap().to_owned()).collect();
        operations += 1;
        let req = fill(&f.doc["request"], &vars);
        let (status, got) = send(&app, &req).await;
        let want = &f.doc["response"];
        let mut diffs = BTreeSet::new();
        if declared.contains("not implemented") {
            assert!(!status.is_success(), "{}: implemented now ({status}): drop 'not implemented' from it", f.name);
            differences += 1;
            report.push(format!("{}: not implemented", f.name));
            continue;
        }
        assert_eq!(status.as_u16(), want["status"], "{}: HTTP status: {got}", f.name);
        let body = &want["body"];
        assert_eq!(got["code"], body["code"], "{}: code", f.name);
        fields += 2;
        if let Some(m) = body.get("message") {
            assert_eq!(&got["message"], m, "{}: v2 message", f.name);
            fields += 1;
        }
        if let Some(m) = body.get("msg") {
            assert_eq!(&got["msg"], m, "{}: v1 msg", f.name);
            fields += 1;
        }
        let nullable: BTreeSet<String> =
            f.doc["nullable"].as_array().into_iter().flatten().map(|d| d.as_str().unwrap().to_owned()).collect();
        for k in ["data", "trip", "trips", "has_more", "errors", "status", "error"] {
            if let Some(w) = body.get(k) {
                fields += 1;
                match got.get(k) {
                    None => {
                        diffs.insert(format!("{k}: missing"));
                    }
                    Some(g) => fields += compare(k, w, g, &nullable, &mut diffs),
                }
            }
        }
        assert_eq!(diffs, declared, "{}: differences found vs listed in the fixture (and README): {got}", f.name);
        differences += diffs.len();
        report.extend(diffs.iter().map(|d| format!("{}: {d}", f.name)));
    }
    eprintln!("conformance: {operations} operations, {fields} fields compared, {differences} differences listed");
    for r in report {
        eprintln!("  {r}");
    }
});
