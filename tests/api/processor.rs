//! The events processor: derived work exactly once whatever fails after the locations are
//! stored (simulated by storing a batch without processing it, as a crash would leave it), fixes
//! from the future refused, a v2 trip near the item size limit, and the order of a fix's events.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use shared::domain::locations::{self, Location};
use shared::pipeline::{marks, processor};

use crate::both;
use crate::geofence_events::{all_events, at, circle_and_square, crossing_trace, fix, send, tracked_user};
use crate::geofences::{HOME, circle, enabled_fence, project, with};
use crate::helpers::{Key, TestApp, assert_error};
use crate::trips::ts;

fn parse(fixes: &[Value]) -> Vec<Location> {
    fixes.iter().map(|f| serde_json::from_value(f.clone()).expect("a location")).collect()
}

/// What a crash right after storing leaves: the batch mark and the locations, nothing derived.
async fn store_without_processing(app: &TestApp, user: &str, fixes: &[Value]) {
    let p = project(app);
    let store = app.state.store.as_ref();
    let prepared = locations::prepare(&p, user, parse(fixes));
    let pending = marks::mark_batch(store, &p, user, &prepared).await.unwrap();
    let new = locations::store_prepared(store, &p, user, prepared).await.unwrap();
    marks::batch_stored(store, pending, &new).await.unwrap().durable().await.unwrap();
}

/// What a request that died while storing leaves (DynamoDB writes a batch in parts): the mark,
/// written `age_s` seconds ago and never completed, and only the second half of the fixes.
async fn store_half(app: &TestApp, user: &str, fixes: &[Value], age_s: i64) {
    let p = project(app);
    let store = app.state.store.as_ref();
    let prepared = locations::prepare(&p, user, parse(fixes));
    let at = shared::time::Timestamp(Utc::now() - Duration::seconds(age_s));
    marks::write_mark(store, &p, user, &prepared, false, at).await.unwrap();
    let half = prepared[prepared.len() / 2..].to_vec();
    locations::store_prepared(store, &p, user, half).await.unwrap();
}

fn ids(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect()
}

/// The events of `fixes` ingested normally by a new user: what a faulty run must end with.
async fn reference_events(app: &TestApp, fixes: &[Value]) -> Vec<Value> {
    let clean = tracked_user(app).await;
    send(app, &clean, fixes).await;
    all_events(app, &format!("user_id={clean}")).await
}

/// What a run's events are compared on: kind, fence and time (ids differ between users).
fn kinds(events: &[Value]) -> Vec<(Value, Value, Value)> {
    events.iter().map(|e| (e["event_type"].clone(), e["geofence_id"].clone(), e["recorded_at"].clone())).collect()
}

both!(work_left_by_a_crash_is_finished_once_by_a_resend_or_the_sweep, |app| async move {
    circle_and_square(&app).await;
    let fixes = crossing_trace(5);
    // Reference: the same trace ingested normally.
    let expected = reference_events(&app, &fixes).await;
    assert_eq!(expected.len(), 4, "{expected:?}");

    // Crash after storing, then the client re-sends: everything stored is a duplicate, and the
    // derived work is done now, once.
    let u = tracked_user(&app).await;
    store_without_processing(&app, &u, &fixes).await;
    assert_eq!(all_events(&app, &format!("user_id={u}")).await.len(), 0);
    let res = send(&app, &u, &fixes).await;
    assert_eq!((res["stored"].clone(), res["processed"].clone()), (json!(0), json!(true)), "{res}");
    let got = all_events(&app, &format!("user_id={u}")).await;
    assert_eq!(kinds(&got), kinds(&expected));
    let (_, user) = app.get(&format!("/v1/api/user/?user_id={u}")).await;
    let last = &user["data"]["users"][0]["last_location_update"]["recorded_at"];
    assert_eq!(last, &fixes.last().unwrap()["recorded_at"], "{user}");

    // Processing again (a redelivered stream record, a second sweep) adds nothing.
    let p = project(&app);
    processor::process_user(app.state.store.as_ref(), &p, &u).await.unwrap();
    processor::sweep(app.state.store.as_ref()).await.unwrap();
    assert_eq!(ids(&all_events(&app, &format!("user_id={u}")).await), ids(&got));

    // Crash and no re-send: the sweep finds the batch mark and finishes it.
    let v = tracked_user(&app).await;
    store_without_processing(&app, &v, &fixes).await;
    processor::sweep(app.state.store.as_ref()).await.unwrap();
    assert_eq!(kinds(&all_events(&app, &format!("user_id={v}")).await), kinds(&expected));
});

