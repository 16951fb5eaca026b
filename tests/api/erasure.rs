//! Erasure: `DELETE /v1/api/user/` removes a user and everything derived from them. A rich history
//! (geofence entries and exits, a trip with a tracking link, a group, moving fences, stays,
//! webhook messages) is erased, then both tables are scanned whole: no item may name the user in
//! its keys or any attribute, while a second user's data stays as it was.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use shared::pipeline::erasure;
use shared::project::{KeyKind, Project};
use shared::store::{Item, Table};

use crate::geofence_events::at;
use crate::geofences::HOME;
use crate::helpers::{Key, TestApp, assert_error};
use crate::receiver::{Mode, Receiver};
use crate::trips::ts;
use crate::{both, both_alone};

/// Every item of both tables whose JSON mentions `needle` anywhere (keys or attributes).
async fn items_naming(app: &TestApp, needle: &str) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for table in [Table::Main, Table::Locations] {
        for item in app.state.store.scan_all(table).await.expect("scan") {
            // Webhook bodies are stored deflated: read as sent.
            let body = item.get("body").and_then(Value::as_str).map(shared::domain::webhooks::stored_body::decode);
            let text = serde_json::to_string(&item).expect("json") + &body.and_then(Result::ok).unwrap_or_default();
            if text.contains(needle) {
                out.insert((format!("{table:?}"), key(&item, "pk"), key(&item, "sk")));
            }
        }
    }
    out
}

