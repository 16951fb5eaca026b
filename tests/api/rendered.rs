//! Lists show each stored record as its view renders it: a list read after a change shows the
//! change, and what else the shape depends on (a time zone, the API version's id field) gives its
//! own answer. Users, geofences, locations and geofence events.

use axum::http::StatusCode;
use serde_json::{Value, json};

use chrono_tz::Tz;
use shared::domain::geofences::events::{self, EventView, GeofenceEvent};
use shared::domain::locations::{self, Location, LocationView};
use shared::domain::users::{self, user_json};
use shared::paging::PageNumber;
use shared::store::from_jsons;
use shared::time::DateRange;

use crate::both;
use crate::geofence_events::{DAY, at, fix, send, t0, tracked_user};
use crate::geofences::{HOME, circle, enabled_fence, fence, project, put, with};
use crate::helpers::{Key, TestApp};

async fn ok(app: &TestApp, uri: &str) -> Value {
    let (status, res) = app.get(uri).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {res}");
    res["data"].clone()
}

/// The entry of `list` (an array) whose `key` is `id`.
fn entry<'a>(list: &'a Value, key: &str, id: &str) -> &'a Value {
    list.as_array().expect("a list").iter().find(|e| e[key] == id).unwrap_or_else(|| panic!("{id} not in {list}"))
}

both!(a_listed_user_is_shown_as_it_is_now, |app| async move {
    let users = [app.create_user(json!({"n": 1})).await, app.create_user(json!({"n": 2})).await];
    for round in 0..3 {
        let listed = ok(&app, "/v1/api/user/").await;
        for u in &users {
            // The list's entry and the read of that user alone equal the record rendered afresh.
            let stored = users::get(app.state.store.as_ref(), &project(&app), u).await.unwrap().expect("stored");
            let alone = ok(&app, &format!("/v1/api/user/?user_id={u}")).await;
            assert_eq!(entry(&listed["users"], "id", u), &user_json(&stored, None), "round {round}");
            assert_eq!(&alone["users"][0], &user_json(&stored, None), "round {round}");
        }
        let want = if round == 0 { Value::Null } else { json!(format!("round {round}")) };
        assert_eq!(entry(&listed["users"], "id", &users[0])["description"], want, "round {round}");
        let body = json!({"user_id": users[0], "description": format!("round {}", round + 1), "metadata": {"round": round + 1}});
        let (status, res) = app.call("PUT", "/v1/api/user/", Key::Publishable, Some(&body)).await;
        assert_eq!(status, StatusCode::OK, "{res}");
    }
    let listed = ok(&app, "/v1/api/user/").await;
    let changed = entry(&listed["users"], "id", &users[0]);
    assert_eq!((&changed["description"], &changed["metadata"]), (&json!("round 3"), &json!({"round": 3})));

    // Another time zone: the same records shown in it, each time asked.
    let tokyo = ok(&app, "/v1/api/user/?timezone_offset=Asia/Tokyo").await;
    let utc = ok(&app, "/v1/api/user/").await;
    for u in &users {
        let (t, z) = (entry(&tokyo["users"], "id", u), entry(&utc["users"], "id", u));
        // Tokyo is 9 hours ahead all year: another text for the same instant.
        assert_ne!(t["created_at"], z["created_at"], "{t} / {z}");
        assert_eq!((&t["id"], &t["device_token"]), (&z["id"], &z["device_token"]));
    }
    assert_eq!(ok(&app, "/v1/api/user/?timezone_offset=Asia/Tokyo").await, tokyo);
    assert_eq!(ok(&app, "/v1/api/user/").await, utc);
});

both!(a_listed_fence_is_shown_as_it_is_now_under_each_versions_id, |app| async move {
    let id = fence(
        &app,
        json!({"coordinates": [13.4, 52.5], "geometry_type": "circle", "geometry_radius": 100, "description": "one"}),
    )
    .await;
    let range = crate::geofences::today_range();
    for (desc, round) in [("one", 0), ("two", 1), ("three", 2)] {
        let v1 = ok(&app, "/v1/api/geofence/").await;
        let v3 = ok(&app, &format!("/v3/api/geofence/?{range}")).await;
        let (a, b) = (entry(&v1["geofences"], "geofence_id", &id), entry(&v3["geofences"], "id", &id));
        // v1 names the id `geofence_id`, v3 `id`: one record, two shapes.
        assert!(a.get("id").is_none() && b.get("geofence_id").is_none(), "{a} / {b}");
        assert_eq!((&a["description"], &b["description"]), (&json!(desc), &json!(desc)), "round {round}");
        // The same as the read of that fence alone.
        let alone = ok(&app, &format!("/v1/api/geofence/?geofence_id={id}")).await;
        assert_eq!(a, &alone["geofences"][0]);
        let next = ["two", "three", "four"][round];
        let (status, res) = put(&app, "v1", json!({"geofence_id": id, "description": next})).await;
        assert_eq!(status, StatusCode::OK, "{res}");
    }
    // Another project's key lists none of them.
    let other = app.other_project().await;
    let (status, res) = app.call("GET", "/v1/api/geofence/", Key::Raw(&other.api_key), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["geofences"], json!([]));
});

