//! Trips, v2 (`/v2/trips`, Bearer access token, `{code, message, description, trip}`): create
//! with stops, get, list with cursors, update, delete, controls, summary; and the isolation of
//! every trip API between projects.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{Duration, Utc};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};
use crate::trips::{create, get_trip, ingest, is_ts, ts};

const UNKNOWN_ID: &str = "0123456789abcdef01234567";

const TRIP_FIELDS: [&str; 19] = [
    "id",
    "name",
    "description",
    "trip_state",
    "total_distance",
    "total_duration",
    "total_elevation_gain",
    "metadata",
    "start_location",
    "end_location",
    "user",
    "started_at",
    "ended_at",
    "created_at",
    "updated_at",
    "events",
    "stops",
    "trip_tracking_url",
    "eta",
];

const STOP_FIELDS: [&str; 11] = [
    "id",
    "name",
    "description",
    "metadata",
    "address",
    "geometry_radius",
    "geometry",
    "created_at",
    "updated_at",
    "arrived_at",
    "departed_at",
];

/// A request with the project's access token.
async fn v2(app: &TestApp, method: &str, uri: &str, body: Option<&Value>) -> (StatusCode, Value) {
    app.call(method, uri, Key::Bearer, body).await
}

/// A request with exactly these headers (plus Content-Type when there is a body).
async fn with_headers(
    app: &TestApp,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = match body {
        Some(b) => {
            req = req.header("Content-Type", "application/json");
            Body::from(serde_json::to_vec(b).unwrap())
        }
        None => Body::empty(),
    };
    app.send(req.body(body).unwrap()).await
}

/// A v2 error envelope: `{code, message, description}` and nothing else, the description naming
/// `needle`.
#[track_caller]
fn assert_v2_error(status: StatusCode, body: &Value, expected: StatusCode, needle: &str) {
    assert_eq!(status, expected, "{body}");
    let o = body.as_object().unwrap_or_else(|| panic!("not an object: {body}"));
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["code", "description", "errors", "message"], "{body}");
    assert_eq!(body["code"], expected.as_u16(), "{body}");
    let message = match expected {
        StatusCode::BAD_REQUEST => "invalid_request_error",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::CONFLICT => "conflict",
        other => panic!("no v2 message for {other}"),
    };
    assert_eq!(body["message"], message, "{body}");
    let d = body["description"].as_str().unwrap_or_default();
    assert!(d.contains(needle), "description should name '{needle}': {d}");
}

/// Create a v2 trip and return `trip`.
async fn create_v2(app: &TestApp, body: Value) -> Value {
    let (status, res) = v2(app, "POST", "/v2/trips", Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res["code"], 201, "{res}");
    assert_eq!(res["message"], "trip_created", "{res}");
    assert!(res["description"].is_string(), "{res}");
    res["trip"].clone()
}

