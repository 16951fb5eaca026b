//! Trips, v1 and v3: create, get, list, update, delete, lifecycle controls, quick trips,
//! summaries, events, races between concurrent moves.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};

mod races;
pub(crate) mod summary;

const VERSIONS: [&str; 2] = ["v1", "v3"];

/// Every field of the v1/v3 Trip (without `metadata`, which is returned only when set, and
/// `distance_covered`/`duration`, which ended trips carry).
const TRIP_FIELDS: [&str; 16] = [
    "id",
    "project_id",
    "user_id",
    "origins",
    "destinations",
    "events",
    "is_started",
    "is_ended",
    "is_deleted",
    "is_paused",
    "trip_started_at",
    "trip_ended_at",
    "created_at",
    "updated_at",
    "trip_tracking_url",
    "eta",
];

const UNKNOWN_ID: &str = "0123456789abcdef01234567";

pub fn is_ts(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.3f").is_ok() && s.len() == 23)
}

pub fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
}

/// `start_date`/`end_date` around today (a day either side, so a run across midnight still fits).
fn date_range() -> String {
    let today = Utc::now().date_naive();
    format!(
        "start_date={}&end_date={}",
        (today - Duration::days(1)).format("%Y-%m-%d"),
        (today + Duration::days(1)).format("%Y-%m-%d")
    )
}

