//! DynamoDB capacity units per operation, as DynamoDB Local reports them (ConsumedCapacity).
//! Printed for the record and bounded, so a change that multiplies the cost of a hot path fails.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use shared::AppState;

use crate::helpers::{Key, TestApp, dynamo_store};
use crate::trace::Trace;

/// Writers fold their count items at random (1 bucket in 8 they finish: a query and a
/// transaction, 3 units); the figures here are without those folds, so that chance decides
/// nothing (the bounds once left room for one fold, and two in one phase failed CI).
#[tokio::test]
async fn capacity_units_of_trip_operations() {
    shared::domain::history_pages::with_fold_odds(0, trip_operations()).await
}

async fn trip_operations() {
    let store = dynamo_store().await;
    let app = TestApp::with_state(AppState::new(store.clone())).await;
    let user = app.create_user(json!({})).await;
    let mut last = store.consumed_capacity();
    let mut cost = |label: &str, bound: f64, figures: &mut Vec<(String, f64)>| {
        let now = store.consumed_capacity();
        let used = now - last;
        last = now;
        figures.push((label.to_owned(), used));
        assert!(used <= bound, "{label}: {used} capacity units, more than {bound}");
    };
    let mut figures = Vec::new();
    let ok = |(s, b): (StatusCode, Value)| {
        assert!(s.is_success(), "{b}");
        assert_eq!(b["code"], s.as_u16(), "{b}");
        b
    };

    let t0 = Utc::now() - Duration::hours(1);
    let res = ok(app
        .post("/v3/api/trips/", &json!({"user_id": user, "origins": [[13.4, 52.5]], "destinations": [[13.5, 52.5]]}))
        .await);
    // Each trip event and each pass also stores its outbox message (live streams resume from them).
    cost("create trip (v3)", 16.0, &mut figures);
    let trip = res["data"][0]["id"].as_str().unwrap().to_owned();
    let ctl = |action: &str, field: &str, at: chrono::DateTime<Utc>| json!({"trip_id": trip, "action": action, field: at.format("%Y-%m-%dT%H:%M:%S%.3f").to_string()});
    ok(app.post("/v3/api/trips/controls/", &ctl("start", "started_at", t0)).await);
    // A control also reads its user's watermark and puts it in its transaction (its place in the
    // user's sequence, domain::sequence), after the pass that derives the user's stored fixes
    // first reads the marks and the watermark: 19 units.
    cost("start control", 21.0, &mut figures);

    let mut tr = Trace::new(3, t0, 4.0);
    tr.drive((13.4, 52.5), (13.5, 52.5), 12.0, 5, (0.0, 0.0));
    let batch: Vec<Value> = tr.fixes[..100].iter().map(|f| f.json()).collect();
    ok(app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": batch})))
        .await);
    cost("ingest 100 locations during the trip", 200.0, &mut figures);
    ok(app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": batch})))
        .await);
    cost(
        "the same 100 again (all duplicates; DynamoDB Local does not charge failed conditions, AWS charges 1 WCU each)",
        150.0,
        &mut figures,
    );

    ok(app.post("/v3/api/trips/controls/", &ctl("end", "ended_at", tr.fixes[99].at)).await);
    // It also reads the trip's online judge from the user's started-trips entry (one unit more
    // since the judge left the trip record: 30).
    cost("end control (reads the trip's 100 locations)", 32.0, &mut figures);
    ok(app.get(&format!("/v3/api/trips/summary/?trip_id={trip}")).await);
    cost("summary of a 100-point trip", 15.0, &mut figures);
    ok(app.get(&format!("/v3/api/trips/?trip_id={trip}")).await);
    cost("get trip", 4.0, &mut figures);

    for (label, used) in &figures {
        eprintln!("{used:>7.1} capacity units  {label}");
    }
}

/// What keeping a list's page counters (`domain::list_pages`) adds to creates and deletes: each
/// operation against the same writes without the counters, as the code made them before.
#[tokio::test]
async fn capacity_units_of_counted_creates_and_deletes() {
    shared::domain::history_pages::with_fold_odds(0, counted_creates_and_deletes()).await
}

async fn counted_creates_and_deletes() {
    use shared::domain::list_pages::count_ops;
    use shared::store::{Cond, Store, Table, WriteOp};
    let store = dynamo_store().await;
    let app = TestApp::with_state(AppState::new(store.clone())).await;
    let pid = app.project.project_id.clone();
    let units = || store.consumed_capacity();
    let mut figures = Vec::new();
    // A user record as stored, put by the former create (one conditional put) and by the counted
    // one (a transaction with the five counters), then removed each way.
    let user = app.create_user(json!({})).await;
    let item = store.get(Table::Main, &format!("{pid}#U"), &user).await.unwrap().unwrap();
    for counted in [false, true] {
        let pk = format!("{pid}#U-{counted}");
        let mut item = item.clone();
        item.insert("pk".into(), pk.clone().into());
        let u0 = units();
        if counted {
            let mut ops = vec![WriteOp::Put { table: Table::Main, item, cond: Cond::NotExists }];
            ops.extend(count_ops(Table::Main, &pk, &user, 1));
            store.transact(ops).await.unwrap();
        } else {
            store.put(Table::Main, item, Cond::NotExists).await.unwrap();
        }
        let put = units() - u0;
        let u0 = units();
        let mut ops =
            vec![WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: user.clone(), cond: Cond::Exists }];
        if counted {
            ops.extend(count_ops(Table::Main, &pk, &user, -1));
        }
        store.transact(ops).await.unwrap();
        let del = units() - u0;
        let how = if counted { "counted" } else { "without counters" };
        figures.push((format!("user record put, {how}"), put));
        figures.push((format!("user record removed in a transaction, {how}"), del));
    }
    // Through the API: the whole operations.
    let mut cost = |label: &str, u0: f64| figures.push((label.to_owned(), units() - u0));
    let u0 = units();
    let id = app.create_user(json!({})).await;
    cost("POST /v1/api/user/ (key lookup, counted create)", u0);
    let u0 = units();
    let (s, r) = app.call("DELETE", &format!("/v1/api/user/?user_id={id}"), Key::Secret, None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    cost("DELETE /v1/api/user/ (whole erasure of a user with nothing)", u0);
    let fence = json!({"coordinates": [13.4, 52.5], "geometry_type": "circle", "geometry_radius": 100});
    let u0 = units();
    let (s, r) = app.post("/v1/api/geofence/", &fence).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    cost("POST /v1/api/geofence/ (100 m circle)", u0);
    let fid = r["data"]["id"].as_str().or(r["data"]["geofence_id"].as_str()).unwrap().to_owned();
    let u0 = units();
    let (s, r) = app.call("DELETE", &format!("/v1/api/geofence/?geofence_id={fid}"), Key::Secret, None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    cost("DELETE /v1/api/geofence/", u0);
    let u0 = units();
    let (s, r) = app.post("/v3/api/trips/", &json!({"origins": [[13.4, 52.5]]})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    cost("POST /v3/api/trips/", u0);
    let tid = r["data"][0]["id"].as_str().unwrap().to_owned();
    let u0 = units();
    let (s, r) = app.call("DELETE", &format!("/v3/api/trips/?trip_id={tid}"), Key::Secret, None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    cost("DELETE /v3/api/trips/", u0);
    for (label, used) in &figures {
        eprintln!("{used:>7.1} capacity units  {label}");
        // DynamoDB Local charges a transaction 2 units an item it puts or deletes and leaves
        // out the counters' ADDs; AWS charges 2 WCU a KB for every item of a transaction.
        assert!(*used <= 30.0, "{label}: {used} capacity units");
    }
}