async fn read_v2(app: &TestApp, id: &str) -> Value {
    let (status, res) = v2(app, "GET", &format!("/v2/trips/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["code"], 200, "{res}");
    res["trip"].clone()
}

async fn control_v2(app: &TestApp, id: &str, body: Value) -> (StatusCode, Value) {
    v2(app, "POST", &format!("/v2/trips/{id}/controls"), Some(&body)).await
}

async fn list_v2(app: &TestApp, query: &str) -> (Vec<String>, bool) {
    let (status, res) = v2(app, "GET", &format!("/v2/trips?{query}"), None).await;
    assert_eq!(status, StatusCode::OK, "{query}: {res}");
    assert_eq!(res["code"], 200);
    let ids = res["trips"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect();
    (ids, res["has_more"].as_bool().expect("has_more"))
}

fn count(trip: &Value, event_type: &str) -> usize {
    trip["events"].as_array().unwrap().iter().filter(|e| e["event_type"] == event_type).count()
}

/// A user with a description and a name in its metadata; returns its id.
async fn named_user(app: &TestApp, name: &str) -> String {
    let metadata = json!({"name": name, "shift": "early"});
    let body = json!({"app_type": 1, "device_token": "t", "description": "courier", "metadata": metadata});
    let (status, res) = app.post("/v1/api/user/", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    res["data"]["user_id"].as_str().unwrap().to_owned()
}

fn stop(lng: f64, lat: f64) -> Value {
    json!({"name": "drop", "geometry": {"type": "Point", "coordinates": [lng, lat]}})
}

both!(v2_create_with_stops_returns_every_field, |app| async move {
    let user = named_user(&app, "Ana").await;
    let body = json!({
        "user_id": user,
        "name": "Morning round",
        "description": "three drops",
        "metadata": {"route": "R7"},
        "stops": [
            {"name": "Depot", "description": "load", "metadata": {"dock": 4}, "address": "1 Main St",
             "geometry_radius": 50, "geometry": {"type": "Point", "coordinates": [77.59, 12.97]}},
            {"name": "Shop", "geometry": {"type": "Point", "coordinates": [77.60, 12.98]}},
        ],
    });
    let t = create_v2(&app, body).await;
    let o = t.as_object().unwrap();
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort();
    let mut expected = TRIP_FIELDS.to_vec();
    expected.sort();
    assert_eq!(keys, expected, "{t}");
    assert_eq!(t["id"].as_str().unwrap().len(), 24);
    assert_eq!(t["name"], "Morning round");
    assert_eq!(t["description"], "three drops");
    assert_eq!(t["trip_state"], "created");
    assert_eq!(t["total_distance"], 0.0);
    assert_eq!(t["total_duration"], 0);
    assert_eq!(t["total_elevation_gain"], 0.0);
    assert_eq!(t["metadata"], json!({"route": "R7"}));
    assert_eq!(t["start_location"], json!({}));
    assert_eq!(t["end_location"], json!({}));
    assert_eq!(
        t["user"],
        json!({"id": user, "name": "Ana", "description": "courier", "metadata": {"name": "Ana", "shift": "early"}})
    );
    assert!(t["started_at"].is_null() && t["ended_at"].is_null());
    assert!(is_ts(&t["created_at"]) && is_ts(&t["updated_at"]), "{t}");
    assert_eq!(t["events"], json!([]));

    let stops = t["stops"].as_array().unwrap();
    assert_eq!(stops.len(), 2);
    for s in stops {
        let mut k: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort();
        let mut e = STOP_FIELDS.to_vec();
        e.sort();
        assert_eq!(k, e, "{s}");
        assert_eq!(s["id"].as_str().unwrap().len(), 24);
        assert!(is_ts(&s["created_at"]) && is_ts(&s["updated_at"]), "{s}");
        assert!(s["arrived_at"].is_null() && s["departed_at"].is_null(), "{s}");
        assert!(s["geometry_radius"].is_u64(), "{s}");
    }
    assert_ne!(stops[0]["id"], stops[1]["id"]);
    assert_eq!(stops[0]["name"], "Depot");
    assert_eq!(stops[0]["description"], "load");
    assert_eq!(stops[0]["metadata"], json!({"dock": 4}));
    assert_eq!(stops[0]["address"], "1 Main St");
    assert_eq!(stops[0]["geometry_radius"], 50);
    assert_eq!(stops[0]["geometry"], json!({"type": "Point", "coordinates": [77.59, 12.97]}));
    assert_eq!(stops[1]["name"], "Shop");
    assert_eq!(stops[1]["metadata"], json!({}));
    assert_eq!(stops[1]["geometry"], json!({"type": "Point", "coordinates": [77.60, 12.98]}));

    // Read back: the same, plus the recorded creation event.
    let got = read_v2(&app, t["id"].as_str().unwrap()).await;
    assert_eq!(count(&got, "service:trip:created"), 1, "{got}");
    let mut without_events = got.clone();
    without_events["events"] = json!([]);
    assert_eq!(without_events, t);

    // Everything optional: no user, no stops.
    let t = create_v2(&app, json!({})).await;
    assert!(t["user"].is_null(), "{t}");
    assert_eq!(t["stops"], json!([]));
    assert_eq!(t["metadata"], json!({}));
    assert_eq!(t["trip_state"], "created");
});

both!(v2_create_rejects_bad_input_in_the_v2_envelope, |app| async move {
    let bad =
        |coords: Value| json!({"stops": [stop(77.59, 12.97), {"geometry": {"type": "Point", "coordinates": coords}}]});
    for coords in [json!([200.0, 10.0]), json!([10.0, -91.0]), json!([10.0]), json!("here")] {
        let (status, res) = v2(&app, "POST", "/v2/trips", Some(&bad(coords))).await;
        assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "stops[1].geometry");
    }
    let body = json!({"stops": [{"geometry": {"type": "Polygon", "coordinates": [1.0, 2.0]}}]});
    let (status, res) = v2(&app, "POST", "/v2/trips", Some(&body)).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "stops[0].geometry");
    let (status, res) = v2(&app, "POST", "/v2/trips", Some(&json!({"stops": [{"name": "no geometry"}]}))).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "geometry");
    let mut s = stop(1.0, 1.0);
    s["geometry_radius"] = json!(5);
    let (status, res) = v2(&app, "POST", "/v2/trips", Some(&json!({"stops": [s]}))).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "stops[0].geometry_radius");
    let (status, res) = v2(&app, "POST", "/v2/trips", Some(&json!({"user_id": UNKNOWN_ID}))).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = v2(&app, "POST", "/v2/trips", Some(&json!({"metadata": "x"}))).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "metadata");
    let token = app.project.access_token.clone();
    let bearer = format!("Bearer {token}");
    let (status, res) = with_headers(&app, "POST", "/v2/trips", &[("Authorization", &bearer)], None).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "body");
    // Nothing was created.
    assert_eq!(list_v2(&app, "").await, (vec![], false));
});

