//! CPU time of a warm read, through the router alone (no sockets): what `waymark serve` spends on each request besides HTTP and the kernel, measured
//! on one task so that the figure is steady to a few percent (wrk's throughput on two shared
//! cores moves by more than the changes this weighs). Run in release:
//! `cargo run --release -p local --example warm_bench` (`WARM_REQUESTS=200000` per batch,
//! `WARM_BATCHES=7`; `WARM_PATHS=users` for some of them).
//!
//! Seeded as `scripts/bench/all.sh` seeds the server it measures (25 users, then
//! `scripts/bench/seed_reads.py`'s user, fences, drive and trips); the same paths.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::time::Instant;

use axum::body::Body;
use axum::http::Request;
use serde_json::json;
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys};
use shared::pipeline::processor;
use shared::project::{KeyKind, Project};
use shared::store::EmbeddedStore;
use tower::ServiceExt;

/// The allocator `waymark serve` runs on (its `main.rs`), so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    local::allocator::keep_freed_memory();
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(run());
}

fn var(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn run() {
    let (requests, batches) = (var("WARM_REQUESTS", 100_000), var("WARM_BATCHES", 7));
    let state = AppState::new(EmbeddedStore::memory().expect("store"));
    let issued = projects::create(state.store.as_ref(), "bench", &ChosenKeys::default()).await.expect("project");
    let project =
        Project { project_id: issued.project_id.clone(), account_id: issued.account_id.clone(), kind: KeyKind::Secret };
    let router = local::app(state.clone());
    let call = |req: Request<Body>| {
        let router = router.clone();
        async move {
            let res = router.oneshot(req).await.expect("router is infallible");
            let status = res.status();
            let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.expect("body");
            (status, body)
        }
    };
    let send = |method: &str, path: &str, body: serde_json::Value| {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("Api-Key", &issued.api_key)
            .header("Content-Type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request");
        let (call, path) = (&call, path.to_owned());
        async move {
            let (status, body) = call(req).await;
            assert!(status.is_success(), "{path} answered {status}");
            serde_json::from_slice::<serde_json::Value>(&body).expect("json")
        }
    };
    let mut last = String::new();
    for i in 0..25 {
        let made = send("POST", "/v1/api/user/", json!({"app_type": 1, "device_token": format!("bench-{i}")})).await;
        last = made["data"]["user_id"].as_str().expect("user_id").to_owned();
    }
    // As scripts/bench/seed_reads.py seeds: a user with a drive through 50 fences, and trips.
    let (lng, lat) = (13.40, 52.50);
    let made = send("POST", "/v1/api/user/", json!({"app_type": 1, "device_token": "bench-reads"})).await;
    let user = made["data"]["user_id"].as_str().expect("user_id").to_owned();
    send("PUT", "/v1/api/user/", json!({"user_id": user, "geofence_events": true, "location_events": true})).await;
    for k in 0..50 {
        let fence = json!({"coordinates": [lng + k as f64 * 0.002, lat], "geometry_type": "circle",
            "geometry_radius": 100, "is_enabled": true, "description": format!("fence {k}")});
        send("POST", "/v1/api/geofence/", fence).await;
    }
    let start = chrono::DateTime::parse_from_rfc3339("2024-05-01T08:00:00Z").expect("time");
    let fixes: Vec<_> = (0..200)
        .map(|k| {
            let at = (start + chrono::Duration::seconds(4 * k)).format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
            json!({"coordinates": [lng + k as f64 * 0.0005, lat], "accuracy": 5, "speed": 8, "recorded_at": at})
        })
        .collect();
    send("POST", "/v1/api/location/", json!({"user_id": user, "locations": fixes})).await;
    processor::process_user(state.store.as_ref(), &project, &user).await.expect("events derived");
    let mut trip = String::new();
    for _ in 0..10 {
        let made = send("POST", "/v1/api/trips/", json!({"user_id": user, "origins": [[lng, lat]]})).await;
        trip = made["data"][0]["id"].as_str().expect("trip id").to_owned();
    }
    let paths = [
        ("users", "/v1/api/user/".to_owned()),
        ("user", format!("/v1/api/user/?user_id={last}")),
        ("locations", format!("/v1/api/location/?user_id={user}")),
        ("geofences", "/v1/api/geofence/".to_owned()),
        ("trips", format!("/v1/api/trips/?user_id={user}")),
        ("trip", format!("/v1/api/trips/?trip_id={trip}")),
        ("events", format!("/v1/api/event/?user_id={user}&start_date=2024-05-01&end_date=2024-05-02")),
        ("search", format!("/v1/api/search/geofences/?location={lat},{}&radius=1000", lng + 0.02)),
        ("insights", format!("/v1/api/insights/home/?user_id={user}")),
        ("settings", "/v1/api/project/settings/".to_owned()),
    ];
    let only = std::env::var("WARM_PATHS").ok();
    println!("path       µs/request (median of {batches} batches of {requests}; min, max)");
    for (name, path) in paths {
        if only.as_deref().is_some_and(|o| !o.split(',').any(|n| n == name)) {
            continue;
        }
        let mut per = Vec::new();
        for _ in 0..batches {
            let start = Instant::now();
            for _ in 0..requests {
                let req = Request::get(&path).header("Api-Key", &issued.api_key).body(Body::empty()).expect("request");
                let (status, body) = call(req).await;
                assert!(status.is_success() && !body.is_empty(), "{path} answered {status}");
            }
            per.push(start.elapsed().as_secs_f64() * 1e6 / requests as f64);
        }
        per.sort_by(f64::total_cmp);
        println!("{name:10} {:.3} ({:.3}, {:.3})", per[per.len() / 2], per[0], per[per.len() - 1]);
    }
}
