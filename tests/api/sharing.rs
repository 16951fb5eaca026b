//! Sharing trips: `trip_tracking_url` on every trip version, project settings
//! (`tracking_link_ttl_hours`), link expiry after the trip's end, revocation, and `eta` in trip
//! responses; each operation also tried with another project's key.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};
use crate::trips::{create, get_trip, ingest, ts};

const SETTINGS: &str = "/v1/api/project/settings/";
const REVOKE: &str = "/v1/api/trips/revoke-link/";

fn token(url: &Value) -> String {
    let url = url.as_str().unwrap_or_else(|| panic!("trip_tracking_url is not text: {url}"));
    let t = url.rsplit('/').next().unwrap().to_owned();
    assert!(t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()), "{url}");
    t
}

/// The status of a tracking link's data (200 while it works, 404 once it does not).
async fn link_status(app: &TestApp, token: &str) -> StatusCode {
    app.call("GET", &format!("/track/{token}/data"), Key::None, None).await.0
}

async fn v2(app: &TestApp, method: &str, uri: &str, body: Option<&Value>) -> Value {
    let (status, res) = app.call(method, uri, Key::Bearer, body).await;
    assert!(status.is_success(), "{method} {uri}: {status} {res}");
    res
}

fn v2_body(user: &str) -> Value {
    json!({"user_id": user, "name": "Delivery", "stops": [
        {"name": "Depot", "geometry": {"type": "Point", "coordinates": [13.377, 52.5163]}, "geometry_radius": 50},
        {"name": "Customer", "geometry": {"type": "Point", "coordinates": [13.420, 52.5163]}, "geometry_radius": 50},
    ]})
}

both!(v2_trips_carry_a_working_tracking_link_in_every_response, |app| async move {
    let user = app.create_user(json!({})).await;
    let created = v2(&app, "POST", "/v2/trips/", Some(&v2_body(&user))).await["trip"].clone();
    let id = created["id"].as_str().unwrap().to_owned();
    let t = token(&created["trip_tracking_url"]);
    assert_eq!(link_status(&app, &t).await, StatusCode::OK);
    let got = v2(&app, "GET", &format!("/v2/trips/{id}"), None).await;
    assert_eq!(got["trip"]["trip_tracking_url"], created["trip_tracking_url"]);
    let list = v2(&app, "GET", "/v2/trips/", None).await;
    assert_eq!(list["trips"][0]["trip_tracking_url"], created["trip_tracking_url"], "{list}");
    let updated = v2(&app, "PUT", &format!("/v2/trips/{id}"), Some(&json!({"name": "Renamed"}))).await;
    assert_eq!(updated["trip"]["trip_tracking_url"], created["trip_tracking_url"]);
    // Not started: no estimate.
    for t in [&created, &got["trip"], &list["trips"][0], &updated["trip"]] {
        assert!(t.as_object().unwrap().contains_key("eta") && t["eta"].is_null(), "{t}");
    }
});

both!(project_settings_default_validate_and_stay_in_their_project, |app| async move {
    let (status, res) = app.get(SETTINGS).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"], json!({"tracking_link_ttl_hours": 24, "retention_days": null}));

    let (status, res) = app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"tracking_link_ttl_hours": 48}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["tracking_link_ttl_hours"], 48);
    assert_eq!(app.get(SETTINGS).await.1["data"]["tracking_link_ttl_hours"], 48);

    for bad in [json!(-1), json!(8761), json!(2.5), json!("48"), json!(null)] {
        let (status, res) =
            app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"tracking_link_ttl_hours": bad}))).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "tracking_link_ttl_hours");
    }
    let (status, res) = app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"link_ttl": 5}))).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "link_ttl");
    let (status, res) = app.get(&format!("{SETTINGS}?ttl=1")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "ttl");
    let (status, res) = app.call("PUT", SETTINGS, Key::Secret, Some(&json!([1]))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{res}");
    assert_eq!(app.get(SETTINGS).await.1["data"]["tracking_link_ttl_hours"], 48, "a refused change changes nothing");

    // The publishable SDK key ships in apps: 403; no key: 401.
    for method in ["GET", "PUT"] {
        let body = json!({"tracking_link_ttl_hours": 1});
        let (status, res) = app.call(method, SETTINGS, Key::Publishable, Some(&body)).await;
        assert_error(status, &res, StatusCode::FORBIDDEN, "Api-Key");
        let (status, res) = app.call(method, SETTINGS, Key::None, Some(&body)).await;
        assert_error(status, &res, StatusCode::UNAUTHORIZED, "Api-Key");
    }

    // Another project's key reads and changes its own settings only.
    let other = app.other_project().await;
    let (_, res) = app.call("GET", SETTINGS, Key::Raw(&other.api_key), None).await;
    assert_eq!(res["data"]["tracking_link_ttl_hours"], 24, "{res}");
    let body = json!({"tracking_link_ttl_hours": 2});
    let (status, _) = app.call("PUT", SETTINGS, Key::Raw(&other.api_key), Some(&body)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(app.get(SETTINGS).await.1["data"]["tracking_link_ttl_hours"], 48);
});