both!(v2_requires_a_bearer_access_token_or_secret_key, |app| async move {
    let t = create_v2(&app, json!({})).await;
    let id = t["id"].as_str().unwrap();
    // Roam documents `Bearer <API-KEY>`: the secret key is taken as the access token is.
    let secret = format!("Bearer {}", app.project.api_key);
    let (status, res) =
        with_headers(&app, "GET", &format!("/v2/trips/{id}"), &[("Authorization", &secret)], None).await;
    assert_eq!((status, res["trip"]["id"].clone()), (StatusCode::OK, json!(id)), "{res}");
    let other = app.other_project().await;
    let foreign = format!("Bearer {}", other.api_key);
    let (status, res) =
        with_headers(&app, "GET", &format!("/v2/trips/{id}"), &[("Authorization", &foreign)], None).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, id);
    let publishable = format!("Bearer {}", app.project.publishable_key);
    let basic = format!("Basic {}", app.project.access_token);
    let attempts: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("Authorization", "Bearer nope")],
        vec![("Authorization", "Bearer")],
        vec![("Authorization", &basic)],
        vec![("Authorization", &publishable)],
        vec![("Api-Key", &app.project.api_key)],
    ];
    let calls: Vec<(&str, String, Option<Value>)> = vec![
        ("POST", "/v2/trips".into(), Some(json!({}))),
        ("GET", "/v2/trips".into(), None),
        ("GET", format!("/v2/trips/{id}"), None),
        ("PUT", format!("/v2/trips/{id}"), Some(json!({"name": "x"}))),
        ("DELETE", format!("/v2/trips/{id}"), None),
        ("GET", format!("/v2/trips/{id}/summary"), None),
        ("POST", format!("/v2/trips/{id}/controls"), Some(json!({"action": "start"}))),
    ];
    for headers in &attempts {
        for (method, uri, body) in &calls {
            let (status, res) = with_headers(&app, method, uri, headers, body.as_ref()).await;
            assert_v2_error(status, &res, StatusCode::UNAUTHORIZED, "Authorization");
        }
    }
    // The access token is not an API key for v1/v3 either.
    let (status, res) = app.call("GET", "/v1/api/trips/", Key::Raw(&app.project.access_token), None).await;
    assert_error(status, &res, StatusCode::UNAUTHORIZED, "Api-Key");
    // Untouched by all of the above.
    let got = read_v2(&app, id).await;
    assert_eq!(got["name"], t["name"]);
    assert_eq!(got["trip_state"], "created");
});

