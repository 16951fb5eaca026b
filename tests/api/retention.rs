//! Retention (`retention_days` in project settings): the setting's validation and isolation, the
//! TTL attribute on items written while a project has retention, the sweeper removing expired
//! locations and geofence events (from every list they are written to) while newer ones and other
//! projects' stay, trips keeping their figures once their fixes are gone, and the sweep's rate.

use std::time::{Duration as StdDuration, Instant};

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use shared::domain::locations::locations_pk;
use shared::domain::trips::{self, Action, Api, NewTrip};
use shared::expiry::TTL_ATTRIBUTE;
use shared::pipeline::retention;
use shared::store::{Item, Query, SkRange, Table};
use shared::time::Timestamp;

use crate::geofences::{HOME, circle, enabled_fence, project};
use crate::helpers::{Key, TestApp, assert_error};
use crate::trace::offset;
use crate::trips::ts;
use crate::{both, both_alone};

const SETTINGS: &str = "/v1/api/project/settings/";

pub(crate) async fn set_retention(app: &TestApp, key: Key<'_>, days: Value) -> Value {
    let (status, res) = app.call("PUT", SETTINGS, key, Some(&json!({"retention_days": days}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    res["data"].clone()
}

/// A fix at `HOME` moved `dx` meters east, recorded at `at`.
pub(crate) fn fix(dx: f64, at: DateTime<Utc>) -> Value {
    let (lng, lat) = offset(HOME.0, HOME.1, dx, 0.0);
    json!({"coordinates": [lng, lat], "recorded_at": ts(at), "accuracy": 5.0})
}

/// Outside a 100 m fence at HOME, inside, outside again: an entry and an exit, from `at` on.
pub(crate) fn visit(at: DateTime<Utc>) -> Vec<Value> {
    vec![fix(500.0, at), fix(0.0, at + Duration::seconds(60)), fix(500.0, at + Duration::seconds(120))]
}

pub(crate) async fn send(app: &TestApp, key: Key<'_>, user: &str, fixes: Vec<Value>) {
    let body = json!({"user_id": user, "locations": fixes});
    let (status, res) = app.call("POST", "/v1/api/location/", key, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res["data"]["processed"], true, "{res}");
}

pub(crate) async fn user_with_events(app: &TestApp, key: Key<'_>) -> String {
    let body = json!({"app_type": 1, "device_token": "t"});
    let (status, res) = app.call("POST", "/v1/api/user/", key, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let user = res["data"]["user_id"].as_str().expect("user_id").to_owned();
    let body = json!({"user_id": user, "geofence_events": true});
    let (status, res) = app.call("PUT", "/v1/api/user/", key, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    user
}

/// Raw contents of a partition, expired items included (what the sweeper and TTL have not
/// deleted yet), less the counts a history partition keeps for paging (`~` keys).
pub(crate) async fn items(app: &TestApp, table: Table, pk: &str) -> Vec<Item> {
    let items = app.state.store.query(table, &Query::new(pk, SkRange::All).with_expired()).await.expect("query").items;
    items.into_iter().filter(|i| !i["sk"].as_str().is_some_and(|sk| sk.starts_with('~'))).collect()
}

fn recorded(item: &Item) -> DateTime<Utc> {
    let s = item["recorded_at"].as_str().expect("recorded_at");
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.3f").expect("timestamp").and_utc()
}

/// Every item of a project's events, by list: the project's, the fence's and the user's.
async fn event_lists(app: &TestApp, pid: &str, fence: &str, user: &str) -> [Vec<Item>; 3] {
    [
        items(app, Table::Main, &shared::domain::geofences::events::events_pk(pid, user)).await,
        items(app, Table::Main, &shared::domain::geofences::events::fence_events_pk(pid, fence, user)).await,
        items(app, Table::Main, &format!("{pid}#UE#{user}")).await,
    ]
}

both!(retention_days_is_validated_and_stays_in_its_project, |app| async move {
    let (status, res) = app.get(SETTINGS).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"], json!({"tracking_link_ttl_hours": 24, "retention_days": null}));
    for bad in [json!(0), json!(-1), json!(1.5), json!("x"), json!(3651), json!(true)] {
        let (status, res) = app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"retention_days": bad}))).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "retention_days");
    }
    assert_eq!(set_retention(&app, Key::Secret, json!(30)).await["retention_days"], 30);
    // Other settings change without touching it.
    let (_, res) = app.call("PUT", SETTINGS, Key::Secret, Some(&json!({"tracking_link_ttl_hours": 2}))).await;
    assert_eq!(res["data"], json!({"tracking_link_ttl_hours": 2, "retention_days": 30}), "{res}");
    assert_eq!(set_retention(&app, Key::Secret, json!(3650)).await["retention_days"], 3650);
    // The SDK key and no key neither read nor change it.
    for (key, refused) in [(Key::Publishable, StatusCode::FORBIDDEN), (Key::None, StatusCode::UNAUTHORIZED)] {
        assert_eq!(app.call("GET", SETTINGS, key, None).await.0, refused);
        assert_eq!(app.call("PUT", SETTINGS, key, Some(&json!({"retention_days": 1}))).await.0, refused);
    }
    let (_, res) = app.get(SETTINGS).await;
    assert_eq!(res["data"]["retention_days"], 3650, "unchanged: {res}");
    // Another project's key reads and changes its own project's setting only.
    let other = app.other_project().await;
    let (_, res) = app.call("GET", SETTINGS, Key::Raw(&other.api_key), None).await;
    assert_eq!(res["data"]["retention_days"], Value::Null, "{res}");
    assert_eq!(set_retention(&app, Key::Raw(&other.api_key), json!(1)).await["retention_days"], 1);
    assert_eq!(app.get(SETTINGS).await.1["data"]["retention_days"], 3650);
    // null: keep for ever again.
    assert_eq!(set_retention(&app, Key::Secret, Value::Null).await["retention_days"], Value::Null);
    assert_eq!(app.get(SETTINGS).await.1["data"]["retention_days"], Value::Null);
});