both!(a_link_expires_the_projects_ttl_after_the_trip_ends, |app| async move {
    let user = app.create_user(json!({})).await;
    let trip = create(&app, "v3", json!({"user_id": user, "destinations": [[13.4, 52.5]]})).await;
    let id = trip["id"].as_str().unwrap().to_owned();
    let t = token(&trip["trip_tracking_url"]);
    let now = Utc::now();
    for (action, at, field) in
        [("start", now - Duration::hours(30), "started_at"), ("end", now - Duration::hours(25), "ended_at")]
    {
        let (status, res) =
            app.post("/v3/api/trips/controls/", &json!({"trip_id": id, "action": action, field: ts(at)})).await;
        assert_eq!(status, StatusCode::OK, "{res}");
    }
    assert_eq!(link_status(&app, &t).await, StatusCode::NOT_FOUND, "ended 25 h ago, default 24 h");
    let page = app.router.clone();
    let req = axum::http::Request::get(format!("/track/{t}")).body(axum::body::Body::empty()).unwrap();
    assert_eq!(tower::ServiceExt::oneshot(page, req).await.unwrap().status(), StatusCode::NOT_FOUND);

    app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"tracking_link_ttl_hours": 26}))).await;
    assert_eq!(link_status(&app, &t).await, StatusCode::OK, "26 h: still within");
    // Another project's settings do not reach this project's links.
    let other = app.other_project().await;
    app.call("PUT", SETTINGS, Key::Raw(&other.api_key), Some(&json!({"tracking_link_ttl_hours": 0}))).await;
    assert_eq!(link_status(&app, &t).await, StatusCode::OK);
    app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"tracking_link_ttl_hours": 25}))).await;
    assert_eq!(link_status(&app, &t).await, StatusCode::NOT_FOUND, "exactly 25 h: expired");

    // A trip under way never expires, whatever the setting.
    app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"tracking_link_ttl_hours": 0}))).await;
    let live = create(&app, "v1", json!({"user_id": user})).await;
    let live_id = live["id"].as_str().unwrap();
    let (status, _) = app.post("/v1/api/trips/controls/", &json!({"trip_id": live_id, "action": "start"})).await;
    assert_eq!(status, StatusCode::OK);
    let lt = token(&live["trip_tracking_url"]);
    assert_eq!(link_status(&app, &lt).await, StatusCode::OK);
    app.post("/v1/api/trips/controls/", &json!({"trip_id": live_id, "action": "end"})).await;
    assert_eq!(link_status(&app, &lt).await, StatusCode::NOT_FOUND, "ttl 0: closed as it ends");
});