both!(v2_get_and_delete, |app| async move {
    let user = named_user(&app, "Bo").await;
    let t = create_v2(&app, json!({"user_id": user, "name": "n", "stops": [stop(77.59, 12.97)]})).await;
    let keep = create_v2(&app, json!({"name": "keep"})).await;
    let id = t["id"].as_str().unwrap();
    let (status, res) = v2(&app, "GET", &format!("/v2/trips/{id}/"), None).await;
    assert_eq!(status, StatusCode::OK, "a trailing slash may be present: {res}");
    assert_eq!(res["message"], "trip_object");
    assert_eq!(res["trips"], res["trip"], "Roam's name for the object, beside ours");
    assert_eq!(res["trip"]["id"], id);
    assert_eq!(res["trip"]["user"]["id"], user.as_str());
    // An id that names no trip is a 404; one that cannot be an id is bad input (400).
    for (missing, code) in [(UNKNOWN_ID, StatusCode::NOT_FOUND), ("nope", StatusCode::BAD_REQUEST)] {
        let (status, res) = v2(&app, "GET", &format!("/v2/trips/{missing}"), None).await;
        assert_v2_error(status, &res, code, missing);
    }

    let (status, res) = v2(&app, "DELETE", &format!("/v2/trips/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let o = res.as_object().unwrap();
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["code", "description", "message", "trip"], "{res}");
    assert_eq!(res["code"], 200);
    assert_eq!(res["message"], "trip_deleted");
    assert!(!res["description"].as_str().unwrap().is_empty());
    assert_eq!(res["trip"], json!({"id": id, "is_deleted": true}));

    let (status, res) = v2(&app, "GET", &format!("/v2/trips/{id}"), None).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, id);
    let (status, res) = v2(&app, "DELETE", &format!("/v2/trips/{id}"), None).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, id);
    let (status, res) = v2(&app, "GET", &format!("/v2/trips/{id}/summary"), None).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, id);
    let (status, res) = control_v2(&app, id, json!({"action": "start"})).await;
    assert_v2_error(status, &res, StatusCode::CONFLICT, "deleted");
    let (status, res) = v2(&app, "PUT", &format!("/v2/trips/{id}"), Some(&json!({"name": "again"}))).await;
    assert_v2_error(status, &res, StatusCode::CONFLICT, "deleted");
    assert_eq!(list_v2(&app, "").await, (vec![keep["id"].as_str().unwrap().to_owned()], false));
    assert_eq!(list_v2(&app, &format!("user_id={user}")).await, (vec![], false));
});

both!(v2_list_pages_with_cursors_newest_first, |app| async move {
    let mut t = Vec::new();
    for i in 0..5 {
        t.push(create_v2(&app, json!({"name": format!("trip {i}")})).await["id"].as_str().unwrap().to_owned());
    }
    let newest_first: Vec<String> = t.iter().rev().cloned().collect();
    let (status, res) = v2(&app, "GET", "/v2/trips", None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["message"], "trip_list_success");
    assert!(res["description"].is_string());
    for trip in res["trips"].as_array().unwrap() {
        for f in TRIP_FIELDS {
            assert!(trip.get(f).is_some(), "listed trip lacks {f}: {trip}");
        }
    }
    assert_eq!(list_v2(&app, "").await, (newest_first.clone(), false));
    assert_eq!(list_v2(&app, "limit=5").await, (newest_first.clone(), false));
    assert_eq!(list_v2(&app, "limit=4").await, (newest_first[..4].to_vec(), true));

    // Forwards (older) with starting_after.
    assert_eq!(list_v2(&app, "limit=2").await, (vec![t[4].clone(), t[3].clone()], true));
    assert_eq!(
        list_v2(&app, &format!("limit=2&starting_after={}", t[3])).await,
        (vec![t[2].clone(), t[1].clone()], true)
    );
    assert_eq!(list_v2(&app, &format!("limit=2&starting_after={}", t[1])).await, (vec![t[0].clone()], false));
    assert_eq!(list_v2(&app, &format!("starting_after={}", t[0])).await, (vec![], false));
    // Backwards (newer) with ending_before, still newest first.
    assert_eq!(
        list_v2(&app, &format!("limit=2&ending_before={}", t[0])).await,
        (vec![t[2].clone(), t[1].clone()], true)
    );
    assert_eq!(
        list_v2(&app, &format!("limit=2&ending_before={}", t[2])).await,
        (vec![t[4].clone(), t[3].clone()], false)
    );
    assert_eq!(list_v2(&app, &format!("ending_before={}", t[4])).await, (vec![], false));
});