fn key(item: &Item, k: &str) -> String {
    item.get(k).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn fix(p: (f64, f64), t: DateTime<Utc>) -> Value {
    json!({"coordinates": [p.0, p.1], "recorded_at": ts(t), "accuracy": 5.0})
}

/// Drive from `a` to `b` at 10 m/s, a fix every 10 s, from `t`; returns the fixes and the end time.
fn drive(a: (f64, f64), b: (f64, f64), t: DateTime<Utc>, meters: f64) -> (Vec<Value>, DateTime<Utc>) {
    let n = (meters / 100.0).ceil() as i64;
    let fixes = (0..=n)
        .map(|i| {
            let f = i as f64 / n as f64;
            fix((a.0 + (b.0 - a.0) * f, a.1 + (b.1 - a.1) * f), t + chrono::Duration::seconds(10 * i))
        })
        .collect();
    (fixes, t + chrono::Duration::seconds(10 * n))
}

/// Stay at `p` for `minutes`, a fix every 30 s.
fn stay(p: (f64, f64), t: DateTime<Utc>, minutes: i64) -> (Vec<Value>, DateTime<Utc>) {
    let fixes = (0..=minutes * 2).map(|i| fix(p, t + chrono::Duration::seconds(30 * i))).collect();
    (fixes, t + chrono::Duration::seconds(60 * minutes))
}

async fn ok(app: &TestApp, method: &str, uri: &str, body: Value) -> Value {
    let (s, r) = app.call(method, uri, Key::Secret, Some(&body)).await;
    assert!(s.is_success(), "{method} {uri}: {s} {r}");
    r
}

async fn ingest(app: &TestApp, user: &str, fixes: &[Value]) {
    for chunk in fixes.chunks(200) {
        ok(app, "POST", "/v1/api/location/", json!({"user_id": user, "locations": chunk})).await;
    }
}

/// A user with geofence events on.
async fn tracked(app: &TestApp) -> String {
    let u = app.create_user(json!({"name": "someone"})).await;
    ok(app, "PUT", "/v1/api/user/", json!({"user_id": u, "geofence_events": true, "description": "driver"})).await;
    u
}

struct World {
    erased: String,
    kept: String,
    token: String,
    kept_token: String,
    day: String,
    fixes: usize,
}

/// The rich history: fences (one for everyone, one scoped to the erased user, one scoped to both
/// users), a group of both, moving fences following the erased user alone and both, a webhook
/// endpoint with deliveries made, a started trip for each user, and for the erased user a drive
/// through the circle, a stay inside it (dwell, a closed stay) and a stay at the end where the
/// kept user waits (a moving-fence entry for the kept user).
async fn world(app: &TestApp) -> World {
    let (u, v) = (tracked(app).await, tracked(app).await);
    let rx = Receiver::start(Mode::Ok).await;
    let hook = ok(app, "POST", "/v1/api/webhooks/", json!({"url": rx.url, "events": ["*"]})).await;
    rx.trust(hook["data"]["secret"].as_str().unwrap());
    let end = at(HOME, 1500.0, 0.0);
    let circle = |extra: Value| {
        let mut b = json!({"coordinates": [HOME.0, HOME.1], "geometry_type": "circle", "geometry_radius": 200,
            "is_enabled": true, "description": "depot"});
        b.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        b
    };
    let window = json!([true, "2024-01-01T00:00:00.000", "2030-01-01T00:00:00.000"]);
    ok(app, "POST", "/v1/api/geofence/", circle(json!({}))).await;
    // Where the erased user ends, inside (an inside state is left).
    ok(app, "POST", "/v1/api/geofence/", circle(json!({"coordinates": [end.0, end.1]}))).await;
    ok(app, "POST", "/v1/api/geofence/", circle(json!({"user_ids": [u], "is_enabled": window}))).await;
    ok(app, "POST", "/v1/api/geofence/", circle(json!({"user_ids": [u, v], "is_enabled": window}))).await;
    ok(app, "POST", "/v1/api/group/user/", json!({"group_id": "crew", "users": [u, v]})).await;
    let moving = json!({"geometry_type": "circle", "geometry_radius": 100, "is_enabled": true});
    let mut alone = moving.clone();
    alone["users"] = json!([u]);
    ok(app, "POST", "/v3/api/moving-geofence/", alone).await;
    let mut both = moving;
    both["users"] = json!([u, v]);
    ok(app, "POST", "/v3/api/moving-geofence/", both).await;

    let start = Utc::now() - chrono::Duration::minutes(120);
    let trip = |user: &str| json!({"user_id": user, "origins": [[HOME.0, HOME.1]], "destinations": [[end.0, end.1]]});
    let mut tokens = Vec::new();
    for user in [&u, &v] {
        let t = ok(app, "POST", "/v1/api/trips/", trip(user)).await;
        let id = t["data"][0]["id"].as_str().unwrap().to_owned();
        let url = t["data"][0]["trip_tracking_url"].as_str().unwrap().to_owned();
        tokens.push(url.rsplit('/').next().unwrap().to_owned());
        ok(app, "POST", "/v1/api/trips/controls/", json!({"trip_id": id, "action": "start", "started_at": ts(start)}))
            .await;
    }

    // The kept user waits where the erased one will end, and has a history of their own.
    let (mut kept, _) = stay(end, start, 30);
    kept.extend(drive(end, at(end, 0.0, 900.0), start + chrono::Duration::minutes(31), 900.0).0);
    let (kept_wait, _) = stay(end, start + chrono::Duration::minutes(34), 2);
    kept.extend(kept_wait);
    ingest(app, &v, &kept).await;

    let mut fixes = Vec::new();
    let (f, t) = drive(at(HOME, -1000.0, 0.0), HOME, start + chrono::Duration::minutes(1), 1000.0);
    fixes.extend(f);
    let (f, t) = stay(HOME, t, 10);
    fixes.extend(f);
    let (f, t) = drive(HOME, end, t, 1500.0);
    fixes.extend(f);
    let (f, _) = stay(end, t, 8);
    fixes.extend(f);
    // Still there over an hour after leaving home: the stay at home is closed (fixes away are
    // held up to an hour, insights::stays::MAX_EXCURSION_SECONDS).
    fixes.push(fix(end, start + chrono::Duration::minutes(80)));
    ingest(app, &u, &fixes).await;

    // Some messages delivered (log entries, attempts), then the worker stops.
    let w = shared::domain::webhooks::deliver::Worker::new(
        app.state.store.clone(),
        shared::domain::webhooks::deliver::DeliveryConfig {
            schedule: vec![Duration::from_millis(200); 4],
            timeout: Duration::from_secs(1),
            disable_after: Duration::from_secs(4),
            allow_private: true,
        },
    )
    .expect("worker");
    let worker = tokio::spawn(w.run(app.state.wake.clone()));
    app.state.wake.notify_one();
    rx.wait_for(Duration::from_secs(30), "a delivery", |got| !got.is_empty()).await;
    worker.abort();
    let _ = worker.await;
    // A delivery still pending for the erased user: the worker may have sent all of theirs before
    // it stopped (it did, under CI's load), so one of their events is replayed with none running.
    let (s, events) =
        app.get(&format!("/v1/api/event/?user_id={u}&{}", days(&start.format("%Y-%m-%d").to_string()))).await;
    assert!(s.is_success(), "{events}");
    let id = events["data"]["events"][0]["id"].as_str().expect("an event of the erased user").to_owned();
    let wh = hook["data"]["webhook_id"].as_str().expect("webhook_id");
    ok(app, "POST", "/v1/api/webhooks/replay/", json!({"webhook_id": wh, "event_ids": [id]})).await;

    let kept_token = tokens.pop().unwrap();
    World {
        erased: u,
        kept: v,
        token: tokens.pop().unwrap(),
        kept_token,
        day: start.format("%Y-%m-%d").to_string(),
        fixes: fixes.len(),
    }
}

fn days(day: &str) -> String {
    let d = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap();
    format!("start_date={day}&end_date={}", d + chrono::Duration::days(1))
}

/// What the API shows of a user: (status, body) of each read.
async fn reads(app: &TestApp, user: &str, day: &str) -> Vec<(String, StatusCode, Value)> {
    let range = days(day);
    let mut out = Vec::new();
    for uri in [
        format!("/v1/api/user/?user_id={user}"),
        format!("/v1/api/location/?user_id={user}&{range}"),
        format!("/v1/api/event/trips/?user_id={user}&{range}"),
        format!("/v3/api/insights/poi/?user_id={user}"),
        format!("/v1/api/search/users/?user_id={user}"),
        format!("/v1/api/event/?user_id={user}&{range}"),
        format!("/v2/trips?user_id={user}"),
    ] {
        let key = if uri.starts_with("/v2/") { Key::Bearer } else { Key::Secret };
        let (s, r) = app.call("GET", &uri, key, None).await;
        out.push((uri, s, r));
    }
    out
}

both!(erasing_a_user_leaves_no_item_naming_them_and_the_other_user_intact, |app| async move {
    let app = app.with_private_webhooks();
    let w = world(&app).await;
    let (u, v) = (w.erased.as_str(), w.kept.as_str());

    // The history is there: events for both, a stay, a delivery, a live link.
    let before_u = items_naming(&app, u).await;
    let before_v = items_naming(&app, v).await;
    let count = |pk_part: &str| before_u.iter().filter(|(_, pk, _)| pk.contains(pk_part)).count();
    let missing: Vec<&str> = [
        "#UE#", "#FE#", "#FU#", "#GS#", "#ST#", "#SS#", "#IA#", "#UG#", "#G#crew", "#WM", "#WL#", "#WP#", "#UTE#",
        "#TE#", "#UT#", "#MS#", "#UC#", "#PW#", "#MF", "#F", "#C#", "#T1",
    ]
    .into_iter()
    .filter(|part| count(part) == 0)
    .collect();
    assert!(missing.is_empty(), "the history has no {missing:?} items: {before_u:#?}");
    assert!(before_u.iter().any(|(t, _, _)| t == "Locations"));
    let link = |t: &str| format!("/track/{t}/data");
    assert_eq!(app.call("GET", &link(&w.token), Key::None, None).await.0, StatusCode::OK);
    let v_reads = reads(&app, v, &w.day).await;
    let v_events = app.get(&format!("/v1/api/event/?user_id={v}&{}", days(&w.day))).await.1;
    assert!(!v_events["data"]["events"].as_array().unwrap().is_empty(), "{v_events}");

    let started = Instant::now();
    let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={u}"), Key::Secret, None).await;
    let took = started.elapsed();
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["user_id"].as_str(), &r["data"]["is_deleted"], &r["data"]["erased"]),
        (Some(u), &json!(true), &json!(true))
    );
    eprintln!(
        "erased a user with {} fixes: {} items in {took:?} ({} items named them before)",
        w.fixes,
        r["data"]["items_erased"],
        before_u.len()
    );

    let left = items_naming(&app, u).await;
    assert!(left.is_empty(), "items still naming the erased user: {left:#?}");
    // The kept user lost only items that named both (pair states of a moving fence around the
    // erased user); what named both and stays (a fence scoped to both, with its index copies; a
    // moving fence following both) now names the kept user alone.
    let after_v = items_naming(&app, v).await;
    let gone: BTreeSet<_> = before_v.difference(&after_v).cloned().collect();
    assert!(after_v.is_subset(&before_v), "new items name the kept user: {:?}", after_v.difference(&before_v));
    assert!(gone.is_subset(&before_u), "the kept user lost their own items: {:?}", gone.difference(&before_u));
    let kept_own = before_v.difference(&before_u).count();
    assert!(kept_own > 100 && after_v.len() >= kept_own, "{kept_own} of {}", after_v.len());

    // Every read of the erased user: 404, or an empty list where the project's items are listed.
    for (uri, s, r) in reads(&app, u, &w.day).await {
        if uri.starts_with("/v1/api/event/?") {
            assert_eq!((s, r["data"]["events"].as_array().map(Vec::len)), (StatusCode::OK, Some(0)), "{uri}: {r}");
        } else if uri.starts_with("/v2/") {
            assert_eq!((s, r["trips"].as_array().map(Vec::len)), (StatusCode::OK, Some(0)), "{uri}: {r}");
        } else {
            assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
        }
    }
    assert_eq!(app.call("GET", &link(&w.token), Key::None, None).await.0, StatusCode::NOT_FOUND);
    assert_eq!(app.call("GET", &link(&w.kept_token), Key::None, None).await.0, StatusCode::OK);
    // A late ingest is refused instead of bringing the user back; erasing again finds nobody.
    let late = json!({"user_id": u, "locations": [fix(HOME, Utc::now())]});
    let (s, r) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&late)).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={u}"), Key::Secret, None).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    let left = items_naming(&app, u).await;
    assert!(left.is_empty(), "{left:?}");

    // The kept user reads as before.
    for ((uri, s0, r0), (_, s1, r1)) in v_reads.iter().zip(reads(&app, v, &w.day).await) {
        assert_eq!(*s0, s1, "{uri}");
        if uri.starts_with("/v1/api/location/") || uri.starts_with("/v1/api/event/") {
            assert_eq!(r0["data"], r1["data"], "{uri}");
        }
    }
    let (_, r) = app.get("/v1/api/search/users/?location=12.9716,77.5946&radius=5000&group_id=crew").await;
    let ids: Vec<&str> = r["data"]["users"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["user_id"].as_str().or(x["id"].as_str())).collect())
        .unwrap_or_default();
    assert!(!ids.contains(&u), "{r}");
});

