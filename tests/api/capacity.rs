//! DynamoDB capacity units per operation, as DynamoDB Local reports them (ConsumedCapacity).
//! Printed for the record and bounded, so a change that multiplies the cost of a hot path fails.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use shared::AppState;

use crate::helpers::{Key, TestApp, dynamo_store};
use crate::trace::Trace;

#[tokio::test]
async fn capacity_units_of_trip_operations() {
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
    cost("create trip (v3)", 12.0, &mut figures);
    let trip = res["data"][0]["id"].as_str().unwrap().to_owned();
    let ctl = |action: &str, field: &str, at: chrono::DateTime<Utc>| json!({"trip_id": trip, "action": action, field: at.format("%Y-%m-%dT%H:%M:%S%.3f").to_string()});
    ok(app.post("/v3/api/trips/controls/", &ctl("start", "started_at", t0)).await);
    cost("start control", 14.0, &mut figures);

    let mut tr = Trace::new(3, t0, 4.0);
    tr.drive((13.4, 52.5), (13.5, 52.5), 12.0, 5, (0.0, 0.0));
    let batch: Vec<Value> = tr.fixes[..100].iter().map(|f| f.json()).collect();
    ok(app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": batch})))
        .await);
    cost("ingest 100 locations during the trip", 170.0, &mut figures);
    ok(app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": batch})))
        .await);
    cost(
        "the same 100 again (all duplicates; DynamoDB Local does not charge failed conditions, AWS charges 1 WCU each)",
        150.0,
        &mut figures,
    );

    ok(app.post("/v3/api/trips/controls/", &ctl("end", "ended_at", tr.fixes[99].at)).await);
    cost("end control (reads the trip's 100 locations)", 25.0, &mut figures);
    ok(app.get(&format!("/v3/api/trips/summary/?trip_id={trip}")).await);
    cost("summary of a 100-point trip", 15.0, &mut figures);
    ok(app.get(&format!("/v3/api/trips/?trip_id={trip}")).await);
    cost("get trip", 4.0, &mut figures);

    for (label, used) in &figures {
        eprintln!("{used:>7.1} capacity units  {label}");
    }
}