both!(v2_list_filters_and_limit_bounds, |app| async move {
    let a = named_user(&app, "A").await;
    let b = named_user(&app, "B").await;
    let t1 = create_v2(&app, json!({"user_id": a})).await["id"].as_str().unwrap().to_owned();
    let t2 = create_v2(&app, json!({"user_id": b})).await["id"].as_str().unwrap().to_owned();
    let t3 = create_v2(&app, json!({"user_id": a})).await["id"].as_str().unwrap().to_owned();
    let (status, res) = control_v2(&app, &t3, json!({"action": "start"})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    // v1/v3 trips are not v2 trips.
    create(&app, "v1", json!({"user_id": a})).await;

    assert_eq!(list_v2(&app, &format!("user_id={a}")).await, (vec![t3.clone(), t1.clone()], false));
    assert_eq!(list_v2(&app, &format!("user_id={b}")).await, (vec![t2.clone()], false));
    assert_eq!(list_v2(&app, "trip_state=started").await, (vec![t3.clone()], false));
    assert_eq!(list_v2(&app, "trip_state=created").await, (vec![t2.clone(), t1.clone()], false));
    assert_eq!(list_v2(&app, &format!("trip_state=created&user_id={a}")).await, (vec![t1.clone()], false));
    assert_eq!(list_v2(&app, "trip_state=ended").await, (vec![], false));
    assert_eq!(list_v2(&app, "trip_state=created&limit=1").await, (vec![t2.clone()], true));
    assert_eq!(
        list_v2(&app, &format!("trip_state=created&limit=1&starting_after={t2}")).await,
        (vec![t1.clone()], false)
    );
    assert_eq!(list_v2(&app, &format!("user_id={UNKNOWN_ID}")).await, (vec![], false));

    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=-1", "limit"),
        ("limit=ten", "limit"),
        ("trip_state=flying", "trip_state"),
    ] {
        let (status, res) = v2(&app, "GET", &format!("/v2/trips?{query}"), None).await;
        assert_v2_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
    let (status, res) = v2(&app, "GET", &format!("/v2/trips?starting_after={t1}&ending_before={t2}"), None).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "ending_before");
    assert_eq!(list_v2(&app, "limit=1").await.0.len(), 1);
    assert_eq!(list_v2(&app, "limit=100").await.0.len(), 3);
});

