//! Geofence events from ingested locations: entry, exit and dwell along generated traces; batches
//! split, re-sent and late; who and which fences take part; the events list and the counts.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use serde_json::{Value, json};
use shared::domain::geofences::Geofence;
use shared::geometry::LngLat;

use crate::both;
use crate::geofences::{
    HOME, circle, create_many, delete, enabled_fence, fence, ids_of, polygon, put, square, today_range, with,
};
use crate::helpers::{Key, TestApp, assert_error};
use crate::trace::{Trace, offset};
use crate::trips::ts;

/// Every trace starts at this instant (2024-05-01T10:00:00Z); events are listed for that day.
pub(crate) fn t0() -> DateTime<Utc> {
    NaiveDateTime::parse_from_str("2024-05-01T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap().and_utc()
}
pub(crate) const DAY: &str = "start_date=2024-05-01&end_date=2024-05-02";

/// A fix at `p` (lng, lat), `s` seconds after [`t0`].
pub(crate) fn fix(p: (f64, f64), s: i64) -> Value {
    json!({"coordinates": [p.0, p.1], "recorded_at": ts(t0() + Duration::seconds(s)), "accuracy": 5.0})
}

/// `p` moved `dx` east and `dy` north meters.
pub(crate) fn at(p: (f64, f64), dx: f64, dy: f64) -> (f64, f64) {
    offset(p.0, p.1, dx, dy)
}

pub(crate) async fn events_on(app: &TestApp, key: Key<'_>, user: &str) {
    let body = json!({"user_id": user, "geofence_events": true});
    let (status, res) = app.call("PUT", "/v1/api/user/", key, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
}

/// A user with `geofence_events` on.
pub(crate) async fn tracked_user(app: &TestApp) -> String {
    let u = app.create_user(json!({})).await;
    events_on(app, Key::Secret, &u).await;
    u
}

async fn send_as(app: &TestApp, key: Key<'_>, user: &str, fixes: &[Value]) -> Value {
    let body = json!({"user_id": user, "locations": fixes});
    let (status, res) = app.call("POST", "/v1/api/location/", key, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    res["data"].clone()
}

pub(crate) async fn send(app: &TestApp, user: &str, fixes: &[Value]) -> Value {
    send_as(app, Key::Secret, user, fixes).await
}

/// Every event of every page of `/v1/api/event/?<DAY>&<query>`.
async fn all_events_as(app: &TestApp, key: Key<'_>, query: &str) -> Vec<Value> {
    events_of(app, key, DAY, query).await
}

async fn events_of(app: &TestApp, key: Key<'_>, days: &str, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for page in 1.. {
        let uri = format!("/v1/api/event/?{days}&page_number={page}&{query}");
        let (status, res) = app.call("GET", &uri, key, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {res}");
        let items = res["data"]["events"].as_array().unwrap_or_else(|| panic!("{res}")).clone();
        if items.is_empty() {
            break;
        }
        out.extend(items);
    }
    out
}

/// Every event of `days` (`start_date=..&end_date=..`) with `query`.
pub(crate) async fn all_events_in(app: &TestApp, query: &str, days: &str) -> Vec<Value> {
    events_of(app, Key::Secret, days, query).await
}

pub(crate) async fn all_events(app: &TestApp, query: &str) -> Vec<Value> {
    all_events_as(app, Key::Secret, query).await
}

/// (kind without its `motion:geofence:` prefix, fence, recorded_at) of each event.
fn summary(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            let kind = e["event_type"].as_str().unwrap().strip_prefix("motion:geofence:").unwrap_or("?").to_owned();
            (kind, e["geofence_id"].as_str().unwrap().to_owned(), e["recorded_at"].as_str().unwrap().to_owned())
        })
        .collect()
}

async fn user_summary(app: &TestApp, user: &str) -> Vec<(String, String, String)> {
    summary(&all_events(app, &format!("user_id={user}")).await)
}

fn ev(kind: &str, fence: &str, recorded_at: &str) -> (String, String, String) {
    (kind.to_owned(), fence.to_owned(), recorded_at.to_owned())
}

/// The events the rules give for `fixes` (in time order) and these fences, computed here: fixes
/// less accurate than 100 m are skipped; entry when inside a fence one was not inside; exit when
/// no longer inside; dwell once per visit after 300 s inside.
fn expected_events(fences: &[&Geofence], fixes: &[Value]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut inside: Vec<(String, DateTime<Utc>, bool)> = Vec::new();
    for f in fixes {
        if f["accuracy"].as_f64().unwrap_or(0.0) > 100.0 {
            continue;
        }
        let p = LngLat { lng: f["coordinates"][0].as_f64().unwrap(), lat: f["coordinates"][1].as_f64().unwrap() };
        let at = f["recorded_at"].as_str().unwrap();
        let t = NaiveDateTime::parse_from_str(at, "%Y-%m-%dT%H:%M:%S%.3f").unwrap().and_utc();
        let now_in: Vec<&Geofence> = fences.iter().copied().filter(|g| g.shape().contains(p)).collect();
        let mut exits: Vec<String> =
            inside.iter().filter(|(id, ..)| !now_in.iter().any(|g| &g.id == id)).map(|(id, ..)| id.clone()).collect();
        exits.sort();
        for id in exits {
            inside.retain(|(i, ..)| i != &id);
            out.push(ev("exit", &id, at));
        }
        for g in now_in {
            match inside.iter_mut().find(|(id, ..)| id == &g.id) {
                None => {
                    inside.push((g.id.clone(), t, false));
                    out.push(ev("entry", &g.id, at));
                }
                Some((_, since, dwelt)) if !*dwelt && t - *since >= Duration::seconds(300) => {
                    *dwelt = true;
                    out.push(ev("dwell", &g.id, at));
                }
                Some(_) => {}
            }
        }
    }
    out
}

/// A circle of 200 m at [`HOME`] and a 300 m square 1.5 km east of it, both enabled, made through
/// the domain function (so the test holds their exact shapes).
pub(crate) async fn circle_and_square(app: &TestApp) -> (Geofence, Geofence) {
    let on = json!({"is_enabled": true, "description": "fence"});
    let made = create_many(
        app,
        vec![with(circle(HOME, 200), on.clone()), with(polygon(&square(at(HOME, 1500.0, 0.0), 150.0)), on)],
    )
    .await;
    (made[0].clone(), made[1].clone())
}

/// Drive through the circle (stopping 200 s at its centre among poor-accuracy fixes thrown
/// outside it), then north through the square, then away: 10 m/s, a fix every 5 s, 3 m jitter.
pub(crate) fn crossing_trace(seed: u64) -> Vec<Value> {
    let mut t = Trace::new(seed, t0(), 3.0);
    let alt = (900.0, 900.0);
    t.drive(at(HOME, -1000.0, 0.0), HOME, 10.0, 5, alt);
    t.stay(HOME, 200, 10, 5.0, 2, 900.0);
    t.drive(HOME, at(HOME, 700.0, 0.0), 10.0, 5, alt);
    t.drive(at(HOME, 700.0, 0.0), at(HOME, 1500.0, -600.0), 10.0, 5, alt);
    t.drive(at(HOME, 1500.0, -600.0), at(HOME, 1500.0, 600.0), 10.0, 5, alt);
    t.drive(at(HOME, 1500.0, 600.0), at(HOME, 2500.0, 600.0), 10.0, 5, alt);
    t.fixes.iter().map(|f| f.json()).collect()
}

both!(a_trace_through_a_circle_and_a_polygon_enters_and_exits_each_once, |app| async move {
    let (c, p) = circle_and_square(&app).await;
    let fixes = crossing_trace(11);
    assert!(fixes.iter().any(|f| f["accuracy"] == 150.0), "the trace holds poor-accuracy fixes");
    let expected = expected_events(&[&c, &p], &fixes);
    let kinds: Vec<(String, String)> = expected.iter().map(|(k, f, _)| (k.clone(), f.clone())).collect();
    assert_eq!(
        kinds,
        [
            ("entry".to_owned(), c.id.clone()),
            ("exit".to_owned(), c.id.clone()),
            ("entry".to_owned(), p.id.clone()),
            ("exit".to_owned(), p.id.clone())
        ],
        "the trace itself crosses each fence once"
    );

    // Whole, in one batch.
    let u1 = tracked_user(&app).await;
    send(&app, &u1, &fixes).await;
    assert_eq!(user_summary(&app, &u1).await, expected);

    // Split in two in the middle of the stay inside the circle: the same events.
    let u2 = tracked_user(&app).await;
    let mid_stay = ts(t0() + Duration::seconds(200));
    let cut = fixes.iter().position(|f| f["recorded_at"].as_str().unwrap() >= mid_stay.as_str()).unwrap();
    send(&app, &u2, &fixes[..cut]).await;
    assert_eq!(user_summary(&app, &u2).await, expected[..1], "inside the circle after the first half");
    send(&app, &u2, &fixes[cut..]).await;
    assert_eq!(user_summary(&app, &u2).await, expected);
    // Re-sent, whole or in part: nothing new.
    let d = send(&app, &u2, &fixes).await;
    assert_eq!(d["stored"], 0);
    send(&app, &u2, &fixes[cut..]).await;
    assert_eq!(user_summary(&app, &u2).await, expected);

    // In batches of 7 fixes.
    let u3 = tracked_user(&app).await;
    for chunk in fixes.chunks(7) {
        send(&app, &u3, chunk).await;
    }
    assert_eq!(user_summary(&app, &u3).await, expected);

    // Per fence, each user's entry and exit.
    let at_c = all_events(&app, &format!("geofence_id={}", c.id)).await;
    assert_eq!(at_c.len(), 6);
    for e in &at_c {
        assert_eq!(e["geofence_id"], c.id.as_str());
    }
});

both!(a_point_on_a_polygon_edge_is_inside, |app| async move {
    let ring = square(HOME, 100.0);
    let f = enabled_fence(&app, polygon(&ring)).await;
    let (sw, se, ne) = (ring[0], ring[1], ring[2]);
    let on_bottom_edge = ((sw.0 + se.0) / 2.0, sw.1);
    let u = tracked_user(&app).await;
    send(&app, &u, &[fix(at(on_bottom_edge, 0.0, -50.0), 0), fix(on_bottom_edge, 60)]).await;
    assert_eq!(user_summary(&app, &u).await, [ev("entry", &f, &ts(t0() + Duration::seconds(60)))]);
    // A vertex is inside too: still inside, nothing new; out, then in at the corner.
    send(&app, &u, &[fix(ne, 120), fix(at(ne, 50.0, 50.0), 180), fix(ne, 240)]).await;
    assert_eq!(
        user_summary(&app, &u).await,
        [
            ev("entry", &f, &ts(t0() + Duration::seconds(60))),
            ev("exit", &f, &ts(t0() + Duration::seconds(180))),
            ev("entry", &f, &ts(t0() + Duration::seconds(240))),
        ]
    );
});

both!(dwell_fires_once_per_visit_after_300_seconds, |app| async move {
    let f = enabled_fence(&app, circle(HOME, 100)).await;
    let out = at(HOME, 500.0, 0.0);
    let u = tracked_user(&app).await;
    let s = |n: i64| ts(t0() + Duration::seconds(n));
    // Enter at 60; 299 s later nothing; at 300 s a dwell; then nothing more on this visit.
    let first = [fix(out, 0), fix(HOME, 60), fix(HOME, 160), fix(HOME, 260), fix(HOME, 359)];
    send(&app, &u, &first).await;
    assert_eq!(user_summary(&app, &u).await, [ev("entry", &f, &s(60))]);
    send(&app, &u, &[fix(HOME, 360), fix(HOME, 460), fix(at(HOME, 30.0, 0.0), 700)]).await;
    assert_eq!(user_summary(&app, &u).await, [ev("entry", &f, &s(60)), ev("dwell", &f, &s(360))]);
    // Out, in again: a new visit dwells again.
    send(&app, &u, &[fix(out, 760), fix(HOME, 800), fix(HOME, 1099), fix(HOME, 1100), fix(HOME, 1500), fix(out, 1600)])
        .await;
    let expected = [
        ev("entry", &f, &s(60)),
        ev("dwell", &f, &s(360)),
        ev("exit", &f, &s(760)),
        ev("entry", &f, &s(800)),
        ev("dwell", &f, &s(1100)),
        ev("exit", &f, &s(1600)),
    ];
    assert_eq!(user_summary(&app, &u).await, expected);
});

both!(only_enabled_active_fences_that_apply_to_the_user_fire, |app| async move {
    let u = tracked_user(&app).await;
    let other = tracked_user(&app).await;
    let off = app.create_user(json!({})).await;
    for (group, member) in [("night", &u), ("day", &other), ("night", &off)] {
        let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": group, "users": [member]})).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
    }
    let shape = || circle(HOME, 150);
    let scoped = |v: Value| with(shape(), v);
    let open = enabled_fence(&app, shape()).await;
    let _disabled = fence(&app, shape()).await;
    let _past =
        fence(&app, scoped(json!({"is_enabled": [true, "2020-01-01T00:00:00.000", "2020-02-01T00:00:00.000"]}))).await;
    let _future = fence(&app, scoped(json!({"is_enabled": [true, "2030-01-01T00:00:00.000", null]}))).await;
    let _window_off = fence(&app, scoped(json!({"is_enabled": [false, "2024-01-01T00:00:00.000", null]}))).await;
    let window =
        fence(&app, scoped(json!({"is_enabled": [true, "2024-01-01T00:00:00.000", "2025-01-01T00:00:00.000"]}))).await;
    let for_other = fence(&app, scoped(json!({"user_ids": [other], "is_enabled": [true, null, null]}))).await;
    let for_u = fence(&app, scoped(json!({"user_ids": [u], "is_enabled": [true, null, null]}))).await;
    let night = fence(&app, scoped(json!({"group_ids": ["night"], "is_enabled": [true, null, null]}))).await;
    let day = fence(&app, scoped(json!({"group_ids": ["day"], "is_enabled": [true, null, null]}))).await;
    let _nobody_enabled = fence(&app, scoped(json!({"group_ids": ["day"], "is_enabled": [false, null, null]}))).await;

    let walk = [fix(at(HOME, -400.0, 0.0), 0), fix(HOME, 60), fix(at(HOME, 400.0, 0.0), 120)];
    for who in [&u, &other, &off] {
        send(&app, who, &walk).await;
    }
    let fired = |sum: Vec<(String, String, String)>| {
        let mut entries: Vec<String> = sum.iter().filter(|e| e.0 == "entry").map(|e| e.1.clone()).collect();
        let mut exits: Vec<String> = sum.iter().filter(|e| e.0 == "exit").map(|e| e.1.clone()).collect();
        entries.sort();
        exits.sort();
        assert_eq!(entries, exits, "each entry has its exit: {sum:?}");
        assert_eq!(entries.len() * 2, sum.len(), "{sum:?}");
        entries
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(
        fired(user_summary(&app, &u).await),
        sorted(vec![open.clone(), window.clone(), for_u.clone(), night.clone()])
    );
    assert_eq!(fired(user_summary(&app, &other).await), sorted(vec![open, window, for_other, day]));
    assert!(user_summary(&app, &off).await.is_empty(), "geofence_events is off for this user");

    // Accuracy: a fix worse than 100 m is not evaluated; exactly 100 m is.
    let f = enabled_fence(&app, circle(at(HOME, 3000.0, 0.0), 100)).await;
    let v = tracked_user(&app).await;
    let mut blurry = fix(at(HOME, 3000.0, 0.0), 200);
    blurry["accuracy"] = json!(100.5);
    send(&app, &v, &[fix(at(HOME, 3500.0, 0.0), 180), blurry]).await;
    assert!(user_summary(&app, &v).await.is_empty());
    let mut ok = fix(at(HOME, 3000.0, 0.0), 220);
    ok["accuracy"] = json!(100.0);
    send(&app, &v, &[ok]).await;
    assert_eq!(user_summary(&app, &v).await, [ev("entry", &f, &ts(t0() + Duration::seconds(220)))]);
});

both!(late_locations_fire_nothing, |app| async move {
    let f = enabled_fence(&app, circle(HOME, 150)).await;
    let out = at(HOME, 600.0, 0.0);
    let u = tracked_user(&app).await;
    send(&app, &u, &[fix(out, 3600), fix(out, 4200)]).await;
    // An older batch that walks in and out: stored, but no events.
    let d = send(&app, &u, &[fix(out, 0), fix(HOME, 60), fix(out, 120)]).await;
    assert_eq!(d["stored"], 3);
    assert!(user_summary(&app, &u).await.is_empty());
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}&{DAY}")).await;
    assert_eq!(res["data"]["pages"], 1);
    assert_eq!(res["data"]["locations"].as_array().unwrap().len(), 5);
    // Newer: evaluated. Late fixes inside a newer batch are skipped, the rest evaluated.
    send(&app, &u, &[fix(HOME, 4800)]).await;
    send(&app, &u, &[fix(out, 4500), fix(HOME, 4900)]).await;
    send(&app, &u, &[fix(HOME, 4850), fix(out, 5000)]).await;
    let s = |n: i64| ts(t0() + Duration::seconds(n));
    assert_eq!(user_summary(&app, &u).await, [ev("entry", &f, &s(4800)), ev("exit", &f, &s(5000))]);
});

both!(deleted_fences_stop_firing_at_once, |app| async move {
    let gone = enabled_fence(&app, circle(HOME, 150)).await;
    let kept = enabled_fence(&app, circle(HOME, 150)).await;
    let out = at(HOME, 600.0, 0.0);
    let u = tracked_user(&app).await;
    send(&app, &u, &[fix(out, 0), fix(HOME, 60)]).await;
    let s = |n: i64| ts(t0() + Duration::seconds(n));
    let mut entered = vec![ev("entry", &gone, &s(60)), ev("entry", &kept, &s(60))];
    entered.sort_by(|a, b| a.1.cmp(&b.1));
    let mut got = user_summary(&app, &u).await;
    got.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(got, entered);
    let (status, res) = delete(&app, &format!("/v1/api/geofence/?geofence_id={gone}"), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    // Leaving reports only the fence that still exists; a new visitor enters only that one.
    send(&app, &u, &[fix(out, 120)]).await;
    let after = user_summary(&app, &u).await;
    assert_eq!(after[2..], [ev("exit", &kept, &s(120))], "{after:?}");
    let v = tracked_user(&app).await;
    send(&app, &v, &[fix(out, 0), fix(HOME, 60), fix(out, 120)]).await;
    assert_eq!(user_summary(&app, &v).await, [ev("entry", &kept, &s(60)), ev("exit", &kept, &s(120))]);
    // A disabled fence stops firing as well.
    let (status, res) = put(&app, "v1", json!({"geofence_id": kept, "is_enabled": false})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    send(&app, &v, &[fix(HOME, 180), fix(out, 240)]).await;
    assert_eq!(user_summary(&app, &v).await.len(), 2);
});

both!(events_list_shape_filters_dates_paging_and_counts, |app| async move {
    let a = enabled_fence(&app, with(circle(HOME, 150), json!({"description": "gate A"}))).await;
    let b_at = at(HOME, 3000.0, 0.0);
    let b = enabled_fence(&app, with(polygon(&square(b_at, 150.0)), json!({"description": "gate B"}))).await;
    let quiet = enabled_fence(&app, circle(at(HOME, -3000.0, 0.0), 150)).await;
    let u1 = tracked_user(&app).await;
    let (status, res) =
        app.call("PUT", "/v1/api/user/", Key::Secret, Some(&json!({"user_id": u1, "description": "courier 1"}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let u2 = tracked_user(&app).await;
    let out = at(HOME, 600.0, 0.0);
    // u1: in and out of A three times, then through B; u2: A twice. 12 events.
    let mut w1: Vec<Value> = (0..3).flat_map(|i| [fix(out, i * 120), fix(HOME, i * 120 + 60)]).collect();
    w1.extend([fix(out, 360), fix(at(b_at, -500.0, 0.0), 420), fix(b_at, 480), fix(at(b_at, 500.0, 0.0), 540)]);
    send(&app, &u1, &w1).await;
    send(&app, &u2, &[fix(out, 30), fix(HOME, 90), fix(out, 150), fix(HOME, 210), fix(out, 270)]).await;

    // Dates are required.
    for q in ["", "start_date=2024-05-01", "end_date=2024-05-02"] {
        let (status, res) = app.get(&format!("/v1/api/event/?{q}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{q}: {res}");
        let field = if q.starts_with("start") { "end_date" } else { "start_date" };
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }

    let (status, res) = app.get(&format!("/v1/api/event/?{DAY}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let d = &res["data"];
    assert_eq!((d["next_page"].clone(), d["pages"].clone(), d["prev_page"].clone()), (json!(2), json!(2), Value::Null));
    assert_eq!(d["events"].as_array().unwrap().len(), 10);
    let (_, res2) = app.get(&format!("/v1/api/event/?{DAY}&page_number=2")).await;
    assert_eq!(res2["data"]["events"].as_array().unwrap().len(), 2);
    assert_eq!((res2["data"]["next_page"].clone(), res2["data"]["prev_page"].clone()), (Value::Null, json!(1)));

    let all = all_events(&app, "").await;
    assert_eq!(all.len(), 12);
    let times: Vec<&str> = all.iter().map(|e| e["recorded_at"].as_str().unwrap()).collect();
    let mut in_order = times.clone();
    in_order.sort();
    assert_eq!(times, in_order, "listed by recorded_at");

    // Shape.
    let (_, locs) = app.get(&format!("/v1/api/location/?user_id={u1}&{DAY}")).await;
    let loc_id = |recorded_at: &str| {
        locs["data"]["locations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["recorded_at"] == recorded_at)
            .map(|l| l["id"].clone())
            .unwrap_or_else(|| panic!("no location at {recorded_at}"))
    };
    let mut fields = vec![
        "id",
        "user_id",
        "user_description",
        "geofence_id",
        "geofence_description",
        "location_id",
        "event_type",
        "recorded_at",
        "created_at",
        "is_deleted",
    ];
    fields.sort();
    for e in &all {
        let mut keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, fields, "{e}");
        assert!(crate::trips::is_ts(&e["created_at"]) && crate::trips::is_ts(&e["recorded_at"]), "{e}");
        assert_eq!(e["is_deleted"], false);
        assert_eq!(e["id"].as_str().unwrap().len(), 24);
        let is_a = e["geofence_id"] == a.as_str();
        assert_eq!(e["geofence_description"], if is_a { "gate A" } else { "gate B" });
        if e["user_id"] == u1.as_str() {
            assert_eq!(e["user_description"], "courier 1");
            assert_eq!(e["location_id"], loc_id(e["recorded_at"].as_str().unwrap()), "{e}");
        } else {
            assert!(e["user_description"].is_null(), "{e}");
        }
    }
    let first = &all[0];
    assert_eq!(
        (first["event_type"].clone(), first["user_id"].clone(), first["geofence_id"].clone()),
        (json!("motion:geofence:entry"), json!(u1), json!(a))
    );
    assert_eq!(first["recorded_at"], ts(t0() + Duration::seconds(60)));

    // Filters.
    let count = |v: Vec<Value>| v.len();
    assert_eq!(count(all_events(&app, &format!("user_id={u1}")).await), 8);
    assert_eq!(count(all_events(&app, &format!("user_id={u2}")).await), 4);
    assert_eq!(count(all_events(&app, &format!("geofence_id={a}")).await), 10);
    assert_eq!(count(all_events(&app, &format!("geofence_id={b}")).await), 2);
    let both = all_events(&app, &format!("geofence_id={a}&user_id={u1}")).await;
    assert_eq!(both.len(), 6);
    assert!(both.iter().all(|e| e["user_id"] == u1.as_str() && e["geofence_id"] == a.as_str()));
    assert!(all_events(&app, &format!("geofence_id={quiet}")).await.is_empty());
    assert!(all_events(&app, &format!("geofence_id={b}&user_id={u2}")).await.is_empty());
    let (_, res) = app.get(&format!("/v1/api/event/?{DAY}&geofence_id={a}&page_number=2")).await;
    assert_eq!(res["data"]["events"].as_array().unwrap().len(), 0);
    assert_eq!(res["data"]["pages"], 1);

    // Dates are of recorded_at; end_date is inclusive.
    let (_, res) = app.get("/v1/api/event/?start_date=2024-04-30&end_date=2024-05-01").await;
    assert_eq!(res["data"]["events"].as_array().unwrap().len(), 10);
    let (_, res) = app.get("/v1/api/event/?start_date=2024-05-02&end_date=2024-05-03").await;
    assert_eq!(res["data"]["events"], json!([]));

    // counts = the events each fence caused and the distinct users who caused them.
    let (status, res) = app.get(&format!("/v3/api/geofence/?{}&count=True", today_range())).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(ids_of(&res, "id"), [quiet.clone(), b.clone(), a.clone()], "newest first");
    let counts: Vec<Value> = res["data"]["geofences"].as_array().unwrap().iter().map(|g| g["counts"].clone()).collect();
    assert_eq!(
        counts,
        [json!({"events": 0, "users": 0}), json!({"events": 2, "users": 1}), json!({"events": 10, "users": 2})]
    );
    let (_, res) = app.get(&format!("/v3/api/geofence/?{}&count=True&geofence_id={b}", today_range())).await;
    assert_eq!(res["data"]["geofences"][0]["counts"], json!({"events": 2, "users": 1}));
    let (_, res) = app.get(&format!("/v3/api/geofence/?{}&count=False", today_range())).await;
    assert!(res["data"]["geofences"][0].get("counts").is_none());
});

both!(another_projects_users_trigger_none_of_our_fences, |app| async move {
    let ours = enabled_fence(&app, circle(HOME, 150)).await;
    let me = tracked_user(&app).await;
    let walk = [fix(at(HOME, -400.0, 0.0), 0), fix(HOME, 60), fix(at(HOME, 400.0, 0.0), 120)];
    send(&app, &me, &walk).await;
    assert_eq!(user_summary(&app, &me).await.len(), 2);

    let other = app.other_project().await;
    let key = Key::Raw(&other.api_key);
    let (status, res) =
        app.call("POST", "/v1/api/user/", key, Some(&json!({"app_type": 1, "device_token": "t"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let stranger = res["data"]["user_id"].as_str().unwrap().to_owned();
    events_on(&app, key, &stranger).await;
    send_as(&app, key, &stranger, &walk).await;
    // Their events list is empty, and ours holds only our user's.
    assert!(all_events_as(&app, key, "").await.is_empty());
    let (status, res) = app.call("GET", &format!("/v1/api/event/?{DAY}&geofence_id={ours}"), key, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["events"], json!([]));
    let ev = all_events(&app, "").await;
    assert_eq!(ev.len(), 2);
    assert!(ev.iter().all(|e| e["user_id"] == me.as_str()));
    let (_, res) = app.get(&format!("/v3/api/geofence/?{}&count=True", today_range())).await;
    assert_eq!(res["data"]["geofences"][0]["counts"], json!({"events": 2, "users": 1}));
});

both!(event_lists_page_by_their_own_counts, |app| async move {
    use shared::domain::geofences::events::{events_pk, events_pks, fence_events_pk, fence_events_pks, user_events_pk};
    use shared::domain::history_pages::fixes;
    use shared::store::{Query, SkRange, Table};
    let pid = app.project.project_id.clone();
    let a = enabled_fence(&app, circle(HOME, 150)).await;
    let u1 = tracked_user(&app).await;
    let mut u2 = tracked_user(&app).await;
    // The two users' events in different shards of the project's and the fence's lists, so
    // their pages merge shards.
    while events_pk(&pid, &u1) == events_pk(&pid, &u2)
        || fence_events_pk(&pid, &a, &u1) == fence_events_pk(&pid, &a, &u2)
    {
        u2 = tracked_user(&app).await;
    }
    let out = at(HOME, 600.0, 0.0);
    // In and out every 7 minutes for almost six hours (across a count bucket's 4.7 h), in
    // batches as a phone sends them; u2 the same, shifted.
    for (u, shift) in [(&u1, 0), (&u2, 200)] {
        let trace: Vec<Value> = (0..50).map(|k| fix(if k % 2 == 0 { out } else { HOME }, shift + k * 420)).collect();
        for batch in trace.chunks(7) {
            send(&app, u, batch).await;
        }
    }
    let s = app.state.store.as_ref();
    // The naive answer: the list's items (of every shard) in id order, read whole, and cut into pages.
    let stored = |pks: Vec<String>| async move {
        let mut ids = Vec::new();
        for pk in pks {
            let items = s.query(Table::Main, &Query::new(pk, fixes())).await.unwrap().items;
            ids.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_owned()));
        }
        ids.sort();
        ids
    };
    let lists = [
        (format!("user_id={u1}"), stored(vec![user_events_pk(&pid, &u1)]).await),
        (format!("geofence_id={a}"), stored(fence_events_pks(&pid, &a)).await),
        (String::new(), stored(events_pks(&pid)).await),
    ];
    assert!(lists[0].1.len() >= 40 && lists[2].1.len() >= 2 * lists[0].1.len() - 2, "{:?}", lists[2].1.len());
    // Each list keeps its counts beside it (a bucket per 4.7 h and its writers' counts), so page N does not
    // read the N − 1 pages before it; the id range above leaves them out.
    for pk in [user_events_pk(&pid, &u1), fence_events_pk(&pid, &a, &u1), events_pk(&pid, &u2)] {
        let counts = s.query(Table::Main, &Query::new(&pk, SkRange::Prefix("~".into()))).await.unwrap().items;
        assert!(!counts.is_empty(), "{pk}: {counts:?}");
    }
    let check = |query: String, range: String, expected: Vec<String>| {
        let app = &app;
        async move {
            let pages = expected.len().div_ceil(10);
            for page in 1..=pages + 1 {
                let uri = format!("/v1/api/event/?{range}&page_number={page}&{query}");
                let (status, res) = app.get(&uri).await;
                assert_eq!(status, StatusCode::OK, "{uri}: {res}");
                let got: Vec<&str> =
                    res["data"]["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
                let want: Vec<&str> = expected.iter().skip((page - 1) * 10).take(10).map(String::as_str).collect();
                assert_eq!(got, want, "{uri}");
                assert_eq!(res["data"]["pages"], json!(pages), "{uri}");
            }
        }
    };
    for (query, expected) in &lists {
        check(query.clone(), DAY.to_owned(), expected.clone()).await;
    }
    // A range cut inside the counts' cells: the events recorded in it, in the same order.
    let (from, to) = (t0() + Duration::seconds(5_000), t0() + Duration::seconds(15_123));
    let range = format!("start_date={}&end_date={}", ts(from), ts(to));
    let all = all_events(&app, "").await;
    let inside: Vec<String> = all
        .iter()
        .filter(|e| {
            let t = NaiveDateTime::parse_from_str(e["recorded_at"].as_str().unwrap(), "%Y-%m-%dT%H:%M:%S%.3f").unwrap();
            let t = t.and_utc();
            from <= t && t < to
        })
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(inside.len() > 10 && inside.len() < all.len(), "{}", inside.len());
    check(String::new(), range, inside).await;
    // Deleting events recounts the lists they left: erase u2, and the project's and the fence's
    // lists page over u1's events alone (stale counts would still count u2's pages).
    let (status, res) = app.call("DELETE", &format!("/v1/api/user/?user_id={u2}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let left = stored(events_pks(&pid)).await;
    assert_eq!(left, stored(vec![user_events_pk(&pid, &u1)]).await);
    assert_eq!(stored(fence_events_pks(&pid, &a)).await, left);
    for query in [String::new(), format!("geofence_id={a}")] {
        check(query, DAY.to_owned(), left.clone()).await;
    }
});