both!(erasing_a_trips_first_and_then_its_new_owner_leaves_nothing_naming_either, |app| async move {
    let (first, next) = (app.create_user(json!({})).await, app.create_user(json!({})).await);
    // Created for one user, given to another before it started: its creation event (and that
    // event's copy in the first user's trip-events list) names the first.
    let (s, r) = app.post("/v1/api/trips/", &json!({"user_id": first, "origins": [[13.4, 52.5]]})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let trip = r["data"][0]["id"].as_str().unwrap().to_owned();
    let (s, r) = app.call("PUT", "/v1/api/trips/", Key::Secret, Some(&json!({"trip_id": trip, "user_id": next}))).await;
    assert!(s.is_success(), "{r}");
    for u in [&first, &next] {
        let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={u}"), Key::Secret, None).await;
        assert_eq!(s, StatusCode::OK, "{r}");
    }
    // The second erasure takes the trip and the event's copy in the first user's (erased) list:
    // nothing it writes on the way, such as that list's counts, may name the first user again.
    assert_eq!(items_naming(&app, &first).await, BTreeSet::new());
    assert_eq!(items_naming(&app, &next).await, BTreeSet::new());
});

both!(an_erasure_cut_short_reads_404_at_once_and_a_second_delete_finishes_it, |app| async move {
    let u = tracked(&app).await;
    let v = tracked(&app).await;
    let t = Utc::now() - chrono::Duration::minutes(30);
    let (fixes, _) = stay(HOME, t, 12);
    ingest(&app, &u, &fixes).await;
    ingest(&app, &v, &fixes).await;
    ok(&app, "POST", "/v1/api/group/user/", json!({"group_id": "crew", "users": [u, v]})).await;
    let p = Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    };
    // A request whose time ran out at once (a crash midway looks the same: the marker stays).
    let cut = erasure::erase(app.state.store.as_ref(), &p, &u, Instant::now()).await.expect("erase");
    assert!(!cut.complete);
    assert!(erasure::in_progress(app.state.store.as_ref(), &p.project_id, &u).await.unwrap());
    let (s, r) = app.get(&format!("/v1/api/user/?user_id={u}")).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    let (s, r) = app.get(&format!("/v1/api/location/?user_id={u}")).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    assert!(!items_naming(&app, &u).await.is_empty(), "cut short: data left to erase");

    let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={u}"), Key::Secret, None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["erased"], true, "{r}");
    assert!(items_naming(&app, &u).await.is_empty());
    let (s, _) = app.get(&format!("/v1/api/user/?user_id={v}")).await;
    assert_eq!(s, StatusCode::OK);
    // The sweep finds nothing left to do.
    let far = Instant::now() + Duration::from_secs(10);
    assert!(!erasure::in_progress(app.state.store.as_ref(), &p.project_id, &u).await.unwrap());
    erasure::sweep(app.state.store.as_ref(), far).await.expect("sweep");
});

