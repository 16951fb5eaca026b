//! Time to answer a trip summary for trips of 10,000 and 100,000 fixes on the in-memory embedded
//! store, end to end (`GET /v1/api/trips/summary/` through the router, body read out) and split
//! into its parts: reading the fixes, computing the figures, rendering the JSON body. Run in
//! release: `cargo run --release -p local --example summary_bench` (`SUMMARY_SIZES=100000` for
//! one size; `SUMMARY_RUNS=30` for a profile, with `SUMMARY_PARTS=0` of the request alone;
//! `SUMMARY_STORE=dynamo` on DynamoDB Local at `AWS_ENDPOINT_URL_DYNAMODB` instead of the
//! in-memory store; `SUMMARY_BODY=/tmp/x` also writes each body to `/tmp/x.<size>.json`;
//! `SUMMARY_HTTP=1` also times it over HTTP as a client sees it, see [`over_http`]).
//!
//! The trip is realistic GPS (the API tests' generator, `tests/api/gps_truth.rs`): a fix a
//! second, correlated error of 3–15 m while moving and 20–50 m accuracy while still, 1 % multipath
//! outliers reporting an optimistic accuracy, altitude noise; city drives with waits at lights,
//! delivery stops, walks and a tunnel, repeated.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

#[allow(dead_code)]
#[path = "../../../tests/api/trace.rs"]
mod trace;

#[allow(dead_code)]
#[path = "../../../tests/api/gps_truth.rs"]
mod gps_truth;

use std::time::Instant;

use axum::body::Body;
use axum::http::Request;
use chrono::{DateTime, Duration, Utc};
use gps_truth::{Outliers, Timeline, city_route, sample, walking_route};
use shared::AppState;
use shared::domain::history_pages;
use shared::domain::locations::locations_pk;
use shared::domain::locations::{Location, prepare, store_prepared};
use shared::domain::projects::{self, ChosenKeys};
use shared::domain::trips::render::SummaryBody;
use shared::domain::trips::{self, Action, Api, NewTrip, route};
use shared::domain::users;
use shared::envelope::{Envelope, SUCCESS};
use shared::project::{KeyKind, Project};
use shared::store::{DynamoStore, EmbeddedStore, Query, Store, Table, TableNames, from_json};
use shared::time::Timestamp;
use tower::ServiceExt;

/// The allocator `waymark serve` runs on (its `main.rs`), so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const HOME: (f64, f64) = (13.3777, 52.5163);

/// At least `seconds` of a working day: drives, stops, walks, a tunnel; a fix every second.
fn timeline(t0: DateTime<Utc>, seconds: usize) -> Timeline {
    let mut tl = Timeline::new(t0, HOME, 34.0);
    let mut round = 0.0;
    while tl.states.len() < seconds {
        // Each round starts a little further east, so rounds do not retrace one another.
        let shift = |p: &[(f64, f64)]| p.iter().map(|&(x, y)| (x + round * 300.0, y)).collect::<Vec<_>>();
        let route = shift(&city_route(1.0));
        for (k, chunk) in route.chunks(route.len().div_ceil(4)).enumerate() {
            tl.travel(chunk, 12.0, 34.0 + 10.0 * k as f64, [3.0, 6.0, 10.0, 15.0][k], false);
            tl.stay(40, 10.0);
        }
        tl.stay(300, 35.0);
        tl.travel(&shift(&[(2600.0, 3000.0)]), 12.0, 40.0, 5.0, true);
        tl.travel(&shift(&walking_route((2600.0, 3000.0))), 1.4, 50.0, 5.0, false);
        tl.stay(600, 25.0);
        tl.travel(&shift(&[(0.0, 3000.0), (0.0, 0.0)]), 10.0, 34.0, 6.0, false);
        round += 1.0;
    }
    tl.states.truncate(seconds);
    tl
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    // As `waymark serve` runs, set before the runtime's threads exist.
    local::allocator::keep_freed_memory();
    tokio::runtime::Runtime::new().expect("runtime").block_on(run());
}

