//! The trip events list (`GET /v1/api/event/trips/`, Roam's "Get Trip Events"): a user's trip
//! events by date, newest first, one trip on request, the causing fix's fields, paging, bad
//! input, and another project's key.

use axum::http::StatusCode;
use chrono::{Days, Duration, Utc};
use serde_json::{Value, json};

use shared::store::{Query, SkRange, Table};

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

/// The user's trip-events copies in `days()` (ids, newest first), read in one query, and the sum
/// of the list's own counts (`history_pages` buckets) when they are all valid, else None.
async fn stored_list(app: &TestApp, user: &str) -> (Vec<String>, Option<u64>) {
    let s = app.state.store.as_ref();
    // domain::trips::events::user_events_pk.
    let pk = format!("{}#UTE#{user}", crate::geofences::project(app).project_id);
    let (from, to) = days();
    let range = shared::time::DateRange {
        start: format!("{from}T00:00:00Z").parse().unwrap(),
        end: format!("{to}T23:59:59.999Z").parse().unwrap(),
    };
    let (lo, hi) = shared::ids::id_range(&range);
    let q = Query::new(&pk, SkRange::Between(lo, hi)).descending();
    let ids =
        s.query(Table::Main, &q).await.unwrap().items.iter().map(|i| i["sk"].as_str().unwrap().to_owned()).collect();
    (ids, crate::history_pages::counted(app, Table::Main, &pk).await)
}

/// Every page of the list (of one trip when given), and one past the end, against `want`.
async fn assert_pages(app: &TestApp, user: &str, trip: Option<&str>, want: &[String]) {
    let (from, to) = days();
    let only = trip.map(|t| format!("&trip_id={t}")).unwrap_or_default();
    let path = format!("/v1/api/event/trips/?start_date={from}&end_date={to}&user_id={user}{only}");
    crate::helpers::assert_api_pages(app, &path, "events", "id", want).await;
}