both!(a_batch_still_being_stored_holds_passes_back_until_complete_or_abandoned, |app| async move {
    circle_and_square(&app).await;
    let fixes = crossing_trace(5);
    let expected = reference_events(&app, &fixes).await;

    // Half a batch in the log and its request maybe still writing: no pass goes past the
    // batch's oldest fix, so nothing is derived from the half yet.
    let u = tracked_user(&app).await;
    store_half(&app, &u, &fixes, 0).await;
    processor::sweep(app.state.store.as_ref()).await.unwrap();
    assert_eq!(all_events(&app, &format!("user_id={u}")).await.len(), 0);
    // The client re-sends the batch: every event comes out, in order, as without the fault.
    let res = send(&app, &u, &fixes).await;
    assert_eq!(res["processed"], true, "{res}");
    assert_eq!(kinds(&all_events(&app, &format!("user_id={u}")).await), kinds(&expected));

    // A request dead for longer than ABANDONED_SECONDS blocks nothing: the sweep derives what
    // the stored half says (the re-send that never came cannot be waited for).
    let v = tracked_user(&app).await;
    store_half(&app, &v, &fixes, marks::ABANDONED_SECONDS + 5).await;
    processor::sweep(app.state.store.as_ref()).await.unwrap();
    let got = all_events(&app, &format!("user_id={v}")).await;
    assert!(!got.is_empty() && got.len() < expected.len(), "events of the stored half only: {got:?}");
});

/// The user's batch marks: (stored, number of fixes), oldest batch first.
async fn marks_of(app: &TestApp, user: &str) -> Vec<(bool, u64)> {
    let mut out: Vec<(String, bool, u64)> = app
        .state
        .store
        .scan_all(shared::store::Table::Main)
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i["pk"].as_str().unwrap().starts_with("PENDING#") && i["user_id"] == user)
        .map(|i| (i["since"].to_string(), i["stored"] == true, i["fixes"].as_u64().unwrap()))
        .collect();
    out.sort();
    out.into_iter().map(|(_, s, n)| (s, n)).collect()
}

both!(a_batchs_own_pass_takes_its_mark_as_stored_and_one_it_cannot_reach_is_derived_after, |app| async move {
    // A request's own pass takes its batch's mark as stored (no rewrite) and removes it. Held
    // back by an earlier batch whose request is still at work, it leaves its mark, marked
    // stored, and that request's pass derives both, in order.
    circle_and_square(&app).await;
    let fixes = crossing_trace(5);
    let expected = reference_events(&app, &fixes).await;
    let p = project(&app);
    let store = app.state.store.as_ref();
    let plain = tracked_user(&app).await;
    send(&app, &plain, &fixes).await;
    assert_eq!(marks_of(&app, &plain).await, vec![], "an ingest leaves no mark");

    let u = tracked_user(&app).await;
    let (a, b) = fixes.split_at(fixes.len() / 2);
    // Batch A's request has marked it and is storing it when batch B comes.
    let prepared = locations::prepare(&p, &u, parse(a));
    let pending = marks::mark_batch(store, &p, &u, &prepared).await.unwrap();
    let res = send(&app, &u, b).await;
    assert_eq!(res["stored"], b.len(), "{res}");
    assert_eq!(all_events(&app, &format!("user_id={u}")).await.len(), 0, "nothing derived past A's oldest fix");
    assert_eq!(marks_of(&app, &u).await, vec![(false, a.len() as u64), (true, b.len() as u64)]);
    // A's request goes on as ingest does: its pass derives A and B and removes both marks.
    let new = locations::store_prepared(store, &p, &u, prepared).await.unwrap();
    let own = marks::own_mark(pending.as_ref(), &new).expect("a fresh mark over new fixes");
    let done = processor::process_own(store, &p, &u, Some(&own), None).await.unwrap();
    assert!(done.own_cleared, "{done:?}");
    assert_eq!(marks_of(&app, &u).await, vec![]);
    assert_eq!(kinds(&all_events(&app, &format!("user_id={u}")).await), kinds(&expected));
});