both_alone!(expired_locations_and_events_are_swept_and_the_rest_stays, |app| async move {
    let pid = app.project.project_id.clone();
    let other = app.other_project().await;
    let now = Utc::now();
    let (old, new) = (now - Duration::days(40), now - Duration::hours(1));
    let fence = enabled_fence(&app, circle(HOME, 100)).await;
    let other_fence = {
        let body = json!({"coordinates": [HOME.0, HOME.1], "geometry_type": "circle", "geometry_radius": 100, "is_enabled": true});
        let (status, res) = app.call("POST", "/v1/api/geofence/", Key::Raw(&other.api_key), Some(&body)).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        res["data"]["geofence_id"].as_str().expect("geofence_id").to_owned()
    };
    let user = user_with_events(&app, Key::Secret).await;
    let other_user = user_with_events(&app, Key::Raw(&other.api_key)).await;

    // Before retention: old history, written without the TTL attribute (the sweeper's case).
    send(&app, Key::Secret, &user, visit(old)).await;
    send(&app, Key::Raw(&other.api_key), &other_user, visit(old)).await;
    assert_eq!(set_retention(&app, Key::Secret, json!(30)).await["retention_days"], 30);
    send(&app, Key::Secret, &user, visit(new)).await;
    send(&app, Key::Raw(&other.api_key), &other_user, visit(new)).await;

    // The TTL attribute: on items written since retention, recorded time plus 30 days; never on
    // items of the project without retention.
    let locs = items(&app, Table::Locations, &locations_pk(&pid, &user)).await;
    assert_eq!(locs.len(), 6);
    for l in &locs {
        let want = (recorded(l) > now - Duration::days(2)).then(|| json!(recorded(l).timestamp() + 30 * 86_400));
        assert_eq!(l.get(TTL_ATTRIBUTE).cloned(), want, "{l:?}");
    }
    let lists = event_lists(&app, &pid, &fence, &user).await;
    for list in &lists {
        assert_eq!(list.len(), 4, "entry and exit, old and new: {list:?}");
        for e in list {
            assert_eq!(e.get(TTL_ATTRIBUTE).is_some(), recorded(e) > now - Duration::days(2), "{e:?}");
        }
    }
    let other_locs = items(&app, Table::Locations, &locations_pk(&other.project_id, &other_user)).await;
    assert_eq!(other_locs.len(), 6);
    assert!(other_locs.iter().all(|l| l.get(TTL_ATTRIBUTE).is_none()));
    let other_lists = event_lists(&app, &other.project_id, &other_fence, &other_user).await;
    assert!(other_lists.iter().all(|l| l.len() == 4 && l.iter().all(|e| e.get(TTL_ATTRIBUTE).is_none())));

    // One project's sweep: the old fixes and events go, from every list.
    let swept = retention::sweep_one(
        app.state.store.as_ref(),
        &pid,
        retention::Budget::items(retention::RUN_BUDGET),
        Timestamp::now(),
    )
    .await
    .expect("sweep");
    // 9 items of locations and events, and the 3 outbox messages of the old fixes' passes.
    assert_eq!((swept.locations, swept.events, swept.items, swept.finished), (3, 2, 12, true), "{swept:?}");
    let locs = items(&app, Table::Locations, &locations_pk(&pid, &user)).await;
    assert_eq!(locs.len(), 3);
    assert!(locs.iter().all(|l| recorded(l) > now - Duration::days(2)), "{locs:?}");
    for list in event_lists(&app, &pid, &fence, &user).await {
        assert_eq!(list.len(), 2, "{list:?}");
        assert!(list.iter().all(|e| recorded(e) > now - Duration::days(2)), "{list:?}");
    }
    // The API agrees: the old day lists nothing.
    let day = |t: DateTime<Utc>| {
        format!("start_date={}&end_date={}", t.format("%Y-%m-%d"), (t + Duration::days(1)).format("%Y-%m-%d"))
    };
    // Their lists' counts no longer count them: no pages.
    for list in ["", &format!("&user_id={user}"), &format!("&geofence_id={fence}")] {
        let (_, res) = app.get(&format!("/v1/api/event/?{}{list}", day(old))).await;
        assert_eq!((&res["data"]["events"], &res["data"]["pages"]), (&json!([]), &json!(0)), "{list}: {res}");
    }
    let (status, res) = app.get(&format!("/v1/api/location/?user_id={user}&{}", day(old))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!((&res["data"]["locations"], &res["data"]["pages"]), (&json!([]), &json!(0)), "{res}");

    // The whole sweep (every registered project) leaves the project without retention alone, and
    // finds nothing more here.
    retention::sweep(app.state.store.as_ref(), retention::Budget::items(usize::MAX), Timestamp::now())
        .await
        .expect("sweep");
    assert_eq!(items(&app, Table::Locations, &locations_pk(&pid, &user)).await.len(), 3);
    assert_eq!(items(&app, Table::Locations, &locations_pk(&other.project_id, &other_user)).await.len(), 6);
    assert!(event_lists(&app, &other.project_id, &other_fence, &other_user).await.iter().all(|l| l.len() == 4));

    // Back to keeping for ever: new items carry no expiry.
    set_retention(&app, Key::Secret, Value::Null).await;
    send(&app, Key::Secret, &user, vec![fix(900.0, now - Duration::minutes(5))]).await;
    let locs = items(&app, Table::Locations, &locations_pk(&pid, &user)).await;
    assert_eq!(locs.iter().filter(|l| l.get(TTL_ATTRIBUTE).is_none()).count(), 1, "{locs:?}");
});

both!(a_trip_keeps_its_figures_when_its_fixes_expire, |app| async move {
    let p = project(&app);
    let store = app.state.store.clone();
    let user = app.create_user(json!({})).await;
    let now = Utc::now();
    let new = NewTrip { user_id: Some(user.clone()), name: None, description: None, metadata: None, waypoints: vec![] };
    let trip = trips::create(store.as_ref(), &p, Api::V1, new).await.expect("trip");
    let start = now - Duration::hours(48);
    trips::control(store.as_ref(), &p, Api::V1, &trip.id, Action::Start, Some(Timestamp(start))).await.expect("start");
    // A walk of 2 km early in the trip (to expire) and another near its end (to stay), 100 m a minute.
    let walk = |from: DateTime<Utc>, x0: f64| -> Vec<Value> {
        (0..=20).map(|i| fix(x0 + 100.0 * f64::from(i), from + Duration::minutes(i64::from(i)))).collect()
    };
    send(&app, Key::Secret, &user, walk(start + Duration::minutes(5), 0.0)).await;
    send(&app, Key::Secret, &user, walk(now - Duration::hours(3), 2000.0)).await;
    let end = Timestamp(now - Duration::hours(2));
    let ended = trips::control(store.as_ref(), &p, Api::V1, &trip.id, Action::End, Some(end)).await.expect("end");
    let stored = ended.distance_m.expect("figures at the end");
    assert!(stored > 3900.0, "two walks of 2 km: {stored}");
    let before = trips::summary(store.as_ref(), &p, Api::V1, &trip.id).await.expect("summary");
    assert!((before.distance_m - stored).abs() < 1.0, "{} vs {stored}", before.distance_m);

    set_retention(&app, Key::Secret, json!(1)).await;
    let swept = retention::sweep_one(
        store.as_ref(),
        &p.project_id,
        retention::Budget::items(retention::RUN_BUDGET),
        Timestamp::now(),
    )
    .await
    .expect("sweep");
    assert_eq!(swept.locations, 21, "the first walk: {swept:?}");

    // The summary answers the stored figures, not the half that remains.
    let after = trips::summary(store.as_ref(), &p, Api::V1, &trip.id).await.expect("summary");
    assert_eq!(after.route.points.len() + after.route.excluded.len(), 21, "what remains");
    assert!((after.distance_m - stored).abs() < 1.0, "{} vs {stored}", after.distance_m);
    assert_eq!(after.duration_s, before.duration_s);
    let (status, res) = app.get(&format!("/v1/api/trips/summary/?trip_id={}", trip.id)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let covered = res["data"]["distance_covered"].as_f64().unwrap_or_else(|| panic!("{res}"));
    assert!((covered - stored).abs() < 1.0, "{res}");

    // A fix inside the ended trip's time, 5 km off, does not recompute from the expired history.
    send(&app, Key::Secret, &user, vec![fix(7000.0, now - Duration::minutes(150))]).await;
    let t = trips::get(store.as_ref(), &p, Api::V1, &trip.id).await.expect("trip");
    assert_eq!(t.distance_m, Some(stored), "figures kept");
});

both!(retention_sweep_is_bounded_resumes_and_reports_its_rate, |app| async move {
    let pid = app.project.project_id.clone();
    let store = app.state.store.clone();
    let now = Utc::now();
    let (users, per_user) = (3usize, 1000usize);
    let mut ids = Vec::new();
    for _ in 0..users {
        let user = app.create_user(json!({})).await;
        let old: Vec<Value> = (0..per_user)
            .map(|i| fix((i % 50) as f64 * 10.0, now - Duration::days(10) + Duration::seconds(i as i64 * 10)))
            .collect();
        send(&app, Key::Secret, &user, old).await;
        send(&app, Key::Secret, &user, vec![fix(0.0, now - Duration::minutes(1))]).await;
        ids.push(user);
    }
    set_retention(&app, Key::Secret, json!(1)).await;

    // A pass stops at its budget, in the middle of a user; the next (from the project's start) finds
    // what is left.
    let t0 = Instant::now();
    let first = retention::sweep_one(store.as_ref(), &pid, retention::Budget::items(1200), Timestamp::now())
        .await
        .expect("sweep");
    // The budget counts items: locations, and the outbox messages of their passes.
    assert_eq!((first.items, first.finished), (1200, false), "{first:?}");
    let second =
        retention::sweep_one(store.as_ref(), &pid, retention::Budget::items(retention::RUN_BUDGET), Timestamp::now())
            .await
            .expect("sweep");
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!((second.locations, second.finished), (users * per_user - first.locations, true), "{second:?}");
    for user in &ids {
        let left = items(&app, Table::Locations, &locations_pk(&pid, user)).await;
        assert_eq!(left.len(), 1, "only the recent fix stays");
    }
    let n = users * per_user;
    println!("retention sweep: {n} locations of {users} users deleted in {secs:.2} s = {:.0} items/s", n as f64 / secs);
});

// The whole-registry sweep goes through every project with retention (so, on DynamoDB, on
// tables of its own: see `both_alone!`).
both_alone!(a_sweep_with_few_queries_a_run_reaches_every_user_in_turn, |app| few_queries_a_run(app));

async fn few_queries_a_run(app: TestApp) {
    let store = app.state.store.clone();
    let now = Utc::now();
    let other = app.other_project().await;
    let mut users = Vec::new();
    for (key, pid, n) in
        [(Key::Secret, app.project.project_id.clone(), 6), (Key::Raw(&other.api_key), other.project_id.clone(), 2)]
    {
        for _ in 0..n {
            let body = json!({"app_type": 1, "device_token": "t"});
            let (status, res) = app.call("POST", "/v1/api/user/", key, Some(&body)).await;
            assert_eq!(status, StatusCode::CREATED, "{res}");
            let user = res["data"]["user_id"].as_str().expect("user_id").to_owned();
            let old = (0..3)
                .map(|i| fix(10.0 * f64::from(i), now - Duration::days(10) + Duration::minutes(i.into())))
                .collect();
            send(&app, key, &user, old).await;
            send(&app, key, &user, vec![fix(0.0, now - Duration::minutes(1))]).await;
            users.push(locations_pk(&pid, &user));
        }
        set_retention(&app, key, json!(1)).await;
    }
    // Sixteen queries a run: fewer than one project's lap (a query of each shard of its events
    // and messages, then two a user), so no run gets round them all; the stored cursor takes each
    // run on from where the last stopped (a restart reads the same cursor).
    let budget =
        || retention::Budget { items: usize::MAX, queries: 16, deadline: Instant::now() + StdDuration::from_secs(60) };
    let mut runs = 0;
    loop {
        let s = retention::sweep(store.as_ref(), budget(), Timestamp::now()).await.expect("sweep");
        assert!(s.queries <= 16, "{s:?}");
        runs += 1;
        let mut left = 0;
        for pk in &users {
            left += items(&app, Table::Locations, pk).await.len() - 1;
        }
        if left == 0 {
            break;
        }
        assert!(runs < 30, "{left} expired fixes left after {runs} runs");
    }
    assert!(runs >= 3, "two projects' laps at sixteen queries a run take several runs: {runs}");
    // A full run (no bound reached) ends its lap and starts the next from the beginning.
    let s =
        retention::sweep(store.as_ref(), retention::Budget::items(usize::MAX), Timestamp::now()).await.expect("sweep");
    assert!(s.finished && s.items == 0, "{s:?}");
}

/// The sweeper's rate on the embedded store as `waymark serve` keeps it (a file; each batch of
/// deletes is one committed transaction), in whatever build runs the tests: `users` users with
/// `per_user` expired fixes each, swept by back-to-back scheduled runs ([`retention::Budget::run`]).
async fn sweep_rate(app: TestApp, users: usize, per_user: usize) {
    let store = app.state.store.clone();
    let p = crate::geofences::project(&app);
    let now = Utc::now();
    for _ in 0..users {
        let user = app.create_user(json!({})).await;
        let old: Vec<shared::domain::locations::Location> = (0..per_user)
            .map(|i| fix((i % 50) as f64 * 10.0, now - Duration::days(10) + Duration::seconds(i as i64 * 10)))
            .map(|f| serde_json::from_value(f).expect("location"))
            .collect();
        let prepared = shared::domain::locations::prepare(&p, &user, old);
        shared::domain::locations::store_prepared(store.as_ref(), &p, &user, prepared).await.expect("stored");
    }
    set_retention(&app, Key::Secret, json!(1)).await;
    let t0 = Instant::now();
    let (mut items, mut runs) = (0, 0);
    loop {
        let s = retention::sweep(store.as_ref(), retention::Budget::run(), Timestamp::now()).await.expect("sweep");
        items += s.items;
        runs += 1;
        if s.finished {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(items, users * per_user);
    println!(
        "retention sweep: {items} locations of {users} users in {runs} runs of at most {} items, {secs:.2} s = {:.0} items/s",
        retention::RUN_BUDGET,
        items as f64 / secs
    );
}

#[tokio::test]
#[ignore = "a measurement: cargo test -p waymark-tests --test api retention_sweep_rate -- --ignored --nocapture"]
async fn retention_sweep_rate_embedded_file() {
    let path = std::env::temp_dir().join(format!("waymark-sweep-rate-{}.redb", std::process::id()));
    let store = shared::store::EmbeddedStore::open(&path).expect("store");
    sweep_rate(TestApp::with_state(shared::AppState::new(store)).await, 20, 1_000).await;
    let _ = std::fs::remove_file(&path);
}