both!(listed_fixes_and_events_are_shown_as_their_records_are, |app| async move {
    let fence = enabled_fence(&app, with(circle(HOME, 150), json!({"description": "gate"}))).await;
    let user = tracked_user(&app).await;
    let out = at(HOME, 600.0, 0.0);
    send(&app, &user, &[fix(out, 0), fix(HOME, 60), fix(out, 120), fix(HOME, 180)]).await;
    let (store, p) = (app.state.store.as_ref(), project(&app));
    let tokyo: Tz = "Asia/Tokyo".parse().unwrap();
    let (docs, _) = locations::list(store, &p, &user, None, PageNumber(1)).await.unwrap();
    let fixes: Vec<Location> = from_jsons(&docs).unwrap();
    for (query, tz) in [("", None), ("&timezone_offset=Asia/Tokyo", Some(tokyo)), ("", None)] {
        let listed = ok(&app, &format!("/v1/api/location/?user_id={user}{query}")).await;
        let fresh: Vec<Value> = fixes.iter().map(|l| serde_json::to_value(LocationView::new(l, tz)).unwrap()).collect();
        assert_eq!(listed["locations"], json!(fresh), "{query}");
    }
    let range = DateRange::parse(Some("2024-05-01"), Some("2024-05-02"), None).unwrap().unwrap();
    for _ in 0..2 {
        let (docs, _) = events::list(store, &p, range, Some(&user), None, PageNumber(1)).await.unwrap();
        let stored: Vec<GeofenceEvent> = from_jsons(&docs).unwrap();
        // The truth of the drive: in at 60 s, out at 120 s, in again at 180 s.
        let got: Vec<(&str, i64)> =
            stored.iter().map(|e| (e.event_type.as_str(), (e.recorded_at.0 - t0()).num_seconds())).collect();
        assert_eq!(got, [("motion:geofence:entry", 60), ("motion:geofence:exit", 120), ("motion:geofence:entry", 180)]);
        let listed = ok(&app, &format!("/v1/api/event/?{DAY}&user_id={user}")).await;
        let fresh: Vec<Value> = stored.iter().map(|e| serde_json::to_value(EventView::from(e)).unwrap()).collect();
        assert_eq!(listed["events"], json!(fresh));
        assert!(stored.iter().all(|e| e.geofence_id == fence));
        // The fence's description changes: events keep the one they were recorded with.
        let (status, res) = put(&app, "v1", json!({"geofence_id": fence, "description": "renamed"})).await;
        assert_eq!(status, StatusCode::OK, "{res}");
    }
});

