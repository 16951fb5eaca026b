//! Geofences, v1 and v3: create (plain and scoped), validation and update (the lists, deletes
//! and isolation between projects: `geofence_lists`). Helpers here are shared with `search`,
//! `geofence_events` and others.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use futures::StreamExt;
use serde_json::{Value, json};
use shared::domain::geofences::{self, CreateGeofence};
use shared::project::{KeyKind, Project};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};
use crate::trace::offset;
use crate::trips::is_ts;

pub const UNKNOWN_ID: &str = "0123456789abcdef01234567";
/// Where the fences of these tests live (Bengaluru).
pub const HOME: (f64, f64) = (77.5946, 12.9716);

/// Every field of a plain circle's create response (and of list items).
const CIRCLE_FIELDS: [&str; 14] = [
    "id",
    "account_id",
    "project_id",
    "geometry_type",
    "geometry_radius",
    "geometry_center",
    "is_enabled",
    "description",
    "tag",
    "color_code",
    "metadata",
    "is_deleted",
    "created_at",
    "updated_at",
];

pub fn project(app: &TestApp) -> Project {
    Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    }
}

pub fn circle(at: (f64, f64), radius: u32) -> Value {
    json!({"coordinates": [at.0, at.1], "geometry_type": "circle", "geometry_radius": radius})
}

pub fn polygon(ring: &[(f64, f64)]) -> Value {
    let coords: Vec<[f64; 2]> = ring.iter().map(|p| [p.0, p.1]).collect();
    json!({"coordinates": coords, "geometry_type": "polygon"})
}

/// An open square ring (counter-clockwise from the south-west corner), `half_m` from its centre.
pub fn square(at: (f64, f64), half_m: f64) -> Vec<(f64, f64)> {
    [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)]
        .iter()
        .map(|(x, y)| offset(at.0, at.1, x * half_m, y * half_m))
        .collect()
}

/// `body` with more fields merged in.
pub fn with(mut body: Value, more: Value) -> Value {
    for (k, v) in more.as_object().expect("object").clone() {
        body[k] = v;
    }
    body
}

/// Create a fence (v1 or v3) and return `data`.
pub async fn create_fence(app: &TestApp, ver: &str, body: &Value) -> Value {
    let (status, res) = app.post(&format!("/{ver}/api/geofence/"), body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res["status"], true, "{res}");
    assert_eq!(res["code"], 201, "{res}");
    res["data"].clone()
}

/// Create a fence through v1 and return its `geofence_id`.
pub async fn fence(app: &TestApp, body: Value) -> String {
    let d = create_fence(app, "v1", &body).await;
    d["geofence_id"].as_str().expect("geofence_id").to_owned()
}

/// Create an enabled fence and return its id.
pub async fn enabled_fence(app: &TestApp, body: Value) -> String {
    fence(app, with(body, json!({"is_enabled": true}))).await
}

pub async fn put(app: &TestApp, ver: &str, body: Value) -> (StatusCode, Value) {
    app.call("PUT", &format!("/{ver}/api/geofence/"), Key::Secret, Some(&body)).await
}

pub async fn delete(app: &TestApp, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    app.call("DELETE", uri, Key::Secret, body.as_ref()).await
}

/// `start_date`/`end_date` around today (a day either side, so a run across midnight still fits).
pub fn today_range() -> String {
    let today = Utc::now().date_naive();
    format!(
        "start_date={}&end_date={}",
        (today - Duration::days(1)).format("%Y-%m-%d"),
        (today + Duration::days(1)).format("%Y-%m-%d")
    )
}

/// Ids (under `key`) of `data.geofences`.
pub fn ids_of(res: &Value, key: &str) -> Vec<String> {
    res["data"]["geofences"]
        .as_array()
        .unwrap_or_else(|| panic!("no geofences: {res}"))
        .iter()
        .map(|g| g[key].as_str().expect("id").to_owned())
        .collect()
}

/// Ids on one page of a list (asserting 200).
pub async fn list_ids(app: &TestApp, uri: &str) -> Vec<String> {
    let (status, res) = app.get(uri).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {res}");
    // v1 fences carry `geofence_id` (as Roam's do), v3 fences `id`.
    ids_of(&res, if uri.starts_with("/v1/") { "geofence_id" } else { "id" })
}