both!(revoking_a_link_issues_a_new_one_and_the_old_is_gone_at_once, |app| async move {
    let user = app.create_user(json!({})).await;
    let v1 = create(&app, "v1", json!({"user_id": user, "destinations": [[13.4, 52.5]]})).await;
    let v2t = v2(&app, "POST", "/v2/trips/", Some(&v2_body(&user))).await["trip"].clone();
    for (trip, ver) in [(&v1, "v1"), (&v2t, "v2")] {
        let id = trip["id"].as_str().unwrap();
        let old = token(&trip["trip_tracking_url"]);
        assert_eq!(link_status(&app, &old).await, StatusCode::OK);

        // Another project's key: the trip is not found there, and its link keeps working.
        let other = app.other_project().await;
        let (status, res) = app.call("POST", REVOKE, Key::Raw(&other.api_key), Some(&json!({"trip_id": id}))).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        assert_eq!(link_status(&app, &old).await, StatusCode::OK, "{ver}: untouched by another project");
        let (status, res) = app.call("POST", REVOKE, Key::Publishable, Some(&json!({"trip_id": id}))).await;
        assert_error(status, &res, StatusCode::FORBIDDEN, "Api-Key");

        let (status, res) = app.post(REVOKE, &json!({"trip_id": id})).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        assert_eq!(res["data"]["trip_id"], id);
        let new = token(&res["data"]["trip_tracking_url"]);
        assert_ne!(new, old);
        assert_eq!(link_status(&app, &old).await, StatusCode::NOT_FOUND, "{ver}: old link gone at once");
        assert_eq!(link_status(&app, &new).await, StatusCode::OK, "{ver}: new link works");
        let now_url = if ver == "v1" {
            get_trip(&app, "v3", id).await["trip_tracking_url"].clone()
        } else {
            v2(&app, "GET", &format!("/v2/trips/{id}"), None).await["trip"]["trip_tracking_url"].clone()
        };
        assert_eq!(now_url, res["data"]["trip_tracking_url"], "{ver}: the trip's url is the new one");
    }
    let (status, res) = app.post(REVOKE, &json!({})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
    let (status, res) = app.post(REVOKE, &json!({"trip_id": "0123456789abcdef01234567"})).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    let (status, res) = app.post(REVOKE, &json!({"trip_id": 5})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
});

/// Fixes every 10 s driving east at 10 m/s from `from`, ending `minutes_ago` minutes ago.
fn drive(from: [f64; 2], n: i64, minutes_ago: i64) -> Vec<Value> {
    let end = Utc::now() - Duration::minutes(minutes_ago);
    let per_deg = 111_320.0 * (from[1].to_radians()).cos();
    (0..n)
        .map(|i| {
            let t = end - Duration::seconds(10 * (n - 1 - i));
            json!({"coordinates": [from[0] + (100.0 * i as f64) / per_deg, from[1]], "recorded_at": ts(t), "accuracy": 5})
        })
        .collect()
}

both!(eta_reports_the_next_stop_and_the_destination_while_under_way, |app| async move {
    let user = app.create_user(json!({})).await;
    // v2: the depot left behind, heading to the customer 3 km east at 10 m/s.
    let trip = v2(&app, "POST", "/v2/trips/", Some(&v2_body(&user))).await["trip"].clone();
    let id = trip["id"].as_str().unwrap().to_owned();
    let start = json!({"action": "start", "started_at": ts(Utc::now() - Duration::minutes(10))});
    v2(&app, "POST", &format!("/v2/trips/{id}/controls"), Some(&start)).await;
    ingest(&app, &user, drive([13.377, 52.5163], 12, 0)).await;
    let got = v2(&app, "GET", &format!("/v2/trips/{id}"), None).await["trip"].clone();
    let eta = &got["eta"];
    assert_eq!(eta["target"], "stop", "{got}");
    assert_eq!(eta["stop_id"], got["stops"][1]["id"], "the depot is arrived at: the customer is next");
    let left = eta["distance_remaining"].as_f64().unwrap();
    assert!((1700.0..1900.0).contains(&left), "≈ 2.9 km east minus 1.1 km driven, minus the radius: {left}");
    let at = chrono::NaiveDateTime::parse_from_str(eta["arrival_at"].as_str().unwrap(), "%Y-%m-%dT%H:%M:%S%.3f")
        .unwrap()
        .and_utc();
    let secs = (at - Utc::now()).num_seconds();
    // 1.8 km at ≈ 10 m/s, times the detour learned from 1.1 km of straight road (≈ 1.04): ≈ 187 s.
    assert!((165..215).contains(&secs), "arrival in {secs} s: {eta}");
    let list = v2(&app, "GET", "/v2/trips/", None).await;
    assert_eq!(list["trips"][0]["eta"], got["eta"], "the list reports it too");

    // v1/v3: the destination; another project's key cannot read it.
    let t1 = create(&app, "v3", json!({"user_id": user, "destinations": [[13.420, 52.5163]]})).await;
    let id1 = t1["id"].as_str().unwrap();
    // Started as the drive above began: the same fixes give it its speed.
    let start = json!({"trip_id": id1, "action": "start", "started_at": ts(Utc::now() - Duration::minutes(10))});
    assert_eq!(app.post("/v3/api/trips/controls/", &start).await.0, StatusCode::OK);
    let got = get_trip(&app, "v3", id1).await;
    assert_eq!(got["eta"]["target"], "destination", "{got}");
    assert!(got["eta"].get("stop_id").is_none());
    let other = app.other_project().await;
    let (status, _) = app.call("GET", &format!("/v3/api/trips/?trip_id={id1}"), Key::Raw(&other.api_key), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Ended: null.
    let (status, res) = app.post("/v3/api/trips/controls/", &json!({"trip_id": id1, "action": "end"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert!(res["data"][0].as_object().is_some_and(|t| t.contains_key("eta") && t["eta"].is_null()), "{res}");
});

both!(eta_is_unknown_when_lost, |app| async move {
    let user = app.create_user(json!({})).await;
    let t = create(&app, "v1", json!({"user_id": user, "destinations": [[13.420, 52.5163]]})).await;
    let id = t["id"].as_str().unwrap();
    let start = json!({"trip_id": id, "action": "start", "started_at": ts(Utc::now() - Duration::minutes(40))});
    assert_eq!(app.post("/v1/api/trips/controls/", &start).await.0, StatusCode::OK);
    // The last fix is 15 minutes old.
    ingest(&app, &user, drive([13.377, 52.5163], 12, 15)).await;
    assert!(get_trip(&app, "v1", id).await["eta"].is_null());
});