both!(v2_update_only_before_start, |app| async move {
    let a = named_user(&app, "A").await;
    let b = named_user(&app, "B").await;
    let t =
        create_v2(&app, json!({"user_id": a, "name": "old", "metadata": {"k": "v"}, "stops": [stop(1.0, 1.0)]})).await;
    let id = t["id"].as_str().unwrap();
    let body = json!({"user_id": b, "name": "new", "description": "d", "stops": [stop(2.0, 2.0), stop(3.0, 3.0)]});
    let (status, res) = v2(&app, "PUT", &format!("/v2/trips/{id}"), Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["code"], 200);
    assert_eq!(res["message"], "trip_updated");
    let u = &res["trip"];
    assert_eq!(u["id"], id);
    assert_eq!(u["name"], "new");
    assert_eq!(u["description"], "d");
    assert_eq!(u["metadata"], json!({"k": "v"}), "not given, kept");
    assert_eq!(u["user"]["id"], b.as_str());
    assert_eq!(u["user"]["name"], "B");
    let stops = u["stops"].as_array().unwrap();
    assert_eq!(stops.len(), 2);
    assert_eq!(stops[0]["geometry"]["coordinates"], json!([2.0, 2.0]));
    assert_eq!(stops[1]["geometry"]["coordinates"], json!([3.0, 3.0]));
    assert!(stops.iter().all(|s| s["id"] != t["stops"][0]["id"]));
    assert_eq!(u["created_at"], t["created_at"]);
    assert_eq!(read_v2(&app, id).await["name"], "new");

    // Stops not given stay.
    let (status, res) = v2(&app, "PUT", &format!("/v2/trips/{id}"), Some(&json!({"metadata": {"k": "w"}}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["trip"]["stops"], json!(stops));
    assert_eq!(res["trip"]["metadata"], json!({"k": "w"}));

    let (status, res) = v2(&app, "PUT", &format!("/v2/trips/{id}"), Some(&json!({"user_id": UNKNOWN_ID}))).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = v2(&app, "PUT", &format!("/v2/trips/{UNKNOWN_ID}"), Some(&json!({"name": "x"}))).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, UNKNOWN_ID);
    let bad = json!({"stops": [{"geometry": {"type": "Point", "coordinates": [0.0, 100.0]}}]});
    let (status, res) = v2(&app, "PUT", &format!("/v2/trips/{id}"), Some(&bad)).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "stops[0].geometry");

    let (status, res) = control_v2(&app, id, json!({"action": "start"})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let (status, res) = v2(&app, "PUT", &format!("/v2/trips/{id}"), Some(&json!({"name": "late"}))).await;
    assert_v2_error(status, &res, StatusCode::CONFLICT, "started");
    let got = read_v2(&app, id).await;
    assert_eq!(got["name"], "new");
    assert_eq!(got["trip_state"], "started");
});

both!(v2_controls_walk_the_states_and_set_totals, |app| async move {
    let user = named_user(&app, "Cy").await;
    let t = create_v2(
        &app,
        json!({"user_id": user, "stops": [{"name": "shop", "geometry_radius": 50,
        "geometry": {"type": "Point", "coordinates": [77.60, 12.98]}}]}),
    )
    .await;
    let id = t["id"].as_str().unwrap();
    let now = Utc::now();
    let at = |m: i64| ts(now - Duration::minutes(m));

    let (status, res) = control_v2(&app, id, json!({"action": "end"})).await;
    assert_v2_error(status, &res, StatusCode::CONFLICT, "created");
    let (status, res) = control_v2(&app, id, json!({"action": "go"})).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "action");
    let (status, res) = control_v2(&app, UNKNOWN_ID, json!({"action": "start"})).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, UNKNOWN_ID);

    let mut states = vec![t["trip_state"].as_str().unwrap().to_owned()];
    for (action, field, minutes) in
        [("start", "started_at", 10), ("pause", "paused_at", 8), ("resume", "resumed_at", 5)]
    {
        let (status, res) = control_v2(&app, id, json!({"action": action, field: at(minutes)})).await;
        assert_eq!(status, StatusCode::CREATED, "{action}: {res}");
        assert_eq!(res["code"], 201);
        let past = if action == "start" { "started".to_owned() } else { format!("{action}d") };
        assert_eq!(res["message"], format!("trip_{past}"));
        states.push(res["trip"]["trip_state"].as_str().unwrap().to_owned());
    }
    let (status, res) = control_v2(&app, id, json!({"action": "resume"})).await;
    assert_v2_error(status, &res, StatusCode::CONFLICT, "resumed");
    let (status, res) = control_v2(&app, id, json!({"action": "pause", "paused_at": at(6)})).await;
    assert_v2_error(status, &res, StatusCode::BAD_REQUEST, "paused_at");

    // One fix before the pause, one inside it (not counted), then a drive of 0.01° north after
    // the resume; the last fix reaches the stop.
    ingest(
        &app,
        &user,
        vec![
            json!({"coordinates": [77.59, 12.97], "recorded_at": at(9)}),
            json!({"coordinates": [77.70, 12.99], "recorded_at": at(7)}),
            json!({"coordinates": [77.60, 12.97], "recorded_at": at(4)}),
            json!({"coordinates": [77.60, 12.98], "recorded_at": at(3)}),
        ],
    )
    .await;
    let got = read_v2(&app, id).await;
    // The two fixes recorded before the resume came after it: late (domain::sequence), counted in
    // the figures but deriving nothing, so the trip's first derived fix is the one at −4 min.
    assert_eq!(got["start_location"]["coordinates"], json!({"type": "Point", "coordinates": [77.60, 12.97]}), "{got}");
    assert_eq!(got["stops"][0]["arrived_at"], at(3), "{got}");
    assert!(got["stops"][0]["departed_at"].is_null());

    let (status, res) = control_v2(&app, id, json!({"action": "end", "ended_at": at(1)})).await;
    assert_eq!((status, res["message"].clone()), (StatusCode::CREATED, json!("trip_ended")), "{res}");
    let e = &res["trip"];
    states.push(e["trip_state"].as_str().unwrap().to_owned());
    assert_eq!(states, ["created", "started", "paused", "resumed", "ended"]);
    assert_eq!(e["started_at"], at(10));
    assert_eq!(e["ended_at"], at(1));
    assert_eq!(e["total_duration"], 6 * 60, "9 minutes less a 3 minute pause: {e}");
    // The drive after the resume counts (0.01° of latitude here is 1,106 m); the fix inside the
    // pause and the straight line from where the trip paused to where it resumed (1,085 m) do not.
    let d = e["total_distance"].as_f64().unwrap();
    assert!((1095.0..1120.0).contains(&d), "only the stretch after the resume counts: {e}");
    assert_eq!(e["total_elevation_gain"], 0.0);
    assert_eq!(e["end_location"]["coordinates"], json!({"type": "Point", "coordinates": [77.60, 12.98]}));
    assert_eq!(count(e, "trip:started"), 1, "{e}");
    assert_eq!(count(e, "trip:completed"), 1, "{e}");
    for action in ["start", "pause", "resume", "end"] {
        let (status, res) = control_v2(&app, id, json!({"action": action})).await;
        assert_v2_error(status, &res, StatusCode::CONFLICT, "ended");
    }

    // The summary agrees with the stored totals.
    let (status, res) = v2(&app, "GET", &format!("/v2/trips/{id}/summary"), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["message"], "trip_summary");
    let s = &res["summary"];
    assert_eq!(s["trip_id"], id);
    assert_eq!(s["user_id"], user.as_str());
    assert_eq!(s["project_id"], app.project.project_id.as_str());
    assert_eq!(s["trip_status"], "completed");
    assert_eq!(s["distance_covered"], e["total_distance"]);
    assert_eq!(s["duration"], 6 * 60);
    assert_eq!(s["total_elevation_gain"], Value::Null, "no fix carries an altitude");
    assert_eq!(s["paused_intervals"], json!([{"paused_at": at(8), "resumed_at": at(5)}]));
    let route = s["route"].as_array().unwrap();
    assert_eq!(route.len(), 3, "{s}");
    assert_eq!(s["route_indexes"], json!([[1, 3]]), "{s}");
    for p in route {
        assert_eq!(p["activity"], "MOVING");
        for f in ["coordinates", "altitude", "recorded_at", "distance", "duration", "elevation_gain"] {
            assert!(p.get(f).is_some(), "route point lacks {f}: {p}");
        }
    }
    assert_eq!(route[0]["duration"], 60, "cumulative: active time from the start to the first fix");
    assert_eq!(route[1]["duration"], 3 * 60, "6 minutes from the start, less the 3 minute pause");
    assert_eq!(route[2]["duration"], 6 * 60, "the last point's is the trip's total");
    assert_eq!(route[1]["distance"], 0.0, "nothing across the pause");
    assert_eq!(route[2]["distance"], e["total_distance"]);
});

