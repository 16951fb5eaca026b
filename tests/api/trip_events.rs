//! The trip events list (`GET /v1/api/event/trips/`, Roam's "Get Trip Events"): a user's trip
//! events by date, newest first, one trip on request, the causing fix's fields, paging, bad
//! input, and another project's key.

use axum::http::StatusCode;
use chrono::{Days, Duration, Utc};
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};

const ORIGIN: [f64; 2] = [2.3522, 48.8566];

use crate::trips::ts;

/// Dates around now (yesterday to tomorrow, so a run at midnight still covers what it made).
fn days() -> (String, String) {
    let today = Utc::now().date_naive();
    ((today - Days::new(1)).to_string(), (today + Days::new(1)).to_string())
}

async fn events(app: &TestApp, query: &str) -> (StatusCode, Value) {
    let (from, to) = days();
    app.get(&format!("/v1/api/event/trips/?start_date={from}&end_date={to}&{query}")).await
}

async fn new_trip(app: &TestApp, user: &str) -> String {
    let (s, r) = app.post("/v1/api/trips/", &json!({"user_id": user, "origins": [ORIGIN]})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    r["data"][0]["id"].as_str().unwrap().to_owned()
}

both!(a_users_trip_events_list_newest_first_with_the_fix_that_caused_them, |app| async move {
    let user = app.create_user(json!({})).await;
    let first = new_trip(&app, &user).await;
    let trip = new_trip(&app, &user).await;
    let now = Utc::now();
    let body = json!({"trip_id": trip, "action": "start", "started_at": ts(now - Duration::minutes(10))});
    let (s, r) = app.post("/v1/api/trips/controls/", &body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    // Three fixes at the origin: the trip's user reaches it.
    let locs: Vec<Value> = (0..3)
        .map(|i| {
            json!({"coordinates": ORIGIN, "recorded_at": ts(now - Duration::minutes(5 - i)), "horizontal_accuracy": 5.0,
                "speed": 0.5, "course": 90.0, "altitude": 35.0, "activity": "STOP"})
        })
        .collect();
    let (s, r) = app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": locs})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");

    let (s, r) = events(&app, &format!("user_id={user}")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["msg"], "Success.");
    let list = r["data"]["events"].as_array().unwrap();
    let types: Vec<&str> = list.iter().map(|e| e["event_type"].as_str().unwrap()).collect();
    // Newest first: the fix-caused event is recorded at the fix's time, before the created events
    // and the start (all stamped when they happened, minutes later).
    assert_eq!(types.len(), 4, "{types:?}");
    assert!(types.contains(&"trip:user_reached_origin"), "{types:?}");
    let ids: Vec<&str> = list.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let reached = list.iter().find(|e| e["event_type"] == "trip:user_reached_origin").unwrap();
    assert_eq!(reached["trip_id"], trip.as_str());
    assert_eq!(reached["user_id"], user.as_str());
    assert_eq!(reached["location"]["type"], "Point");
    assert_eq!(reached["location"]["coordinates"], json!(ORIGIN));
    assert!(reached["location_id"].as_str().is_some_and(|s| s.len() == 24), "{reached}");
    assert!(reached["trip_location_id"].is_string(), "{reached}");
    for k in ["speed", "course", "altitude", "horizontal_accuracy"] {
        assert!(reached[k].is_number(), "{k}: {reached}");
    }
    assert_eq!(reached["activity"], "STOP");
    assert!(reached["recorded_at"].as_str().unwrap() >= ts(now - Duration::minutes(5)).as_str());
    let created = list.iter().find(|e| e["trip_id"] == first.as_str()).unwrap();
    assert_eq!(created["event_type"], "service:trip:created");
    assert!(created.get("location").is_none(), "{created}");

    // One trip only.
    let (s, r) = events(&app, &format!("user_id={user}&trip_id={first}")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let list = r["data"]["events"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{r}");
    assert_eq!(list[0]["trip_id"], first.as_str());

    // A range before anything happened holds nothing.
    let (s, r) =
        app.get(&format!("/v1/api/event/trips/?user_id={user}&start_date=2020-01-01&end_date=2020-01-02")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["events"], json!([]));
    assert_eq!(r["data"]["pages"], 0);
});

both!(trip_events_page_by_ten, |app| async move {
    let user = app.create_user(json!({})).await;
    for _ in 0..11 {
        new_trip(&app, &user).await;
    }
    let (_, r) = events(&app, &format!("user_id={user}")).await;
    assert_eq!(r["data"]["events"].as_array().unwrap().len(), 10, "{r}");
    assert_eq!((r["data"]["pages"].clone(), r["data"]["next_page"].clone()), (json!(2), json!(2)));
    let (_, r2) = events(&app, &format!("user_id={user}&page_number=2")).await;
    let rest = r2["data"]["events"].as_array().unwrap();
    assert_eq!(rest.len(), 1, "{r2}");
    assert_eq!(r2["data"]["prev_page"], 1);
    // The oldest comes last.
    let last_of_first = r["data"]["events"][9]["id"].as_str().unwrap();
    assert!(rest[0]["id"].as_str().unwrap() < last_of_first);
});

both!(trip_events_need_user_and_dates_and_refuse_the_unknown, |app| async move {
    let user = app.create_user(json!({})).await;
    let (from, to) = days();
    let (s, r) = app.get(&format!("/v1/api/event/trips/?start_date={from}&end_date={to}")).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "user_id");
    assert_eq!(r["errors"][0]["field"], "user_id", "{r}");
    let (s, r) = app.get(&format!("/v1/api/event/trips/?user_id={user}")).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "start_date");
    let (s, r) = app.get(&format!("/v1/api/event/trips/?user_id={user}&start_date={to}&end_date={from}")).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "end_date");
    let (s, r) = events(&app, &format!("user_id={user}&event_type=entry")).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "event_type");
    let (s, r) = events(&app, &format!("user_id={user}&page_number=0")).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "page_number");
    let (s, r) = events(&app, "user_id=0123456789abcdef01234567").await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    let (s, r) = events(&app, &format!("user_id={user}&trip_id=0123456789abcdef01234567")).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "trip_id");
});

both!(another_projects_key_sees_no_trip_events, |app| async move {
    let user = app.create_user(json!({})).await;
    let trip = new_trip(&app, &user).await;
    let other = app.other_project().await;
    let (from, to) = days();
    let q = format!("/v1/api/event/trips/?user_id={user}&start_date={from}&end_date={to}");
    let (s, r) = app.call("GET", &q, Key::Raw(&other.api_key), None).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    // Their own user asking for our trip: the trip is not theirs.
    let (s, r) = app
        .call("POST", "/v1/api/user/", Key::Raw(&other.api_key), Some(&json!({"app_type": 1, "device_token": "t"})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let theirs = r["data"]["user_id"].as_str().unwrap().to_owned();
    let q = format!("/v1/api/event/trips/?user_id={theirs}&trip_id={trip}&start_date={from}&end_date={to}");
    let (s, r) = app.call("GET", &q, Key::Raw(&other.api_key), None).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "trip_id");
    let q = format!("/v1/api/event/trips/?user_id={theirs}&start_date={from}&end_date={to}");
    let (s, r) = app.call("GET", &q, Key::Raw(&other.api_key), None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["events"], json!([]));
});