/// Create a trip and return `data[0]`.
pub async fn create(app: &TestApp, ver: &str, body: Value) -> Value {
    let (status, res) = app.post(&format!("/{ver}/api/trips/"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res["status"], true, "{res}");
    assert_eq!(res["code"], 201, "{res}");
    let data = res["data"].as_array().expect("data is an array");
    assert_eq!(data.len(), 1, "{res}");
    data[0].clone()
}

/// A trip assigned to a new user; returns (trip id, user id).
async fn trip_with_user(app: &TestApp, ver: &str) -> (String, String) {
    let user = app.create_user(json!({})).await;
    let t =
        create(app, ver, json!({"user_id": user, "origins": [[77.59, 12.97]], "destinations": [[77.62, 12.93]]})).await;
    (t["id"].as_str().unwrap().to_owned(), user)
}

/// GET one trip by id (`data[0]`).
pub async fn get_trip(app: &TestApp, ver: &str, id: &str) -> Value {
    let (status, res) = app.get(&format!("/{ver}/api/trips/?trip_id={id}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let data = res["data"].as_array().expect("data is an array");
    assert_eq!(data.len(), 1, "{res}");
    data[0].clone()
}

pub async fn control(app: &TestApp, ver: &str, body: Value) -> (StatusCode, Value) {
    app.post(&format!("/{ver}/api/trips/controls/"), &body).await
}

/// A control that must succeed; returns the trip (`data[0]`).
async fn control_ok(app: &TestApp, ver: &str, id: &str, action: &str, extra: Value) -> Value {
    let mut body = json!({"trip_id": id, "action": action});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (status, res) = control(app, ver, body).await;
    assert_eq!(status, StatusCode::OK, "{action}: {res}");
    assert_eq!(res["code"], 200, "{res}");
    res["data"][0].clone()
}

async fn update(app: &TestApp, ver: &str, body: Value) -> (StatusCode, Value) {
    app.call("PUT", &format!("/{ver}/api/trips/"), Key::Secret, Some(&body)).await
}

fn events<'a>(trip: &'a Value, event_type: &str) -> Vec<&'a Value> {
    trip["events"].as_array().unwrap().iter().filter(|e| e["event_type"] == event_type).collect()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect()
}

pub async fn ingest(app: &TestApp, user: &str, locations: Vec<Value>) {
    let body = json!({"user_id": user, "locations": locations});
    let (status, res) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
}

#[track_caller]
fn assert_trip_location(l: &Value, trip_id: &str, loc_type: &str, lng_lat: [f64; 2]) {
    let o = l.as_object().unwrap();
    let mut expected = vec!["id", "trip_id", "created_at", "updated_at", "coordinates", "loc_type", "reached"];
    if loc_type == "origin" {
        expected.push("left");
    }
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort();
    expected.sort();
    assert_eq!(keys, expected, "{l}");
    assert_eq!(o["id"].as_str().unwrap().len(), 24, "{l}");
    assert_eq!(o["trip_id"], trip_id);
    assert!(is_ts(&o["created_at"]) && is_ts(&o["updated_at"]), "{l}");
    assert_eq!(o["coordinates"], json!({"type": "Point", "coordinates": lng_lat}));
    assert_eq!(o["loc_type"], loc_type);
    assert_eq!(o["reached"], false);
    if loc_type == "origin" {
        assert_eq!(o["left"], false);
    }
}

both!(create_returns_one_trip_with_every_field, |app| async move {
    let base = app.state.config.tracking_base_url.trim_end_matches('/').to_owned();
    for ver in VERSIONS {
        let user = app.create_user(json!({})).await;
        let body = json!({
            "user_id": user,
            "origins": [[77.59, 12.97], [77.60, 12.98]],
            "destinations": [[77.62, 12.93]],
            "metadata": {"order": "A-17", "priority": 2},
        });
        let t = create(&app, ver, body).await;
        let o = t.as_object().unwrap();
        let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
        keys.sort();
        let mut expected: Vec<&str> = TRIP_FIELDS.iter().copied().chain(["metadata"]).collect();
        expected.sort();
        assert_eq!(keys, expected, "{ver}: {t}");

        let id = t["id"].as_str().unwrap();
        assert_eq!(id.len(), 24);
        assert_eq!(t["project_id"], app.project.project_id.as_str());
        assert_eq!(t["user_id"], user.as_str());
        assert_eq!(t["events"], json!([]), "the response shows the trip as created");
        for flag in ["is_started", "is_ended", "is_deleted", "is_paused"] {
            assert_eq!(t[flag], false, "{ver}: {flag}");
        }
        assert!(t["trip_started_at"].is_null() && t["trip_ended_at"].is_null(), "{t}");
        assert!(is_ts(&t["created_at"]) && is_ts(&t["updated_at"]), "{t}");
        assert_eq!(t["metadata"], json!({"order": "A-17", "priority": 2}));

        let url = t["trip_tracking_url"].as_str().unwrap();
        let token = url.strip_prefix(&format!("{base}/")).unwrap_or_else(|| panic!("{url} is not under {base}"));
        assert_eq!(token.len(), 32, "{url}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{url}");

        let origins = t["origins"].as_array().unwrap();
        assert_eq!(origins.len(), 2);
        assert_trip_location(&origins[0], id, "origin", [77.59, 12.97]);
        assert_trip_location(&origins[1], id, "origin", [77.60, 12.98]);
        let destinations = t["destinations"].as_array().unwrap();
        assert_eq!(destinations.len(), 1);
        assert_trip_location(&destinations[0], id, "destination", [77.62, 12.93]);

        // The creation event is recorded and shows when the trip is read.
        let got = get_trip(&app, ver, id).await;
        let ev = got["events"].as_array().unwrap();
        assert_eq!(ev.len(), 1, "{got}");
        let e = &ev[0];
        assert_eq!(e["event_type"], "service:trip:created");
        assert_eq!(e["event_source"], "service:trip");
        assert_eq!(e["event_version"], "1.0");
        assert_eq!(e["trip_id"], id);
        assert_eq!(e["user_id"], user.as_str());
        assert_eq!(e["is_deleted"], false);
        assert_eq!(e["id"].as_str().unwrap().len(), 24);
        assert!(is_ts(&e["created_at"]), "{e}");
        // Apart from the event, the trip reads back as it was created.
        let mut without_events = got.clone();
        without_events["events"] = json!([]);
        assert_eq!(without_events, t, "{ver}");
    }
});

both!(create_with_an_empty_body_and_bad_input, |app| async move {
    for ver in VERSIONS {
        let t = create(&app, ver, json!({})).await;
        assert!(t["user_id"].is_null(), "{t}");
        assert_eq!(t["origins"], json!([]));
        assert_eq!(t["destinations"], json!([]));
        assert!(t.get("metadata").is_none(), "metadata only when given: {t}");
        for flag in ["is_started", "is_ended", "is_deleted", "is_paused"] {
            assert_eq!(t[flag], false, "{flag}");
        }
        let got = get_trip(&app, ver, t["id"].as_str().unwrap()).await;
        assert_eq!(events(&got, "service:trip:created").len(), 1, "{got}");

        let uri = format!("/{ver}/api/trips/");
        let (status, res) = app.post(&uri, &json!({"user_id": UNKNOWN_ID})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
        let (status, res) = app.post(&uri, &json!({"origins": [[200.0, 10.0]]})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "origins[0]");
        let (status, res) = app.post(&uri, &json!({"destinations": [[10.0]]})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "destinations[0]");
        let (status, res) = app.call("POST", &uri, Key::Publishable, Some(&json!({}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{res}");
        let (status, res) = app.call("POST", &uri, Key::None, Some(&json!({}))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{res}");
    }
    let (status, res) = app.get(&format!("/v1/api/trips/?trip_id={UNKNOWN_ID}")).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    let (status, res) = app.get("/v3/api/trips/?trip_id=not-an-id").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
});

both!(v1_list_pages_twelve_trips_newest_first, |app| async move {
    let mut created = Vec::new();
    for _ in 0..12 {
        created.push(create(&app, "v1", json!({})).await["id"].as_str().unwrap().to_owned());
    }
    let (status, res) = app.get("/v1/api/trips/").await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let d = res["data"].as_object().unwrap();
    let mut keys: Vec<&str> = d.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["next_page", "pages", "prev_page", "trips"]);
    assert_eq!((d["next_page"].clone(), d["pages"].clone(), d["prev_page"].clone()), (json!(2), json!(2), json!(null)));
    // Newest first, as Roam lists them.
    let newest: Vec<String> = created.iter().rev().cloned().collect();
    let first = ids(&d["trips"]);
    assert_eq!(first, newest[..10]);
    for t in d["trips"].as_array().unwrap() {
        for f in TRIP_FIELDS {
            assert!(t.get(f).is_some(), "listed trip lacks {f}: {t}");
        }
    }

    let (_, res) = app.get("/v1/api/trips/?page_number=2").await;
    let d = &res["data"];
    assert_eq!((d["next_page"].clone(), d["pages"].clone(), d["prev_page"].clone()), (json!(null), json!(2), json!(1)));
    assert_eq!(ids(&d["trips"]), newest[10..]);

    let (_, res) = app.get("/v1/api/trips/?page_number=3").await;
    assert_eq!(res["data"]["trips"], json!([]), "an empty list ends the paging");

    // Dates are optional in v1 and may be given.
    let (status, res) = app.get(&format!("/v1/api/trips/?{}", date_range())).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(ids(&res["data"]["trips"]), newest[..10]);
    let (status, res) = app.get("/v1/api/trips/?page_number=0").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "page_number");
});

both!(v3_list_needs_both_dates_and_returns_an_array, |app| async move {
    let mut created = Vec::new();
    for _ in 0..12 {
        created.push(create(&app, "v3", json!({})).await["id"].as_str().unwrap().to_owned());
    }
    let (status, res) = app.get("/v3/api/trips/").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "start_date");
    let today = Utc::now().date_naive().format("%Y-%m-%d");
    let (status, res) = app.get(&format!("/v3/api/trips/?start_date={today}")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "end_date");
    let (status, res) = app.get(&format!("/v3/api/trips/?end_date={today}")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "start_date");
    let (status, res) = app.get(&format!("/v3/api/trips/?start_date={today}&end_date={today}")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "end_date");

    let (status, res) = app.get(&format!("/v3/api/trips/?{}", date_range())).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert!(res["data"].is_array(), "{res}");
    let newest: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(ids(&res["data"]), newest[..10], "newest first");
    let (_, res) = app.get(&format!("/v3/api/trips/?{}&page_number=2", date_range())).await;
    assert_eq!(ids(&res["data"]), newest[10..]);
    // A range that holds none of them.
    let (_, res) = app.get("/v3/api/trips/?start_date=2020-01-01&end_date=2020-01-31").await;
    assert_eq!(res["data"], json!([]));
    // v1 and v3 trips are one collection.
    let (_, res) = app.get("/v1/api/trips/").await;
    assert_eq!(res["data"]["pages"], 2);
});

both!(list_filters_by_user_and_metadata, |app| async move {
    let a = app.create_user(json!({})).await;
    let b = app.create_user(json!({})).await;
    let t1 = create(&app, "v1", json!({"user_id": a, "metadata": {"team": "north", "n": 1}})).await;
    let t2 = create(&app, "v1", json!({"user_id": b, "metadata": {"team": "south", "n": 2}})).await;
    let t3 = create(&app, "v3", json!({"user_id": a, "metadata": {"team": "south", "n": 3}})).await;
    create(&app, "v1", json!({})).await;
    let id = |t: &Value| t["id"].as_str().unwrap().to_owned();

    let (_, res) = app.get(&format!("/v1/api/trips/?user_id={a}")).await;
    assert_eq!(ids(&res["data"]["trips"]), [id(&t3), id(&t1)], "newest first");
    assert_eq!(res["data"]["pages"], 1);
    let (_, res) = app.get("/v1/api/trips/?metadata=team:south").await;
    assert_eq!(ids(&res["data"]["trips"]), [id(&t3), id(&t2)]);
    let (_, res) = app.get(&format!("/v1/api/trips/?metadata=team:south&user_id={a}")).await;
    assert_eq!(ids(&res["data"]["trips"]), [id(&t3)]);
    let (_, res) = app.get("/v1/api/trips/?metadata=team:south,n:2").await;
    assert_eq!(ids(&res["data"]["trips"]), [id(&t2)]);
    let (_, res) = app.get("/v1/api/trips/?metadata=team:east").await;
    assert_eq!(res["data"]["trips"], json!([]));
    assert_eq!(res["data"]["pages"], 0);
    let (_, res) = app.get(&format!("/v3/api/trips/?{}&user_id={b}", date_range())).await;
    assert_eq!(ids(&res["data"]), [id(&t2)]);
    let (_, res) = app.get(&format!("/v3/api/trips/?{}&metadata=team:north", date_range())).await;
    assert_eq!(ids(&res["data"]), [id(&t1)]);
    let (status, res) = app.get("/v1/api/trips/?metadata=team").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "metadata");
});

both!(update_replaces_waypoints_reassigns_and_appends_one_event_per_call, |app| async move {
    for ver in VERSIONS {
        let a = app.create_user(json!({})).await;
        let b = app.create_user(json!({})).await;
        let t = create(
            &app,
            ver,
            json!({"user_id": a, "origins": [[77.59, 12.97]], "destinations": [[77.62, 12.93], [77.63, 12.94]]}),
        )
        .await;
        let id = t["id"].as_str().unwrap();

        let (status, res) = update(&app, ver, json!({"user_id": b})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
        let (status, res) = update(&app, ver, json!({"trip_id": UNKNOWN_ID})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        let (status, res) = update(&app, ver, json!({"trip_id": id, "user_id": UNKNOWN_ID})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
        let (status, res) = update(&app, ver, json!({"trip_id": id, "origins": [[0.0, 95.0]]})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "origins[0]");
        // Failed updates leave no trace.
        assert_eq!(get_trip(&app, ver, id).await["events"].as_array().unwrap().len(), 1);

        // Reassign the user and replace the origins; destinations not given stay as they were.
        let (status, res) = update(&app, ver, json!({"trip_id": id, "user_id": b, "origins": [[2.35, 48.85]]})).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        assert_eq!(res["status"], true);
        assert_eq!(res["code"], 201);
        let u = &res["data"][0];
        assert_eq!(res["data"].as_array().unwrap().len(), 1);
        assert_eq!(u["id"], id);
        assert_eq!(u["user_id"], b.as_str());
        let origins = u["origins"].as_array().unwrap();
        assert_eq!(origins.len(), 1);
        assert_trip_location(&origins[0], id, "origin", [2.35, 48.85]);
        assert_ne!(origins[0]["id"], t["origins"][0]["id"]);
        assert_eq!(u["destinations"], t["destinations"], "untouched destinations keep their ids");
        assert_eq!(u["trip_tracking_url"], t["trip_tracking_url"]);
        assert_eq!(u["created_at"], t["created_at"]);
        let ev = u["events"].as_array().unwrap();
        assert_eq!(ev.len(), 2, "{u}");
        assert_eq!(ev[0]["event_type"], "service:trip:created");
        assert_eq!(ev[1]["event_type"], "motion:trip:created");
        assert_eq!(ev[1]["event_source"], "motion:trip");
        assert_eq!(ev[1]["event_version"], "1.0");
        assert_eq!(ev[1]["trip_id"], id);

        // Replace the destinations; one more event, exactly.
        let (status, res) = update(&app, ver, json!({"trip_id": id, "destinations": [[13.40, 52.52]]})).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        let u = &res["data"][0];
        let dest = u["destinations"].as_array().unwrap();
        assert_eq!(dest.len(), 1);
        assert_trip_location(&dest[0], id, "destination", [13.40, 52.52]);
        assert_eq!(u["origins"], json!(origins));
        assert_eq!(events(u, "motion:trip:created").len(), 2);
        assert_eq!(u["events"].as_array().unwrap().len(), 3);

        // An update with nothing to change still counts as one call.
        let (status, res) = update(&app, ver, json!({"trip_id": id})).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        let got = get_trip(&app, ver, id).await;
        assert_eq!(events(&got, "motion:trip:created").len(), 3);
        assert_eq!(got["user_id"], b.as_str());

        // Only before the trip starts.
        control_ok(&app, ver, id, "start", json!({})).await;
        let (status, res) = update(&app, ver, json!({"trip_id": id, "origins": [[1.0, 1.0]]})).await;
        assert_error(status, &res, StatusCode::CONFLICT, "started");
        let got = get_trip(&app, ver, id).await;
        assert_eq!(events(&got, "motion:trip:created").len(), 3);
        assert_eq!(got["origins"], json!(origins));
    }
});

both!(v3_delete_hides_the_trip_and_blocks_its_start, |app| async move {
    let (id, _) = trip_with_user(&app, "v3").await;
    let (keep, _) = trip_with_user(&app, "v1").await;
    let (status, res) = app.call("DELETE", "/v3/api/trips/", Key::Secret, None).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
    let (status, res) = app.call("DELETE", &format!("/v3/api/trips/?trip_id={UNKNOWN_ID}"), Key::Secret, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");

    let (status, res) = app.call("DELETE", &format!("/v3/api/trips/?trip_id={id}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let o = res.as_object().unwrap();
    assert_eq!(o.len(), 4, "{res}");
    assert_eq!(res["status"], true);
    assert_eq!(res["code"], 200);
    assert!(res["data"].is_null());
    assert!(!res["msg"].as_str().unwrap().is_empty());

    for ver in VERSIONS {
        let (status, res) = app.get(&format!("/{ver}/api/trips/?trip_id={id}")).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        let (status, res) = control(&app, ver, json!({"trip_id": id, "action": "start"})).await;
        assert_error(status, &res, StatusCode::CONFLICT, "deleted");
        let (status, res) = update(&app, ver, json!({"trip_id": id})).await;
        assert_error(status, &res, StatusCode::CONFLICT, "deleted");
        let (status, res) = app.get(&format!("/{ver}/api/trips/summary/?trip_id={id}")).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    }
    // Not listed; the other trip is.
    let (_, res) = app.get("/v1/api/trips/").await;
    assert_eq!(ids(&res["data"]["trips"]), [keep.as_str()]);
    assert_eq!(res["data"]["pages"], 1);
    let (_, res) = app.get(&format!("/v3/api/trips/?{}", date_range())).await;
    assert_eq!(ids(&res["data"]), [keep.as_str()]);
    // Deleting twice: the trip is gone.
    let (status, res) = app.call("DELETE", &format!("/v3/api/trips/?trip_id={id}"), Key::Secret, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    // The v1 path deletes too (Roam documents both); the other trip is untouched until then.
    assert_eq!(get_trip(&app, "v1", &keep).await["is_deleted"], false);
    let (status, res) = app.call("DELETE", &format!("/v1/api/trips/?trip_id={keep}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
});

both!(controls_move_a_trip_through_its_lifecycle, |app| async move {
    for ver in VERSIONS {
        let (id, _) = trip_with_user(&app, ver).await;
        let now = Utc::now();
        let (t_start, t_pause, t_resume, t_end) =
            (now - Duration::minutes(30), now - Duration::minutes(20), now - Duration::minutes(15), now);

        let t = control_ok(&app, ver, &id, "start", json!({"started_at": ts(t_start)})).await;
        assert_eq!(
            (t["is_started"].clone(), t["is_paused"].clone(), t["is_ended"].clone()),
            (json!(true), json!(false), json!(false))
        );
        assert_eq!(t["trip_started_at"], ts(t_start));
        assert!(t["trip_ended_at"].is_null());
        assert!(t.get("distance_covered").is_none() && t.get("duration").is_none(), "{t}");
        let started = events(&t, "trip:started");
        assert_eq!(started.len(), 1, "{t}");
        assert_eq!(started[0]["trip_id"], id.as_str());

        let t = control_ok(&app, ver, &id, "pause", json!({"paused_at": ts(t_pause)})).await;
        assert_eq!(
            (t["is_started"].clone(), t["is_paused"].clone(), t["is_ended"].clone()),
            (json!(true), json!(true), json!(false))
        );
        let t = control_ok(&app, ver, &id, "resume", json!({"resumed_at": ts(t_resume)})).await;
        assert_eq!(
            (t["is_started"].clone(), t["is_paused"].clone(), t["is_ended"].clone()),
            (json!(true), json!(false), json!(false))
        );

        let t = control_ok(&app, ver, &id, "end", json!({"ended_at": ts(t_end)})).await;
        assert_eq!(
            (t["is_started"].clone(), t["is_paused"].clone(), t["is_ended"].clone()),
            (json!(true), json!(false), json!(true))
        );
        assert_eq!(t["trip_started_at"], ts(t_start));
        assert_eq!(t["trip_ended_at"], ts(t_end));
        assert_eq!(t["distance_covered"], 0.0, "no locations were recorded: {t}");
        assert_eq!(t["duration"], 25 * 60, "30 minutes less a 5 minute pause: {t}");
        assert_eq!(events(&t, "trip:completed").len(), 1, "{t}");
        assert_eq!(events(&t, "trip:started").len(), 1, "{t}");
        // As read back.
        let got = get_trip(&app, ver, &id).await;
        assert_eq!(got["is_ended"], true);
        assert_eq!(got["duration"], 25 * 60);
        assert!(got["distance_covered"].is_number());
    }
});

both!(illegal_moves_are_conflicts_naming_the_state, |app| async move {
    for ver in VERSIONS {
        let (id, _) = trip_with_user(&app, ver).await;
        let c = |action: &'static str| {
            let id = id.clone();
            let app = &app;
            async move { control(app, ver, json!({"trip_id": id, "action": action})).await }
        };
        for action in ["end", "pause", "resume"] {
            let (status, res) = c(action).await;
            assert_error(status, &res, StatusCode::CONFLICT, "created");
        }
        let (status, res) = c("finish").await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "action");
        let (status, res) = control(&app, ver, json!({"trip_id": id})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "action");
        let (status, res) = control(&app, ver, json!({"action": "start"})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
        let (status, res) = control(&app, ver, json!({"trip_id": UNKNOWN_ID, "action": "start"})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
        let (status, res) = control(&app, ver, json!({"trip_id": id, "action": "start", "started_at": "soon"})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "started_at");
        let future = ts(Utc::now() + Duration::hours(2));
        let (status, res) = control(&app, ver, json!({"trip_id": id, "action": "start", "started_at": future})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "started_at");

        let t0 = Utc::now() - Duration::minutes(10);
        control_ok(&app, ver, &id, "start", json!({"started_at": ts(t0)})).await;
        let (status, res) = c("start").await;
        assert_error(status, &res, StatusCode::CONFLICT, "started");
        let (status, res) = c("resume").await;
        assert_error(status, &res, StatusCode::CONFLICT, "started");
        // A move may not go back before the previous one.
        let before = ts(t0 - Duration::minutes(1));
        let (status, res) = control(&app, ver, json!({"trip_id": id, "action": "pause", "paused_at": before})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "paused_at");
        let t1 = t0 + Duration::minutes(2);
        control_ok(&app, ver, &id, "pause", json!({"paused_at": ts(t1)})).await;
        let (status, res) = c("pause").await;
        assert_error(status, &res, StatusCode::CONFLICT, "paused");
        let (status, res) = c("start").await;
        assert_error(status, &res, StatusCode::CONFLICT, "paused");
        let (status, res) =
            control(&app, ver, json!({"trip_id": id, "action": "resume", "resumed_at": ts(t1 - Duration::seconds(1))}))
                .await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "resumed_at");
        let (status, res) =
            control(&app, ver, json!({"trip_id": id, "action": "end", "ended_at": ts(t0 + Duration::minutes(1))}))
                .await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "ended_at");
        // A paused trip may end directly.
        let t = control_ok(&app, ver, &id, "end", json!({})).await;
        assert_eq!((t["is_paused"].clone(), t["is_ended"].clone()), (json!(false), json!(true)));
        for action in ["start", "pause", "resume", "end"] {
            let (status, res) = c(action).await;
            assert_error(status, &res, StatusCode::CONFLICT, "ended");
        }
        let got = get_trip(&app, ver, &id).await;
        assert_eq!(events(&got, "trip:started").len(), 1);
        assert_eq!(events(&got, "trip:completed").len(), 1);

        // No user, no start.
        let t = create(&app, ver, json!({})).await;
        let (status, res) = control(&app, ver, json!({"trip_id": t["id"], "action": "start"})).await;
        assert_error(status, &res, StatusCode::CONFLICT, "user");
        assert_eq!(get_trip(&app, ver, t["id"].as_str().unwrap()).await["is_started"], false);
    }
});

both!(quick_trip_needs_a_user_and_is_started, |app| async move {
    for ver in VERSIONS {
        let uri = format!("/{ver}/api/trips/quick/");
        let (status, res) = app.post(&uri, &json!({})).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "user_id");
        let (status, res) = app.post(&uri, &json!({"user_id": UNKNOWN_ID})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");

        let user = app.create_user(json!({})).await;
        let (status, res) = app.post(&uri, &json!({"user_id": user, "destinations": [[77.62, 12.93]]})).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        assert_eq!(res["code"], 201);
        let t = &res["data"][0];
        assert_eq!(res["data"].as_array().unwrap().len(), 1);
        assert_eq!(t["user_id"], user.as_str());
        assert_eq!(
            (t["is_started"].clone(), t["is_ended"].clone(), t["is_paused"].clone()),
            (json!(true), json!(false), json!(false))
        );
        assert!(is_ts(&t["trip_started_at"]), "{t}");
        assert_eq!(t["destinations"].as_array().unwrap().len(), 1);
        let got = get_trip(&app, ver, t["id"].as_str().unwrap()).await;
        assert_eq!(got["is_started"], true);
        assert_eq!(events(&got, "trip:started").len(), 1, "{got}");
        assert_eq!(events(&got, "service:trip:created").len(), 1, "{got}");
        // It can be ended like any other.
        control_ok(&app, ver, t["id"].as_str().unwrap(), "end", json!({})).await;
    }
});