both!(v2_summary_shape_and_unknown_trip, |app| async move {
    let t = create_v2(&app, json!({})).await;
    let (status, res) = v2(&app, "GET", &format!("/v2/trips/{}/summary", t["id"].as_str().unwrap()), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let s = res["summary"].as_object().unwrap();
    let mut keys: Vec<&str> = s.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, crate::trips::summary::SUMMARY_KEYS);
    assert_eq!(s["trip_status"], "created");
    assert_eq!(s["route"], json!([]));
    assert_eq!(s["distance_covered"], 0.0);
    assert_eq!(s["duration"], 0);
    let (status, res) = v2(&app, "GET", &format!("/v2/trips/{UNKNOWN_ID}/summary"), None).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, UNKNOWN_ID);
    // The same unknown id in the v1/v3 envelope.
    let (status, res) = app.get(&format!("/v1/api/trips/summary/?trip_id={UNKNOWN_ID}")).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
});

both!(v2_concurrent_starts_let_exactly_one_win, |app| async move {
    let user = named_user(&app, "D").await;
    let t = create_v2(&app, json!({"user_id": user})).await;
    let id = t["id"].as_str().unwrap();
    let results = join_all((0..8).map(|_| control_v2(&app, id, json!({"action": "start"})))).await;
    assert_eq!(results.iter().filter(|(s, _)| *s == StatusCode::CREATED).count(), 1, "{results:?}");
    for (status, res) in results.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_v2_error(*status, res, StatusCode::CONFLICT, "started");
    }
    let got = read_v2(&app, id).await;
    assert_eq!(got["trip_state"], "started");
    assert_eq!(count(&got, "trip:started"), 1, "{got}");
});