both!(erasure_is_refused_to_other_projects_publishable_keys_and_bad_input, |app| async move {
    let u = tracked(&app).await;
    let (fixes, _) = stay(HOME, Utc::now() - chrono::Duration::minutes(20), 6);
    ingest(&app, &u, &fixes).await;
    let before = items_naming(&app, &u).await;

    let other = app.other_project().await;
    let uri = format!("/v1/api/user/?user_id={u}");
    let (s, r) = app.call("DELETE", &uri, Key::Raw(&other.api_key), None).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    let (s, r) = app.call("DELETE", &uri, Key::Publishable, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{r}");
    let (s, r) = app.call("DELETE", &uri, Key::None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{r}");
    assert_eq!(items_naming(&app, &u).await, before, "nothing removed");

    let (s, r) = app.call("DELETE", "/v1/api/user/?user_id=0123456789abcdef01234567", Key::Secret, None).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    for bad in ["/v1/api/user/", "/v1/api/user/?user_id=", "/v1/api/user/?user_id=nope", "/v1/api/user/?user_id=%00"] {
        let (s, r) = app.call("DELETE", bad, Key::Secret, None).await;
        assert_error(s, &r, StatusCode::BAD_REQUEST, "user_id");
    }
    let (s, _) = app.get(&uri).await;
    assert_eq!(s, StatusCode::OK);
});

/// The time to erase a long history (run with `--ignored --nocapture`; figures in docs/erasure.md).
/// The fixes are stored as ingest stores them, without deriving anything, so the run measures
/// the erasure of the location partition, which dominates.
/// `capacity` reads the capacity units the store has consumed so far (DynamoDB), or 0.
async fn time_erasure(app: TestApp, n: usize, capacity: impl Fn() -> f64) {
    let u = app.create_user(json!({})).await;
    let p = Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    };
    let t = Utc::now() - chrono::Duration::days(30);
    let fixes: Vec<shared::domain::locations::Location> = (0..n)
        .map(|i| {
            serde_json::from_value(fix(at(HOME, (i % 500) as f64, 0.0), t + chrono::Duration::seconds(i as i64)))
                .unwrap()
        })
        .collect();
    for chunk in fixes.chunks(1000) {
        let prepared = shared::domain::locations::prepare(&p, &u, chunk.to_vec());
        shared::domain::locations::store_prepared(app.state.store.as_ref(), &p, &u, prepared).await.expect("stored");
    }
    let (started, units) = (Instant::now(), capacity());
    let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={u}"), Key::Secret, None).await;
    let mut took = started.elapsed();
    let mut status = s;
    while status == StatusCode::ACCEPTED {
        let (s, _) = app.call("DELETE", &format!("/v1/api/user/?user_id={u}"), Key::Secret, None).await;
        status = s;
        took = started.elapsed();
    }
    let units = capacity() - units;
    eprintln!(
        "erased {n} fixes: first answer {s} ({} items), all done in {took:?}, {units:.0} capacity units",
        r["data"]["items_erased"]
    );
    assert!(status == StatusCode::OK || status == StatusCode::NOT_FOUND, "{status}");
}

#[tokio::test]
#[ignore = "a measurement: cargo test --test api erasure_time -- --ignored --nocapture"]
async fn erasure_time_embedded() {
    time_erasure(TestApp::new(crate::helpers::Backend::Embedded).await, 20_000, || 0.0).await;
}

#[tokio::test]
#[ignore = "a measurement: cargo test --test api erasure_time -- --ignored --nocapture"]
async fn erasure_time_dynamodb() {
    let store = crate::helpers::dynamo_store().await;
    let app = TestApp::with_state(shared::AppState::new(store.clone())).await;
    time_erasure(app, 20_000, move || store.consumed_capacity()).await;
}

both!(a_batch_that_raced_the_erasure_is_deleted_by_its_processing_pass, |app| async move {
    // Its pass reading the record itself; its pass started from the record as the request's
    // check read it before the erasure (`users::require_for_ingest`); the same with the erasure
    // caught between its first step and its end (its watermark still there, marked).
    for (handed, erasing) in [(false, false), (true, false), (true, true)] {
        raced_erasure(&app, handed, erasing).await;
    }
});

async fn raced_erasure(app: &TestApp, handed: bool, erasing: bool) {
    let u = tracked(app).await;
    let t = Utc::now() - chrono::Duration::minutes(20);
    let (fixes, _) = stay(HOME, t, 6);
    ingest(app, &u, &fixes).await;
    let p = Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    };
    let store = app.state.store.as_ref();
    let read = shared::domain::users::record(store, &p, &u).await.expect("record");
    assert!(read.is_some());
    // An ingest request that passed its user check just before the erasure stores its batch
    // after it (mark, fixes, then its processing pass), as ingest does.
    let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={u}"), Key::Secret, None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let late: Vec<shared::domain::locations::Location> =
        stay(at(HOME, 50.0, 0.0), t + chrono::Duration::minutes(10), 3)
            .0
            .into_iter()
            .map(|f| serde_json::from_value(f).unwrap())
            .collect();
    let prepared = shared::domain::locations::prepare(&p, &u, late);
    let pending = shared::pipeline::marks::mark_batch(store, &p, &u, &prepared).await.expect("mark");
    let stored = shared::domain::locations::store_prepared(store, &p, &u, prepared).await.expect("stored");
    shared::pipeline::marks::batch_stored(store, pending, &stored)
        .await
        .expect("stored mark")
        .durable()
        .await
        .expect("synced");
    assert!(!items_naming(app, &u).await.is_empty());
    let marked = shared::domain::sequence::Watermark { version: 7, erasing: true, ..Default::default() };
    if erasing {
        let put = shared::domain::sequence::put(&p, &u, &marked, &Default::default()).expect("op");
        store.transact(vec![put]).await.expect("the erasing watermark");
    }
    let handed = if handed { read } else { None };
    shared::pipeline::processor::process_own(store, &p, &u, None, handed).await.expect("pass");
    let mut left = items_naming(app, &u).await;
    if erasing {
        // Only the watermark the erasure's last step deletes; nothing derived, as it was.
        let wm = shared::domain::sequence::read(store, &p, &u).await.expect("read");
        assert!(wm.erasing && wm.version == 7, "{wm:?}");
        left.retain(|(_, pk, _)| !pk.contains("#PW#"));
    }
    assert!(left.is_empty(), "{left:#?}");
}