/// A plain create body for the domain function.
pub fn create_input(body: Value) -> CreateGeofence {
    serde_json::from_value(body).expect("create body")
}

/// Create many fences through the domain function, 32 at a time; returns them in input order.
pub async fn create_many(app: &TestApp, bodies: Vec<Value>) -> Vec<geofences::Geofence> {
    let p = project(app);
    let store = app.state.store.clone();
    let mut out: Vec<(usize, geofences::Geofence)> = futures::stream::iter(bodies.into_iter().enumerate())
        .map(|(i, b)| {
            let (store, p) = (store.clone(), p.clone());
            async move { (i, geofences::create(store.as_ref(), &p, create_input(b)).await.expect("fence created")) }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, g)| g).collect()
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect();
    k.sort();
    k
}

fn sorted(mut v: Vec<&str>) -> Vec<String> {
    v.sort();
    v.into_iter().map(str::to_owned).collect()
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

/// The key of a fence's id: `geofence_id` in v1 (as Roam answers), `id` in v3.
fn id_key(ver: &str) -> &'static str {
    if ver == "v1" { "geofence_id" } else { "id" }
}

/// A circle's fields as `ver` answers them.
fn circle_fields(ver: &str) -> Vec<&'static str> {
    CIRCLE_FIELDS.iter().map(|f| if *f == "id" { id_key(ver) } else { *f }).collect()
}

/// A created circle's fields: v3 adds the active window's `enable_at` and `disable_at`, as
/// Roam's v3 create page shows them (the lists do not).
fn created_fields(ver: &str) -> Vec<&'static str> {
    let mut f = circle_fields(ver);
    if ver == "v3" {
        f.extend(["enable_at", "disable_at"]);
    }
    f
}

/// A create's answer as the list shows the fence (without v3's window fields).
fn as_listed(d: &Value) -> Value {
    let mut d = d.clone();
    if let Some(o) = d.as_object_mut() {
        o.remove("enable_at");
        o.remove("disable_at");
    }
    d
}