both!(another_project_cannot_see_or_touch_our_trips, |app| async move {
    let user = app.create_user(json!({})).await;
    let ours = create(&app, "v1", json!({"user_id": user, "origins": [[1.0, 1.0]], "metadata": {"k": "v"}})).await;
    let id = ours["id"].as_str().unwrap().to_owned();
    let ours_v2 = create_v2(&app, json!({"user_id": user, "name": "ours"})).await;
    let id2 = ours_v2["id"].as_str().unwrap().to_owned();
    let before = get_trip(&app, "v1", &id).await;
    let before_v2 = read_v2(&app, &id2).await;

    let other = app.other_project().await;
    let key = Key::Raw(&other.api_key);
    for ver in ["v1", "v3"] {
        let (status, res) = app.call("GET", &format!("/{ver}/api/trips/?trip_id={id}"), key, None).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        let (status, res) = app.call("GET", &format!("/{ver}/api/trips/summary/?trip_id={id}"), key, None).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        let body = json!({"trip_id": id, "origins": [[2.0, 2.0]]});
        let (status, res) = app.call("PUT", &format!("/{ver}/api/trips/"), key, Some(&body)).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        // Nor can it assign our user.
        let body = json!({"user_id": user});
        let (status, res) = app.call("POST", &format!("/{ver}/api/trips/"), key, Some(&body)).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
        for action in ["start", "end"] {
            let body = json!({"trip_id": id, "action": action});
            let (status, res) = app.call("POST", &format!("/{ver}/api/trips/controls/"), key, Some(&body)).await;
            assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        }
        // Our v2 trip is not reachable through the other project's v1/v3 either.
        let (status, res) = app.call("GET", &format!("/{ver}/api/trips/?trip_id={id2}"), key, None).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    }
    let (status, res) = app.call("DELETE", &format!("/v3/api/trips/?trip_id={id}"), key, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    let (status, res) = app.call("GET", "/v1/api/trips/", key, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["trips"], json!([]));
    assert_eq!(res["data"]["pages"], 0);
    let today = Utc::now().date_naive();
    let range = format!("start_date={}&end_date={}", today - Duration::days(1), today + Duration::days(1));
    let (_, res) = app.call("GET", &format!("/v3/api/trips/?{range}"), key, None).await;
    assert_eq!(res["data"], json!([]));

    let bearer = format!("Bearer {}", other.access_token);
    let auth = [("Authorization", bearer.as_str())];
    for trip in [&id2, &id] {
        let calls: Vec<(&str, String, Option<Value>)> = vec![
            ("GET", format!("/v2/trips/{trip}"), None),
            ("PUT", format!("/v2/trips/{trip}"), Some(json!({"name": "theirs"}))),
            ("GET", format!("/v2/trips/{trip}/summary"), None),
            ("POST", format!("/v2/trips/{trip}/controls"), Some(json!({"action": "start"}))),
            ("DELETE", format!("/v2/trips/{trip}"), None),
        ];
        for (method, uri, body) in &calls {
            let (status, res) = with_headers(&app, method, uri, &auth, body.as_ref()).await;
            assert_v2_error(status, &res, StatusCode::NOT_FOUND, trip);
        }
    }
    let (status, res) = with_headers(&app, "GET", "/v2/trips", &auth, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["trips"], json!([]));
    let body = json!({"user_id": user});
    let (status, res) = with_headers(&app, "POST", "/v2/trips", &auth, Some(&body)).await;
    assert_v2_error(status, &res, StatusCode::NOT_FOUND, "user_id");

    // Ours are exactly as they were.
    assert_eq!(get_trip(&app, "v1", &id).await, before);
    assert_eq!(read_v2(&app, &id2).await, before_v2);
    let (_, res) = app.get("/v1/api/trips/").await;
    assert_eq!(res["data"]["trips"].as_array().unwrap().len(), 1);
    assert_eq!(list_v2(&app, "").await, (vec![id2.clone()], false));
});