both!(trip_event_pages_are_exact_and_counted_by_the_writes, |app| async move {
    let user = app.create_user(json!({})).await;
    let mut trips = Vec::new();
    for _ in 0..23 {
        trips.push(new_trip(&app, &user).await);
    }
    // Events of the trip calls and of the processor (the user reaches a started trip's origin).
    let now = Utc::now();
    let busy = &trips[2];
    let body = json!({"trip_id": busy, "action": "start", "started_at": ts(now - Duration::minutes(10))});
    let (s, r) = app.post("/v1/api/trips/controls/", &body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let locs: Vec<Value> = (0..3)
        .map(|i| json!({"coordinates": ORIGIN, "recorded_at": ts(now - Duration::minutes(5 - i)), "horizontal_accuracy": 5.0}))
        .collect();
    let (s, r) = app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": locs})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    for t in &trips[20..] {
        let (s, r) = app.post("/v1/api/trips/controls/", &json!({"trip_id": t, "action": "start"})).await;
        assert_eq!(s, StatusCode::OK, "{r}");
    }

    // Counted as written, before any list read could count them: every copy once.
    let (all, counted) = stored_list(&app, &user).await;
    assert_eq!(all.len(), 23 + 1 + 1 + 3, "{all:?}");
    assert_eq!(counted, Some(all.len() as u64));
    assert_pages(&app, &user, None, &all).await;

    // One trip: its events among the user's, newest first, paged the same way.
    for (t, n) in [(busy, 3), (&trips[0], 1), (&trips[21], 2)] {
        let (_, r) = app.get(&format!("/v1/api/trips/?trip_id={t}")).await;
        let own: std::collections::BTreeSet<&str> =
            r["data"][0]["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
        let mine: Vec<String> = all.iter().filter(|id| own.contains(id.as_str())).cloned().collect();
        assert_eq!(mine.len(), n, "{r}");
        assert_pages(&app, &user, Some(t), &mine).await;
    }
});

both!(erasing_a_trips_new_owner_leaves_the_first_owners_list_counted, |app| async move {
    let (first, next) = (app.create_user(json!({})).await, app.create_user(json!({})).await);
    new_trip(&app, &first).await;
    // Given to another user before it started: its creation stays in the first user's list.
    let trip = new_trip(&app, &first).await;
    let (s, r) = app.call("PUT", "/v1/api/trips/", Key::Secret, Some(&json!({"trip_id": trip, "user_id": next}))).await;
    assert!(s.is_success(), "{r}");
    let (before, _) = stored_list(&app, &first).await;
    assert_eq!(before.len(), 2);
    assert_pages(&app, &first, None, &before).await;
    // Erasing the new owner erases the trip, and its copy in the first user's list.
    let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={next}"), Key::Secret, None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (after, _) = stored_list(&app, &first).await;
    assert_eq!(after.len(), 1);
    assert_pages(&app, &first, None, &after).await;
    assert_eq!(stored_list(&app, &first).await.1, Some(1), "recounted by the read");
});

/// Page cost of the trip events list against page number (`--ignored --nocapture`; DynamoDB
/// Local adds capacity units read): `WAYMARK_TRIP_EVENTS` events (default 20,000, one a minute ≈
/// 14 days) in a user's list, counted as the trip writes count them; page 1, the middle and the
/// last, against the former count-and-skip read of the same list.
#[tokio::test]
#[ignore]
async fn trip_event_page_cost_does_not_grow_with_the_page_number() {
    use shared::domain::trips::{TripEvent, events as trip_events};
    use shared::paging::{Order, PageNumber};
    use std::time::Instant;
    let n: usize = std::env::var("WAYMARK_TRIP_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    for backend in [crate::helpers::Backend::Embedded, crate::helpers::Backend::DynamoDb] {
        if matches!(backend, crate::helpers::Backend::DynamoDb)
            && std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_none()
        {
            continue;
        }
        let (app, units) = crate::helpers::metered_app(backend).await;
        let p = crate::geofences::project(&app);
        let user = app.create_user(json!({})).await;
        let pk = format!("{}#UTE#{user}", p.project_id);
        let start = Utc::now() - Duration::days(15);
        let s = app.state.store.as_ref();
        for part in (0..n).collect::<Vec<_>>().chunks(1000) {
            let items = part
                .iter()
                .map(|&i| {
                    let id = shared::ids::id_at(start + Duration::minutes(i as i64), 1);
                    let e = json!({"id": id, "trip_id": "t", "user_id": user, "event_type": "service:trip:created",
                        "created_at": ts(start), "is_deleted": false});
                    shared::store::to_item(&pk, &id, &e).unwrap()
                })
                .collect();
            let (_, unsynced) = shared::domain::history_pages::put_new_counted(s, Table::Main, items).await.unwrap();
            unsynced.durable().await.unwrap();
        }
        let range = shared::time::DateRange { start: start - Duration::days(1), end: Utc::now() };
        let last = n.div_ceil(10);
        for page in [1, last / 2, last] {
            let (u0, t) = (units(), Instant::now());
            let (got, info) = trip_events::list(s, &p, &user, None, range, PageNumber(page)).await.unwrap();
            let (el, u) = (t.elapsed(), units() - u0);
            assert_eq!(info.pages, last);
            let (u0, t) = (units(), Instant::now());
            let (lo, hi) = shared::ids::id_range(&range);
            let (old, _) = shared::domain::list_pages::list_page_in::<TripEvent>(
                s,
                Table::Main,
                &pk,
                SkRange::Between(lo, hi),
                PageNumber(page),
                None,
                Order::NewestFirst,
            )
            .await
            .unwrap();
            let old: Vec<TripEvent> = shared::store::from_jsons(&old).unwrap();
            let (el0, u_old) = (t.elapsed(), units() - u0);
            assert_eq!(
                got.iter().map(|e| &e.event.id).collect::<Vec<_>>(),
                old.iter().map(|e| &e.id).collect::<Vec<_>>()
            );
            eprintln!(
                "[{backend:?}] {n} events, page {page:>5}: counted {:>8.2} ms {u:>7.1} RCU; count and skip {:>9.2} ms {u_old:>8.1} RCU",
                el.as_secs_f64() * 1e3,
                el0.as_secs_f64() * 1e3
            );
        }
    }
}