both!(create_circle_returns_every_field_in_v1_and_v3, |app| async move {
    for ver in ["v1", "v3"] {
        let body = with(
            circle(HOME, 250),
            json!({"description": "depot", "tag": "hub", "color_code": "00ff00", "metadata": {"zone": "north"}}),
        );
        let d = create_fence(&app, ver, &body).await;
        assert_eq!(keys(&d), sorted(created_fields(ver)), "{ver}: {d}");
        if ver == "v3" {
            assert_eq!((&d["enable_at"], &d["disable_at"]), (&Value::Null, &Value::Null), "no window: {d}");
        }
        let id = d[id_key(ver)].as_str().unwrap();
        assert!(id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert_eq!(d["account_id"], app.project.account_id.as_str());
        assert_eq!(d["project_id"], app.project.project_id.as_str());
        assert_eq!(d["geometry_type"], "circle");
        assert_eq!(d["geometry_radius"], 250);
        assert_eq!(d["geometry_center"], json!({"type": "Point", "coordinates": [HOME.0, HOME.1]}));
        assert_eq!(d["is_enabled"], false, "events are off by default");
        assert_eq!(d["is_deleted"], false);
        assert_eq!((d["description"].clone(), d["tag"].clone()), (json!("depot"), json!("hub")));
        assert_eq!(d["color_code"], "00ff00");
        assert_eq!(d["metadata"], json!({"zone": "north"}));
        assert!(is_ts(&d["created_at"]) && is_ts(&d["updated_at"]), "{d}");
        assert_eq!(d["created_at"], d["updated_at"]);
        // What create returned is what the list of the same version shows.
        let (_, res) = app.get(&format!("/{ver}/api/geofence/?geofence_id={id}&{}", today_range())).await;
        assert_eq!(res["data"]["geofences"][0], as_listed(&d), "{ver}");
    }
    // Without the optional fields: nulls and an empty metadata object.
    let d = create_fence(&app, "v1", &circle(HOME, 50)).await;
    assert_eq!(keys(&d), sorted(circle_fields("v1")));
    assert_eq!(
        (d["description"].clone(), d["tag"].clone(), d["color_code"].clone()),
        (Value::Null, Value::Null, Value::Null)
    );
    assert_eq!(d["metadata"], json!({}));
});

both!(create_polygon_closes_its_ring_and_centres_on_the_centroid, |app| async move {
    let ring = square(HOME, 200.0);
    for ver in ["v1", "v3"] {
        // Open ring: closed by the service; a radius is ignored for polygons.
        let d = create_fence(&app, ver, &with(polygon(&ring), json!({"geometry_radius": 300}))).await;
        assert_eq!(d["geometry_type"], "polygon");
        assert!(d.get("geometry_radius").is_none(), "{d}");
        assert_eq!(d["geometry"]["type"], "Polygon");
        let coords = d["geometry"]["coordinates"].as_array().unwrap();
        assert_eq!(coords.len(), 1, "one ring");
        let r = coords[0].as_array().unwrap();
        assert_eq!(r.len(), 5, "closed: {d}");
        assert_eq!(r[0], r[4]);
        for (i, p) in ring.iter().enumerate() {
            assert_eq!(r[i], json!([p.0, p.1]));
        }
        let c = &d["geometry_center"];
        assert_eq!(c["type"], "Point");
        let mean = |k: usize| ring.iter().map(|p| if k == 0 { p.0 } else { p.1 }).sum::<f64>() / 4.0;
        assert!((c["coordinates"][0].as_f64().unwrap() - mean(0)).abs() < 1e-7, "{c}");
        assert!((c["coordinates"][1].as_f64().unwrap() - mean(1)).abs() < 1e-7, "{c}");
        let mut expected = created_fields(ver);
        expected.retain(|f| *f != "geometry_radius");
        expected.push("geometry");
        assert_eq!(keys(&d), sorted(expected));
    }
    // A ring given closed stays as it is; the GeoJSON form (an array of rings) is taken too.
    let mut closed = ring.clone();
    closed.push(ring[0]);
    let d = create_fence(&app, "v1", &polygon(&closed)).await;
    assert_eq!(d["geometry"]["coordinates"][0].as_array().unwrap().len(), 5);
    let geojson: Vec<[f64; 2]> = closed.iter().map(|p| [p.0, p.1]).collect();
    let d = create_fence(&app, "v1", &json!({"coordinates": [geojson], "geometry_type": "polygon"})).await;
    assert_eq!(d["geometry"]["coordinates"][0].as_array().unwrap().len(), 5);
    // A triangle's centre is its centroid, the mean of its corners.
    let tri = [(77.60, 12.90), (77.61, 12.90), (77.60, 12.91)];
    let d = create_fence(&app, "v1", &polygon(&tri)).await;
    assert!(close(&d["geometry_center"]["coordinates"][0], 77.60 + 0.01 / 3.0), "{d}");
    assert!(close(&d["geometry_center"]["coordinates"][1], 12.90 + 0.01 / 3.0), "{d}");
});

both!(circle_radius_is_a_number_from_50_to_1000_kept_to_the_meter, |app| async move {
    for ok in [50, 1000] {
        let d = create_fence(&app, "v1", &circle(HOME, ok)).await;
        assert_eq!(d["geometry_radius"], ok);
    }
    // A float, as Roam's clients send it, is taken and kept to the nearest meter.
    for (given, kept) in [(json!(130.0), 130), (json!(130.4), 130), (json!(999.6), 1000)] {
        let d = create_fence(&app, "v3", &with(circle(HOME, 0), json!({"geometry_radius": given}))).await;
        assert_eq!(d["geometry_radius"], kept, "{given}");
    }
    // Outside the range before rounding: refused, not rounded into it.
    let outside = [json!(49.5), json!(1000.4)];
    for bad in [json!(49), json!(1001), json!(49.4), json!(1000.6), json!(0), json!(-100), json!("100")]
        .into_iter()
        .chain(outside)
    {
        let body = with(circle(HOME, 0), json!({"geometry_radius": bad}));
        let (status, res) = app.post("/v1/api/geofence/", &body).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "geometry_radius");
    }
    let (status, res) =
        app.post("/v3/api/geofence/", &json!({"coordinates": [HOME.0, HOME.1], "geometry_type": "circle"})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "geometry_radius");
    let (_, res) = app.get("/v1/api/geofence/").await;
    assert_eq!(res["data"]["geofences"].as_array().unwrap().len(), 5, "only the valid ones were stored");
});