/// What a request of a process that died left: its mark, written before the store was opened
/// (by this process) and never completed, and the batch's fixes, all or every other one.
async fn left_by_a_dead_process(app: &TestApp, user: &str, fixes: &[Value], whole: bool) {
    let p = project(app);
    let store = app.state.store.as_ref();
    let prepared = locations::prepare(&p, user, parse(fixes));
    let opened = store.sole_writer_since().unwrap_or_else(shared::time::Timestamp::now);
    let at = shared::time::Timestamp(opened.0 - Duration::seconds(1));
    marks::write_mark(store, &p, user, &prepared, false, at).await.unwrap();
    let kept = if whole { prepared } else { prepared.into_iter().step_by(2).collect() };
    locations::store_prepared(store, &p, user, kept).await.unwrap();
}

both!(a_batch_a_dead_process_left_whole_is_derived_at_once_where_the_store_is_ours, |app| async move {
    circle_and_square(&app).await;
    let fixes = crossing_trace(5);
    let expected = reference_events(&app, &fixes).await;
    let ours = app.state.store.sole_writer_since().is_some();

    // Wholly stored: the embedded store is this process's alone (its file's lock), so the
    // request died with the process before and the sweep derives the batch now. The suite's
    // DynamoDB store is shared, as on Lambda: another instance may still be storing it.
    let u = tracked_user(&app).await;
    left_by_a_dead_process(&app, &u, &fixes, true).await;
    processor::sweep(app.state.store.as_ref()).await.unwrap();
    let got = all_events(&app, &format!("user_id={u}")).await;
    if ours {
        assert_eq!(kinds(&got), kinds(&expected));
    } else {
        assert!(got.is_empty(), "derived within the hold on a shared store: {got:?}");
    }

    // Stored in part: held on either, for the re-send, which brings every event in order.
    let v = tracked_user(&app).await;
    left_by_a_dead_process(&app, &v, &fixes, false).await;
    processor::sweep(app.state.store.as_ref()).await.unwrap();
    assert_eq!(all_events(&app, &format!("user_id={v}")).await.len(), 0);
    send(&app, &v, &fixes).await;
    assert_eq!(kinds(&all_events(&app, &format!("user_id={v}")).await), kinds(&expected));
});

both!(fixes_from_the_future_are_refused_and_change_nothing, |app| async move {
    let fence = enabled_fence(&app, with(circle(HOME, 200), json!({"description": "home"}))).await;
    let u = tracked_user(&app).await;
    let now = Utc::now();
    let near = |s: i64, p: (f64, f64)| json!({"coordinates": [p.0, p.1], "recorded_at": ts(now + Duration::seconds(s)), "accuracy": 5.0});
    let far_future =
        json!({"coordinates": [HOME.0, HOME.1], "recorded_at": ts(now + Duration::days(3 * 365)), "accuracy": 5.0});
    let body = json!({"user_id": u, "locations": [near(-60, at(HOME, 1000.0, 0.0)), far_future, near(-30, at(HOME, 900.0, 0.0))]});
    let (status, res) = app.post("/v1/api/location/", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let d = &res["data"];
    assert_eq!((d["received"].clone(), d["stored"].clone()), (json!(3), json!(2)), "{res}");
    assert_eq!(d["rejected"][0]["index"], 1, "{res}");
    assert_eq!(d["rejected"][0]["field"], "locations[1].recorded_at", "{res}");
    // A skew of a minute is fine.
    let (_, res) =
        app.post("/v1/api/location/", &json!({"user_id": u, "locations": [near(60, at(HOME, 800.0, 0.0))]})).await;
    assert_eq!(res["data"]["stored"], 1, "{res}");
    // The future fix pinned nothing: entering the fence now still fires.
    send(&app, &u, &[near(90, HOME)]).await;
    let day = format!(
        "start_date={}&end_date={}",
        (now - Duration::days(1)).format("%Y-%m-%d"),
        (now + Duration::days(1)).format("%Y-%m-%d")
    );
    let events = crate::geofence_events::all_events_in(&app, &format!("user_id={u}"), &day).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["geofence_id"], fence.as_str());
    let (_, user) = app.get(&format!("/v1/api/user/?user_id={u}")).await;
    assert_eq!(user["data"]["users"][0]["last_location_update"]["recorded_at"], json!(ts(now + Duration::seconds(90))));
    // A batch of nothing but future fixes is a 400 naming the field.
    let (status, res) = app.post("/v1/api/location/", &json!({"user_id": u, "locations": [far_future]})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "locations[0].recorded_at");
});