both_alone!(a_delivery_in_flight_when_its_user_is_erased_leaves_no_log_record, |app| async move {
    // The worker logs a delivery when it first takes it up: an attempt that began before the
    // erasure and ends after it writes its record once the erasure has cleared the log. The
    // worker's check after its run takes the record out again (without it, it stays).
    let app = app.with_private_webhooks();
    let rx = Receiver::start(Mode::Slow(Duration::from_secs(3))).await;
    let (wh, _) = crate::webhooks::subscribe(&app, &rx, json!(["location.updated"])).await;
    let user = app.create_user(json!({})).await;
    let cfg = shared::domain::webhooks::deliver::DeliveryConfig {
        schedule: vec![Duration::from_secs(60)],
        timeout: Duration::from_secs(10),
        disable_after: Duration::from_secs(3600),
        allow_private: true,
    };
    let w = shared::domain::webhooks::deliver::Worker::new(app.state.store.clone(), cfg).expect("worker");
    let _w = tokio::spawn(w.run(app.state.wake.clone()));
    let body =
        json!({"user_id": user, "locations": [{"coordinates": [HOME.0, HOME.1], "recorded_at": ts(Utc::now())}]});
    let (status, res) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let start = Instant::now();
    while rx.arrived() == 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "the attempt never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The attempt is at the receiver, answered 3 s after it arrived.
    let (status, res) = app.call("DELETE", &format!("/v1/api/user/?user_id={user}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    rx.wait_for(Duration::from_secs(30), "the attempt's answer", |got| !got.is_empty()).await;
    // The worker's record and its check after the run.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let shard = shared::domain::webhooks::outbox::user_shard(Some(&user));
    let pk = format!("{}#WL#{wh}#{shard:02}", app.project.project_id);
    let q = shared::store::Query::new(&pk, shared::domain::history_pages::fixes());
    let left = app.state.store.query(Table::Main, &q).await.expect("log").items;
    assert!(left.is_empty(), "the erased user's delivery stayed in the log: {left:?}");
    let (_, res) = app.get(&format!("/v1/api/webhooks/deliveries/?webhook_id={wh}")).await;
    assert_eq!(res["data"]["deliveries"], json!([]), "{res}");
    assert_eq!(res["data"]["pages"], json!(0), "and out of its counts: {res}");
});