both!(invalid_geometry_is_refused_naming_its_field, |app| async move {
    let (a, b, c) = ((77.60, 12.90), (77.61, 12.90), (77.61, 12.91));
    let cases: Vec<(Value, &str)> = vec![
        // Fewer than 3 distinct points.
        (polygon(&[a, b]), "coordinates"),
        (polygon(&[a, b, a]), "coordinates"),
        (polygon(&[a, b, b, a]), "coordinates"),
        // A bow-tie: its edges cross.
        (polygon(&[(77.60, 12.90), (77.61, 12.91), (77.61, 12.90), (77.60, 12.91)]), "coordinates"),
        // Collinear: no area.
        (polygon(&[a, (77.605, 12.90), b]), "coordinates"),
        // Out of range.
        (polygon(&[a, b, (77.61, 91.0)]), "coordinates"),
        (polygon(&[a, b, (181.0, 12.9)]), "coordinates"),
        (json!({"coordinates": [181.0, 12.9], "geometry_type": "circle", "geometry_radius": 100}), "coordinates"),
        (json!({"coordinates": [77.6, -90.5], "geometry_type": "circle", "geometry_radius": 100}), "coordinates"),
        (json!({"coordinates": [77.6], "geometry_type": "circle", "geometry_radius": 100}), "coordinates"),
        (json!({"coordinates": "here", "geometry_type": "polygon"}), "coordinates"),
        // Not a shape this service knows.
        (with(circle(HOME, 100), json!({"geometry_type": "square"})), "geometry_type"),
        // Crossing the antimeridian, or beyond ±85° latitude (the index covers neither).
        (circle((179.999, 0.0), 500), "coordinates"),
        (circle((-179.999, 10.0), 500), "coordinates"),
        (polygon(&[(179.99, 0.0), (-179.99, 0.0), (-179.99, 0.01)]), "coordinates"),
        (circle((10.0, 86.0), 100), "coordinates"),
        (circle((10.0, -86.0), 100), "coordinates"),
        (circle((10.0, 84.999), 500), "coordinates"),
        (polygon(&[(10.0, 85.5), (10.01, 85.5), (10.0, 85.51)]), "coordinates"),
        // Too large for the index (a 10 km square covers well over 98 cells).
        (polygon(&square(HOME, 5000.0)), "coordinates"),
    ];
    for (body, field) in cases {
        let (status, res) = app.post("/v1/api/geofence/", &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {res}");
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
    let (status, res) =
        app.post("/v1/api/geofence/", &json!({"geometry_type": "circle", "geometry_radius": 100})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "coordinates");
    // Without geometry_type, coordinates that are neither a position nor positions are named.
    for coordinates in [json!("here"), json!([]), json!([{"lng": 1}])] {
        let (status, res) =
            app.post("/v1/api/geofence/", &json!({"coordinates": coordinates, "geometry_radius": 100})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "coordinates");
    }
    // Right next to the limits is fine.
    create_fence(&app, "v1", &circle((179.9, 0.0), 1000)).await;
    create_fence(&app, "v1", &circle((10.0, 84.9), 1000)).await;
    create_fence(&app, "v1", &polygon(&[a, b, c])).await;
    let (_, res) = app.get("/v1/api/geofence/").await;
    assert_eq!(res["data"]["geofences"].as_array().unwrap().len(), 3, "{res}");
});

both!(color_code_is_three_or_six_hex_digits_without_hash, |app| async move {
    for ok in ["fff", "00ff00", "ABCdef"] {
        let d = create_fence(&app, "v1", &with(circle(HOME, 100), json!({"color_code": ok}))).await;
        assert_eq!(d["color_code"], ok);
    }
    for bad in ["#fff", "ffff", "ggg", "#00ff00", "0f0f0f0", ""] {
        let (status, res) = app.post("/v1/api/geofence/", &with(circle(HOME, 100), json!({"color_code": bad}))).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "color_code");
    }
    let id = fence(&app, circle(HOME, 100)).await;
    let (status, res) = put(&app, "v1", json!({"geofence_id": id, "color_code": "#fff"})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "color_code");
});

both!(scoped_create_returns_its_own_shape, |app| async move {
    let (u1, u2, u3) =
        (app.create_user(json!({})).await, app.create_user(json!({})).await, app.create_user(json!({})).await);
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "drivers", "users": [u3]})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let window = json!([true, "2024-01-01T00:00:00.000", "2030-01-01T00:00:00.000"]);
    let body =
        with(circle(HOME, 300), json!({"user_ids": [u1, u2, u1], "group_ids": ["drivers"], "is_enabled": window}));
    let d = create_fence(&app, "v1", &body).await;
    assert_eq!(
        keys(&d),
        sorted(vec![
            "geofence_id",
            "geometry_type",
            "geometry_radius",
            "geometry_center",
            "is_enabled",
            "user_ids",
            "group_ids",
            "is_deleted",
            "created_at",
            "updated_at"
        ]),
        "{d}"
    );
    assert_eq!(d["geometry_radius"], 300);
    assert_eq!(d["geometry_center"], json!({"type": "Point", "coordinates": [HOME.0, HOME.1]}));
    assert_eq!(d["is_enabled"], window);
    let mut users: Vec<String> = serde_json::from_value(d["user_ids"].clone()).unwrap();
    users.sort();
    let mut expected = vec![u1.clone(), u2.clone()];
    expected.sort();
    assert_eq!(users, expected, "each user once");
    assert_eq!(d["group_ids"], json!(["drivers"]));
    assert!(is_ts(&d["created_at"]) && is_ts(&d["updated_at"]));
    // Listed with the Geofence fields plus the scope, is_enabled still an array.
    let id = d["geofence_id"].as_str().unwrap();
    let (_, res) = app.get(&format!("/v1/api/geofence/?geofence_id={id}")).await;
    let g = &res["data"]["geofences"][0];
    assert_eq!(g["geofence_id"], id);
    assert_eq!(g["is_enabled"], window);
    assert_eq!(g["group_ids"], json!(["drivers"]));
    assert_eq!(g["user_ids"].as_array().unwrap().len(), 2);

    // Only a window flag, no users or groups: applies to everyone; open-ended window.
    let d = create_fence(&app, "v1", &with(circle(HOME, 100), json!({"is_enabled": [false, null, null]}))).await;
    assert_eq!(d["is_enabled"], json!([false, null, null]));
    assert_eq!((d["user_ids"].clone(), d["group_ids"].clone()), (json!([]), json!([])));

    // Unknown users and groups are named; nothing is stored.
    let other = app.other_project().await;
    let (status, res) = app
        .call("POST", "/v1/api/user/", Key::Raw(&other.api_key), Some(&json!({"app_type": 1, "device_token": "t"})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let foreign = res["data"]["user_id"].as_str().unwrap().to_owned();
    let before = list_ids(&app, "/v1/api/geofence/").await;
    for (scope, field, named) in [
        (json!({"user_ids": [u1, UNKNOWN_ID]}), "user_ids", UNKNOWN_ID.to_owned()),
        (json!({"user_ids": [foreign]}), "user_ids", foreign.clone()),
        (json!({"group_ids": ["drivers", "ghosts"]}), "group_ids", "ghosts".to_owned()),
    ] {
        let (status, res) = app.post("/v1/api/geofence/", &with(circle(HOME, 100), scope)).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
        assert_error(status, &res, StatusCode::BAD_REQUEST, &named);
    }
    for bad in
        [json!(["yes"]), json!([true, "tomorrow", null]), json!([true, "2025-01-02T00:00:00", "2025-01-01T00:00:00"])]
    {
        let (status, res) = app.post("/v1/api/geofence/", &with(circle(HOME, 100), json!({"is_enabled": bad}))).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "is_enabled");
    }
    assert_eq!(list_ids(&app, "/v1/api/geofence/").await, before);
});