both!(a_v2_trip_near_the_item_limit_takes_every_event, |app| async move {
    let user = app.create_user(json!({})).await;
    let big = "x".repeat(3900);
    let stops: Vec<Value> = (0..50)
        .map(|i| {
            let p = at(HOME, 150.0 * f64::from(i), 0.0);
            json!({"name": format!("stop {i} {}", "n".repeat(200)), "description": "d".repeat(800),
                   "address": "a".repeat(1000), "metadata": {"notes": big},
                   "geometry": {"type": "Point", "coordinates": [p.0, p.1]}})
        })
        .collect();
    let (status, res) = app
        .call("POST", "/v2/trips", Key::Bearer, Some(&json!({"user_id": user, "name": "long round", "stops": stops})))
        .await;
    assert_eq!(
        (status, res["code"].clone()),
        (StatusCode::CREATED, json!(201)),
        "{}",
        &res.to_string()[..300.min(res.to_string().len())]
    );
    let id = res["trip"]["id"].as_str().unwrap().to_owned();
    let (status, res) =
        app.call("POST", &format!("/v2/trips/{id}/controls"), Key::Bearer, Some(&json!({"action": "start"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    // Drive past every stop at 50 m/s (after the start, within the clock tolerance).
    let now = Utc::now() + Duration::seconds(1);
    let fixes: Vec<Value> = (0..=150)
        .map(|k| {
            let p = at(HOME, 50.0 * f64::from(k), 0.0);
            json!({"coordinates": [p.0, p.1], "recorded_at": ts(now + Duration::seconds(i64::from(k))), "accuracy": 5.0})
        })
        .collect();
    let res = send(&app, &user, &fixes).await;
    assert_eq!(res["processed"], true, "{res}");
    let (_, trip) = app.call("GET", &format!("/v2/trips/{id}"), Key::Bearer, None).await;
    let events = trip["trip"]["events"].as_array().unwrap();
    let reached = events.iter().filter(|e| e["event_type"] == "trip:user_reached_stop").count();
    assert_eq!(reached, 50, "every stop reached");
    // A trip too big to take its future events is refused when it is created, not at ingest.
    let huge: Vec<Value> = (0..50)
        .map(|i| json!({"name": "n".repeat(1024), "description": "d".repeat(1024), "address": "a".repeat(1024),
                        "metadata": {"notes": "x".repeat(4000)}, "geometry": {"type": "Point", "coordinates": [HOME.0, HOME.1 + f64::from(i) * 0.001]}}))
        .collect();
    let (status, res) =
        app.call("POST", "/v2/trips", Key::Bearer, Some(&json!({"user_id": user, "stops": huge}))).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{}", res["description"]);
});

both!(a_fixs_events_list_exits_then_entries_then_dwells, |app| async move {
    // A is a big circle, B a small one inside it at its edge: 6 minutes inside A, then a fix
    // that enters B and completes A's dwell at once.
    let a = enabled_fence(&app, with(circle(HOME, 500), json!({"description": "A"}))).await;
    let b = enabled_fence(&app, with(circle(at(HOME, 300.0, 0.0), 60), json!({"description": "B"}))).await;
    let u = tracked_user(&app).await;
    let fixes: Vec<Value> = vec![fix(HOME, 0), fix(HOME, 120), fix(HOME, 240), fix(at(HOME, 300.0, 0.0), 360)];
    send(&app, &u, &fixes).await;
    let events = all_events(&app, &format!("user_id={u}")).await;
    let got: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["event_type"].as_str().unwrap().replace("motion:geofence:", ""),
                e["geofence_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(got, [("entry".into(), a.clone()), ("entry".into(), b.clone()), ("dwell".into(), a.clone())]);
});

both!(history_from_before_the_processor_is_not_replayed, |app| async move {
    // A user whose fixes were derived by the old in-request code: events and states exist, but
    // no watermark (removed here to stand for that data). The next batch derives only itself.
    let fence = enabled_fence(&app, with(circle(HOME, 200), json!({"description": "home"}))).await;
    let u = tracked_user(&app).await;
    send(&app, &u, &[fix(at(HOME, 1000.0, 0.0), 0), fix(HOME, 60), fix(HOME, 120)]).await;
    let before = all_events(&app, &format!("user_id={u}")).await;
    assert_eq!(before.len(), 1, "one entry: {before:?}");
    let p = project(&app);
    let store = app.state.store.as_ref();
    let wm = marks::watermark_pk(&p.project_id, &u);
    // The old code kept the latest location on the user record, and no watermark.
    let user = shared::domain::users::get(store, &p, &u).await.unwrap().expect("the user");
    assert!(user.last_location_update.is_some());
    let raw = shared::domain::users::record(store, &p, &u).await.unwrap().expect("the record");
    assert!(raw.last_location_update.is_none(), "a pass writes the latest location in the watermark only");
    let item = shared::store::to_item(&shared::domain::users::users_pk(&p.project_id), &u, &user).unwrap();
    store.put(shared::store::Table::Main, item, shared::store::Cond::None).await.unwrap();
    store.delete(shared::store::Table::Main, &wm, "-", shared::store::Cond::None).await.unwrap();
    assert!(store.get(shared::store::Table::Main, &wm, "-").await.unwrap().is_none());

    send(&app, &u, &[fix(at(HOME, 20.0, 0.0), 180)]).await;
    // Replaying the first fix against today's state (inside) would fire an exit and an entry.
    let after = all_events(&app, &format!("user_id={u}")).await;
    assert_eq!(ids(&after), ids(&before), "{after:?}");
    // Leaving still fires, once.
    send(&app, &u, &[fix(at(HOME, 1000.0, 0.0), 240)]).await;
    let after = all_events(&app, &format!("user_id={u}")).await;
    let kinds: Vec<_> = after.iter().map(|e| (e["event_type"].clone(), e["geofence_id"].clone())).collect();
    assert_eq!(
        kinds,
        [(json!("motion:geofence:entry"), json!(fence)), (json!("motion:geofence:exit"), json!(fence))],
        "{after:?}"
    );
});

both!(passes_of_different_users_through_the_same_fences_never_conflict, |app| async move {
    // Eight users driving at once through the same twelve fences: their passes add to the same
    // lists (the project's events, each fence's) and must never collide on a shared item.
    let mut fences = Vec::new();
    for k in 0..12 {
        fences.push(enabled_fence(&app, circle(at(HOME, 300.0 * k as f64, 0.0), 100)).await);
    }
    let mut users = Vec::new();
    for _ in 0..8 {
        users.push(tracked_user(&app).await);
    }
    let drive = |u: usize| {
        let (app, user) = (&app, users[u].clone());
        async move {
            let mut processed = Vec::new();
            for b in 0..6 {
                let fixes: Vec<Value> = (0..20)
                    .map(|k| b * 20 + k)
                    .map(|i| fix(at(HOME, -200.0 + 31.0 * i as f64, 0.0), 2 * i + u as i64))
                    .collect();
                processed.push(send(app, &user, &fixes).await["processed"].clone());
            }
            processed
        }
    };
    let answers = futures::future::join_all((0..users.len()).map(drive)).await;
    assert!(answers.iter().flatten().all(|p| *p == json!(true)), "{answers:?}");
    // Every user entered and left every fence once, and each list pages over exactly its events.
    let all = all_events(&app, "").await;
    assert_eq!(all.len(), users.len() * fences.len() * 2);
    for u in &users {
        assert_eq!(all_events(&app, &format!("user_id={u}")).await.len(), fences.len() * 2);
    }
    for f in &fences {
        assert_eq!(all_events(&app, &format!("geofence_id={f}")).await.len(), users.len() * 2);
    }
});