both!(a_listed_trip_is_shown_as_it_is_now_and_an_eta_as_of_now, |app| async move {
    use crate::trips::{control, create, get_trip, ingest, ts};
    use chrono::{Duration, Utc};
    let user = app.create_user(json!({})).await;
    let today = Utc::now().date_naive();
    let v3 = format!("start_date={}&end_date={}", today - chrono::Days::new(1), today + chrono::Days::new(1));
    let lists = [format!("/v1/api/trips/?user_id={user}"), "/v1/api/trips/".into(), format!("/v3/api/trips/?{v3}")];
    // A trip without a destination (never an ETA), changed between reads: each list shows it as
    // the read of that trip alone renders it then (events, metadata, state).
    let plain = create(&app, "v1", json!({"user_id": user, "origins": [[13.40, 52.50]]})).await;
    let id = plain["id"].as_str().unwrap().to_owned();
    let steps = [
        ("PUT", "/v1/api/trips/", json!({"trip_id": id, "metadata": {"round": 1}})),
        ("POST", "/v1/api/trips/controls/", json!({"trip_id": id, "action": "start"})),
        ("POST", "/v1/api/trips/controls/", json!({"trip_id": id, "action": "end"})),
    ];
    let mut before = Value::Null;
    for (round, (method, uri, body)) in steps.iter().enumerate() {
        let alone = get_trip(&app, "v1", &id).await;
        assert_ne!(alone, before, "round {round} changed the trip");
        for uri in &lists {
            let listed = ok(&app, uri).await;
            let list = if uri.starts_with("/v3") { &listed } else { &listed["trips"] };
            assert_eq!(entry(list, "id", &id), &alone, "{uri}, round {round}");
        }
        let (status, res) = app.call(method, uri, Key::Secret, Some(body)).await;
        assert!(status.is_success(), "{method} {uri}: {res}");
        before = alone;
    }
    let (listed, alone) = (ok(&app, &lists[0]).await, get_trip(&app, "v1", &id).await);
    assert_eq!((entry(&listed["trips"], "id", &id), &alone["is_ended"]), (&alone, &json!(true)));

    // A trip heading to a destination, halted for the last three minutes: its arrival is now plus
    // the way left, so two reads a moment apart give two times (the list renders it each time).
    let moving = create(&app, "v1", json!({"user_id": user, "destinations": [[13.45, 52.50]]})).await;
    let mid = moving["id"].as_str().unwrap().to_owned();
    let start = json!({"trip_id": mid, "action": "start", "started_at": ts(Utc::now() - Duration::minutes(10))});
    assert_eq!(control(&app, "v1", start).await.0, StatusCode::OK);
    let per_deg = 111_320.0 * 52.5_f64.to_radians().cos();
    let fix = |secs_ago: i64, lng: f64| {
        json!({"coordinates": [lng, 52.50], "accuracy": 5,
        "recorded_at": ts(Utc::now() - Duration::seconds(secs_ago))})
    };
    let mut fixes: Vec<Value> = (0..12).map(|i| fix(300 - 10 * i, 13.40 + 100.0 * i as f64 / per_deg)).collect();
    let halt = 13.40 + 1100.0 / per_deg;
    fixes.extend((0..=18).map(|i| fix(180 - 10 * i, halt)));
    ingest(&app, &user, fixes).await;
    let arrival = |listed: &Value| entry(&listed["trips"], "id", &mid)["eta"]["arrival_at"].clone();
    let first = arrival(&ok(&app, &lists[0]).await);
    assert!(first.is_string(), "an ETA while under way");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let second = arrival(&ok(&app, &lists[0]).await);
    assert!(second.as_str() > first.as_str(), "halted: the arrival slides later ({first} then {second})");

    // Another project's key lists none of them.
    let other = app.other_project().await;
    let (status, res) = app.call("GET", "/v1/api/trips/", Key::Raw(&other.api_key), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert!(res["data"]["trips"].as_array().is_some_and(Vec::is_empty), "{res}");
});

both!(a_found_fence_is_shown_as_it_is_now_with_the_searchs_own_distance, |app| async move {
    use shared::domain::geofences::{self, geofence_json};
    let id = fence(&app, with(circle(HOME, 100), json!({"description": "one"}))).await;
    let (store, p) = (app.state.store.as_ref(), project(&app));
    let app = &app;
    let found = |d: f64| {
        let from = at(HOME, d, 0.0);
        let uri = format!("/v1/api/search/geofences/?location={},{}&radius=2000", from.1, from.0);
        async move { ok(app, &uri).await["geofences"][0].clone() }
    };
    for (round, next) in ["two", "three", "four"].iter().enumerate() {
        let stored = geofences::get(store, &p, &id).await.expect("stored");
        for d in [500.0, 1000.0, 500.0] {
            // The fence as v3 renders it afresh, and this search's distance to its edge.
            let mut got = found(d).await;
            let distance = got.as_object_mut().and_then(|o| o.remove("distance")).and_then(|v| v.as_f64());
            assert_eq!(got, geofence_json(&stored, "id"), "round {round}");
            let true_m = shared::geometry::LngLat { lng: HOME.0, lat: HOME.1 }
                .distance_m(shared::geometry::LngLat { lng: at(HOME, d, 0.0).0, lat: HOME.1 })
                - 100.0;
            assert!(distance.is_some_and(|m| (m - true_m).abs() < 0.006), "{distance:?} vs {true_m} (round {round})");
        }
        let (status, res) = put(app, "v1", json!({"geofence_id": id, "description": next})).await;
        assert_eq!(status, StatusCode::OK, "{res}");
    }
    assert_eq!(found(500.0).await["description"], "four");
    // Another project's key finds nothing there.
    let other = app.other_project().await;
    let uri = format!("/v1/api/search/geofences/?location={},{}&radius=2000", HOME.1, HOME.0);
    let (status, res) = app.call("GET", &uri, Key::Raw(&other.api_key), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["geofences"], json!([]));
});