async fn run() {
    let sizes: Vec<usize> = std::env::var("SUMMARY_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    // More runs make a profile of the summary itself (`perf record`) outweigh the setup's.
    let runs: usize = std::env::var("SUMMARY_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    for n in sizes {
        let state = match std::env::var("SUMMARY_STORE").as_deref() {
            Ok("dynamo") => {
                std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
                    .expect("SUMMARY_STORE=dynamo needs AWS_ENDPOINT_URL_DYNAMODB");
                let prefix = format!("sumbench-{}-", shared::ids::random_hex(6));
                let d = DynamoStore::from_env(TableNames::with_prefix(&prefix)).await;
                d.ensure_tables().await.expect("tables");
                AppState::new(d)
            }
            _ => AppState::new(EmbeddedStore::memory().expect("store")),
        };
        let store = state.store.as_ref();
        let issued = projects::create(store, "bench", &ChosenKeys::default()).await.expect("project");
        let p = Project { project_id: issued.project_id.clone(), account_id: issued.account_id, kind: KeyKind::Secret };
        let create = serde_json::from_value(serde_json::json!({"app_type": 1, "device_token": "t"})).expect("body");
        let user = users::create(store, &p, create).await.expect("user");
        let input = NewTrip { user_id: Some(user.id.clone()), ..NewTrip::default() };
        let trip = trips::create(store, &p, Api::V1, input).await.expect("trip");
        // Whole seconds, far enough back that every fix is in the past.
        let t0 =
            DateTime::from_timestamp((Utc::now() - Duration::seconds(n as i64 + 3600)).timestamp(), 0).expect("time");
        trips::control(store, &p, Api::V1, &trip.id, Action::Start, Some(Timestamp(t0))).await.expect("start");
        let tl = timeline(t0, n);
        let fixes: Vec<Location> = sample(&tl, 1, Outliers::Optimistic, 7)
            .into_iter()
            .map(|s| serde_json::from_value(s.json).expect("fix"))
            .collect();
        for chunk in fixes.chunks(1000) {
            let _stored =
                store_prepared(store, &p, &user.id, prepare(&p, &user.id, chunk.to_vec())).await.expect("ingest");
            shared::pipeline::processor::process_user(store, &p, &user.id).await.expect("process");
        }
        let end = Timestamp(t0 + Duration::seconds(n as i64 + 1));
        trips::control(store, &p, Api::V1, &trip.id, Action::End, Some(end)).await.expect("end");

        // End to end: the request through the router, the body read out.
        let router = local::app(state.clone());
        let uri = format!("/v1/api/trips/summary/?trip_id={}", trip.id);
        let (mut total, mut bytes, mut last) = (Vec::new(), 0, axum::body::Bytes::new());
        for _ in 0..runs {
            let req = Request::get(&uri).header("Api-Key", &issued.api_key).body(Body::empty()).expect("request");
            let start = Instant::now();
            let res = router.clone().oneshot(req).await.expect("router is infallible");
            assert!(res.status().is_success(), "summary answered {}", res.status());
            let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.expect("body");
            total.push(ms(start));
            bytes = body.len();
            if let Ok(path) = std::env::var("SUMMARY_BODY") {
                std::fs::write(format!("{path}.{n}.json"), &body).expect("body written");
            }
            last = body;
        }
        if std::env::var("SUMMARY_HTTP").as_deref() == Ok("1") {
            over_http(state.clone(), &issued.api_key, &uri, runs, &last).await;
        }
        if std::env::var("SUMMARY_PARTS").as_deref() == Ok("0") {
            let (m, lo, hi) = median(total);
            println!(
                "{n:>7} fixes: summary end to end median {m:.1} ms ({lo:.1}–{hi:.1}) over {runs} runs, {bytes} bytes"
            );
            continue;
        }
        // The fixes read whole and then decoded (as before `query_docs_each`), against in chunks
        // decoded as the next is read.
        let q = Query::new(locations_pk(&p.project_id, &user.id), history_pages::fixes());
        let (mut whole, mut chunked) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let start = Instant::now();
            let docs = store.query_docs(Table::Locations, &q).await.expect("read");
            let fixes: Vec<trips::fix::TripFix> = docs.iter().map(|d| from_json(d).expect("fix")).collect();
            whole.push(ms(start));
            let start = Instant::now();
            let mut fixes2: Vec<trips::fix::TripFix> = Vec::new();
            store
                .query_docs_each(Table::Locations, &q, &mut |docs| {
                    fixes2.extend(docs.iter().map(|d| from_json(d).expect("fix")));
                    Ok(())
                })
                .await
                .expect("read");
            chunked.push(ms(start));
            assert_eq!(fixes, fixes2);
        }
        // The parts: reading, computing, rendering.
        let (mut read, mut compute, mut render) = (Vec::new(), Vec::new(), Vec::new());
        let (mut r, mut points) = (route::Route::default(), 0);
        for run in 0..runs {
            let start = Instant::now();
            let record = trips::get(store, &p, Api::V1, &trip.id).await.expect("trip");
            let locs = trips::trip_fixes(store, &p, &record, Timestamp::now()).await.expect("locations");
            read.push(ms(start));
            points = locs.len();
            let start = Instant::now();
            r = route::analyse_owned(locs, &record.pause_intervals(end));
            compute.push(ms(start));
            let summary = trips::Summary {
                trip: record,
                route: r.clone(),
                distance_m: r.distance_m,
                duration_s: 0,
                computed_at: end,
            };
            let s = SummaryBody { summary, detailed: true };
            let start = Instant::now();
            // Whole, on one core (a long route is sent in pieces, written on two threads while
            // earlier ones are sent: `SUMMARY_HTTP=1` times that).
            let body = s.to_json().expect("json");
            render.push(ms(start));
            // The body written directly is the one a tree of JSON values (sorted keys) gives.
            if run > 0 {
                continue;
            }
            let tree = Envelope::ok(SUCCESS, serde_json::to_value(&s).expect("value")).to_json(0).expect("json");
            assert!(body == tree, "the summary's bytes differ from its JSON value's");
        }
        let f = |v: Vec<f64>| {
            let (m, lo, hi) = median(v);
            format!("{m:.1} ms ({lo:.1}–{hi:.1})")
        };
        println!(
            "{n:>7} fixes: summary end to end median {} over {runs} runs, {:.1} MB body; read {} (decoded on two \
             cores; read whole then decoded {}, in chunks on one core {}); compute {}; render {} (one core); \
             {points} fixes read, route {} points, {:.3} m, {:?} m climbed, {} stops, {} excluded",
            f(total),
            bytes as f64 / 1e6,
            f(read),
            f(whole),
            f(chunked),
            f(compute),
            f(render),
            r.points.len(),
            r.distance_m,
            r.elevation_gain_m,
            r.stops.len(),
            r.excluded.len(),
        );
    }
}