both!(update_changes_the_given_fields_in_v1_and_v3, |app| async move {
    let id =
        fence(&app, with(circle(HOME, 100), json!({"tag": "a", "description": "d0", "metadata": {"k": "v"}}))).await;
    let created = app.get(&format!("/v1/api/geofence/?geofence_id={id}")).await.1["data"]["geofences"][0].clone();

    let (status, res) = put(&app, "v1", json!({"geofence_id": id, "color_code": "abc", "is_enabled": true})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!((res["status"].clone(), res["code"].clone()), (json!(true), json!(200)));
    let d = &res["data"];
    assert_eq!(keys(d), sorted(circle_fields("v1")));
    assert_eq!((d["color_code"].clone(), d["is_enabled"].clone()), (json!("abc"), json!(true)));
    assert_eq!((d["tag"].clone(), d["description"].clone()), (json!("a"), json!("d0")), "untouched fields stay");
    assert_eq!(d["metadata"], json!({"k": "v"}));
    assert_eq!(d["created_at"], created["created_at"]);
    assert!(d["updated_at"].as_str().unwrap() >= created["updated_at"].as_str().unwrap());

    let (status, res) = put(
        &app,
        "v3",
        json!({"geofence_id": id, "tag": "b", "description": "d1", "metadata": {"x": "1"}, "is_enabled": false}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (_, res) = app.get(&format!("/v1/api/geofence/?geofence_id={id}")).await;
    let g = &res["data"]["geofences"][0];
    assert_eq!(
        (
            g["tag"].clone(),
            g["description"].clone(),
            g["metadata"].clone(),
            g["is_enabled"].clone(),
            g["color_code"].clone()
        ),
        (json!("b"), json!("d1"), json!({"x": "1"}), json!(false), json!("abc"))
    );

    // A polygon's update returns its geometry.
    let pid = fence(&app, polygon(&square(HOME, 100.0))).await;
    let (status, res) = put(&app, "v3", json!({"geofence_id": pid, "tag": "p"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["geometry"]["coordinates"][0].as_array().unwrap().len(), 5);
    assert_eq!(res["data"]["tag"], "p");

    // Unknown ids are 404; v3 documents the id as an integer, which is taken (and matches none).
    for ver in ["v1", "v3"] {
        let (status, res) = put(&app, ver, json!({"geofence_id": UNKNOWN_ID, "tag": "x"})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
        let (status, res) = put(&app, ver, json!({"geofence_id": 12345, "tag": "x"})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
        let (status, res) = put(&app, ver, json!({"tag": "x"})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "geofence_id");
    }
});

both!(geometry_type_is_inferred_from_the_coordinates_when_left_out, |app| async move {
    // Roam's own examples send no geometry_type: a position and a radius make a circle, an
    // array of positions (or of rings) a polygon.
    for ver in ["v1", "v3"] {
        let d = create_fence(&app, ver, &json!({"coordinates": [HOME.0, HOME.1], "geometry_radius": 130.0})).await;
        assert_eq!((d["geometry_type"].clone(), d["geometry_radius"].clone()), (json!("circle"), json!(130)), "{d}");
        let ring: Vec<[f64; 2]> = square(HOME, 100.0).iter().map(|p| [p.0, p.1]).collect();
        let d = create_fence(&app, ver, &json!({"coordinates": ring})).await;
        assert_eq!(d["geometry_type"], "polygon", "{d}");
        assert!(d.get("geometry_radius").is_none(), "{d}");
        let d = create_fence(&app, ver, &json!({"coordinates": [ring]})).await;
        assert_eq!(d["geometry_type"], "polygon", "{d}");
        assert!(d[id_key(ver)].is_string(), "{ver} names its id {}: {d}", id_key(ver));
    }
    // A moving geofence is always a circle: its geometry_type may be left out too.
    let u = app.create_user(json!({})).await;
    let (status, res) = app.post("/v3/api/moving-geofence/", &json!({"users": [u], "geometry_radius": 100.0})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(
        (res["data"]["geometry_type"].clone(), res["data"]["geometry_radius"].clone()),
        (json!("circle"), json!(100))
    );
    // A circle still needs its radius; a stated type that disagrees with the shape is refused.
    let (status, res) = app.post("/v1/api/geofence/", &json!({"coordinates": [HOME.0, HOME.1]})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "geometry_radius");
    let (status, res) =
        app.post("/v1/api/geofence/", &json!({"coordinates": [HOME.0, HOME.1], "geometry_type": "polygon"})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "coordinates");
});
