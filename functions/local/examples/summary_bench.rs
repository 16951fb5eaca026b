//! Time to compute a trip summary (read the trip's locations, analyse the route) for trips of
//! 10,000 and 100,000 points, on the in-memory embedded store. Run in release:
//! `cargo run --release -p local --example summary_bench`.

use std::time::Instant;

use chrono::{Duration, Utc};
use shared::auth::{KeyKind, Project};
use shared::domain::locations::{Location, prepare, store_prepared};
use shared::domain::projects::{self, ChosenKeys};
use shared::domain::trips::{self, Action, Api, NewTrip, route};
use shared::domain::users;
use shared::store::EmbeddedStore;

#[tokio::main]
async fn main() {
    for n in [10_000usize, 100_000] {
        let store = EmbeddedStore::memory().expect("store");
        let issued = projects::create(&store, "bench", &ChosenKeys::default()).await.expect("project");
        let p = Project { project_id: issued.project_id, account_id: issued.account_id, kind: KeyKind::Secret };
        let create = serde_json::from_value(serde_json::json!({"app_type": 1, "device_token": "t"})).expect("body");
        let user = users::create(&store, &p, create).await.expect("user");
        let input = NewTrip { user_id: Some(user.id.clone()), ..NewTrip::default() };
        let trip = trips::create(&store, &p, Api::V1, input).await.expect("trip");
        let t0 = Utc::now() - Duration::seconds(n as i64 + 60);
        trips::control(&store, &p, Api::V1, &trip.id, Action::Start, Some(shared::time::Timestamp(t0)))
            .await
            .expect("start");
        // A fix a second along a gently curving line, with a few meters of jitter.
        let fixes: Vec<Location> = (0..n)
            .map(|i| {
                let f = i as f64;
                let jitter = ((f * 12.9898).sin() * 43_758.545).fract() * 4e-5;
                serde_json::from_value(serde_json::json!({
                    "coordinates": [13.0 + f * 1e-4 + jitter, 52.0 + (f / 500.0).sin() * 0.01 - jitter],
                    "recorded_at": (t0 + Duration::seconds(i as i64 + 1)).format("%Y-%m-%dT%H:%M:%S").to_string(),
                    "accuracy": 5.0, "altitude": 30.0 + (f / 300.0).sin() * 20.0,
                }))
                .expect("fix")
            })
            .collect();
        for chunk in fixes.chunks(1000) {
            let _stored =
                store_prepared(&store, &p, &user.id, prepare(&p, &user.id, chunk.to_vec())).await.expect("ingest");
            shared::domain::processor::process_user(&store, &p, &user.id).await.expect("hook");
        }
        let end = t0 + Duration::seconds(n as i64 + 2);
        trips::control(&store, &p, Api::V1, &trip.id, Action::End, Some(shared::time::Timestamp(end)))
            .await
            .expect("end");

        let mut times = Vec::new();
        let mut points = 0;
        for _ in 0..5 {
            let start = Instant::now();
            let s = trips::summary(&store, &p, Api::V1, &trip.id).await.expect("summary");
            let json = trips::json::summary_json(&s, true);
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            points = json["route"].as_array().map(Vec::len).unwrap_or(0);
        }
        times.sort_by(f64::total_cmp);
        let record = trips::get(&store, &p, Api::V1, &trip.id).await.expect("trip");
        let start = Instant::now();
        let locs = trips::trip_locations(&store, &p, &record, shared::time::Timestamp::now()).await.expect("locations");
        let read_ms = start.elapsed().as_secs_f64() * 1000.0;
        let start = Instant::now();
        let r = route::analyse(&locs, &[]);
        let analyse_ms = start.elapsed().as_secs_f64() * 1000.0;
        println!(
            "{n:>7} points: summary (read + analyse + JSON) median {:.1} ms (min {:.1}, max {:.1}) over 5 runs; read alone {read_ms:.1} ms; analysis alone {analyse_ms:.1} ms; route {points} points, {:.0} m, {} stops",
            times[2],
            times[0],
            times[4],
            r.distance_m,
            r.stops.len()
        );
    }
}