/// The summary over HTTP: served as `waymark serve` serves (`local::guard::serve`, the app, this
/// allocator and runtime) on a port of its own, fetched by curl (a process of its own), a new
/// connection each time: to the first and to the last byte, plain and with `Accept-Encoding:
/// gzip` (not decompressed: the bytes as sent), in turns. Both bodies must be `expected`.
async fn over_http(state: AppState, key: &str, uri: &str, runs: usize, expected: &[u8]) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}{uri}", listener.local_addr().expect("its address"));
    let limits = local::guard::Limits::from_env(shared::config::Env::process()).expect("limits");
    tokio::spawn(local::guard::serve(listener, local::app(state), limits, std::future::pending()));
    let dir = std::env::temp_dir();
    let fetch = |gzip: bool| {
        let (url, key) = (url.clone(), key.to_owned());
        let out = dir.join(format!("summary_bench.{}.{}", std::process::id(), if gzip { "gz" } else { "json" }));
        // curl waits on a thread of its own: the runtime's workers serve.
        tokio::task::spawn_blocking(move || {
            let mut cmd = std::process::Command::new("curl");
            cmd.args(["-s", "-o"])
                .arg(&out)
                .args(["-w", "%{http_code} %{time_starttransfer} %{time_total} %{size_download}"]);
            cmd.args(["-H", &format!("Api-Key: {key}")]);
            if gzip {
                cmd.args(["-H", "Accept-Encoding: gzip"]);
            }
            let o = cmd.arg(&url).output().expect("curl runs");
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let f: Vec<&str> = text.split(' ').collect();
            assert!(f.len() == 4 && f[0] == "200", "curl: {text} {}", String::from_utf8_lossy(&o.stderr));
            let secs = |s: &str| s.parse::<f64>().expect("a time") * 1000.0;
            let body = std::fs::read(&out).expect("the body curl wrote");
            let _ = std::fs::remove_file(&out);
            (secs(f[1]), secs(f[2]), body)
        })
    };
    let (mut first, mut total) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let mut sizes = [0, 0];
    for _ in 0..runs {
        for gzip in [false, true] {
            let (ttfb, ttlb, body) = fetch(gzip).await.expect("curl's thread");
            let plain = if gzip {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut out).expect("gzip");
                out
            } else {
                body.clone()
            };
            assert!(plain == expected, "the body over HTTP (gzip: {gzip}) differs from the router's");
            first[gzip as usize].push(ttfb);
            total[gzip as usize].push(ttlb);
            sizes[gzip as usize] = body.len();
        }
    }
    for (k, name) in [(0, "plain"), (1, "gzip")] {
        let (m, lo, hi) = median(total[k].clone());
        let (f, _, _) = median(first[k].clone());
        println!(
            "  over HTTP, {name}: last byte median {m:.1} ms ({lo:.1}–{hi:.1}), first byte {f:.1} ms, {:.2} MB, {runs} runs",
            sizes[k] as f64 / 1e6
        );
    }
}
