//! Nearby geofence search at country scale: create N circle and polygon fences (half each) in one
//! project through `geofences::create`, then time `geofences::search_page` asked for every fence
//! in the circle for random points at each search radius, one query at a time, reporting latency
//! p50/p99 and fences found per query (and, on DynamoDB, consumed capacity per query). Run in
//! release:
//!
//! ```text
//! cargo run --release -p local --example geofence_bench -- [options]
//!   --store memory|file|dynamo   memory (default); file: <data-dir>/waymark.redb in the default
//!                                project of `waymark serve --data-dir <data-dir>` (so a server can
//!                                be started on it afterwards); dynamo: AWS_ENDPOINT_URL_DYNAMODB,
//!                                tables `<prefix>…` (created)
//!   --data-dir DIR               for --store file
//!   --api-key KEY                the default project's secret key (--store file)
//!   --prefix P                   table prefix for --store dynamo (default gfbench-<time>-)
//!   --fences N                   default 100000; the box shrinks with N so density is unchanged
//!   --queries Q                  per radius, default 2000
//!   --radii 1000,5000            search radii in meters
//!   --concurrency C              creates in flight (default 4; 16 for dynamo)
//!   --seed S                     default 1
//!   --layout uniform|cities      uniform (default); cities: half the fences (and half the query
//!                                points) around 10 large German cities, normally distributed
//!                                with σ = 3 km, the rest uniform: dense ("hot") index cells
//!   --ingest-batches B           then, for two users, geofence_events off and on in turn, store
//!                                B batches of 100 fixes each (15 m and 1 s apart, wandering
//!                                through the box) and run the ingest hook, timing both
//!   --export DIR                 write fences.csv (id,kind,lng,lat,radius_m,wkt), queries.csv
//!                                (qid,lng,lat), queries.txt (lat,lng for wrk) and
//!                                results_<r>.csv (qid, hits as id:distance_m)
//! ```
//!
//! Layout: the 100,000-fence box is Germany-sized (lat 47.5..54.5, lng 6..15), fences uniformly
//! spread; circles have radius 50..1000 m, polygons 4 to 8 vertices at 100..500 m from a centre
//! (star-shaped, so always simple). Query points are uniform in the box less a 5 km margin.
//! Each fence is a create body as the API takes it, so this goes through the same validation.
//! One JSON line per measurement goes to stdout; progress to stderr.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use shared::domain::geofences::{self, CreateGeofence};
use shared::domain::locations::{Location, prepare, store_prepared};
use shared::domain::projects::{self, ChosenKeys};
use shared::domain::users;
use shared::geometry::LngLat;
use shared::project::{KeyKind, Project};
use shared::store::{DynamoStore, EmbeddedStore, Store, TableNames};

/// The full-size layout.
const FULL_FENCES: f64 = 100_000.0;
const CENTER_LAT: f64 = 51.0;
const CENTER_LNG: f64 = 10.5;
const SPAN_LAT: f64 = 7.0;
const SPAN_LNG: f64 = 9.0;
const M_PER_DEG: f64 = 111_320.0;
/// Query points keep this far (m) from the box's edge, so a 5 km search sees full density.
const QUERY_MARGIN_M: f64 = 5000.0;

/// splitmix64: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.unit()
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-300);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// Berlin, Hamburg, Munich, Cologne, Frankfurt, Stuttgart, Düsseldorf, Leipzig, Dortmund, Dresden.
const CITIES: [(f64, f64); 10] = [
    (13.405, 52.520),
    (9.993, 53.551),
    (11.582, 48.135),
    (6.960, 50.938),
    (8.682, 50.110),
    (9.183, 48.776),
    (6.773, 51.227),
    (12.374, 51.340),
    (7.466, 51.514),
    (13.738, 51.050),
];
const CITY_SIGMA_M: f64 = 3000.0;

/// A position: uniform in the box, or (cities layout, every other draw) near a city.
fn position(rng: &mut Rng, cities: bool, (x0, y0, x1, y1): (f64, f64, f64, f64)) -> LngLat {
    if cities && rng.next().is_multiple_of(2) {
        let (lng, lat) = CITIES[(rng.next() % CITIES.len() as u64) as usize];
        let c = LngLat { lng, lat };
        let [lng, lat] = offset(c, rng.normal() * CITY_SIGMA_M, rng.normal() * CITY_SIGMA_M);
        LngLat { lng, lat }
    } else {
        LngLat { lng: rng.range(x0, x1), lat: rng.range(y0, y1) }
    }
}

struct Opts {
    store: String,
    data_dir: Option<PathBuf>,
    api_key: Option<String>,
    prefix: Option<String>,
    fences: usize,
    queries: usize,
    radii: Vec<f64>,
    concurrency: Option<usize>,
    seed: u64,
    export: Option<PathBuf>,
    cities: bool,
    ingest_batches: usize,
}

fn opts() -> Opts {
    let mut o = Opts {
        store: "memory".into(),
        data_dir: None,
        api_key: None,
        prefix: None,
        fences: 100_000,
        queries: 2000,
        radii: vec![1000.0, 5000.0],
        concurrency: None,
        seed: 1,
        export: None,
        cities: false,
        ingest_batches: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--store" => o.store = v(),
            "--data-dir" => o.data_dir = Some(v().into()),
            "--api-key" => o.api_key = Some(v()),
            "--prefix" => o.prefix = Some(v()),
            "--fences" => o.fences = v().parse().expect("--fences N"),
            "--queries" => o.queries = v().parse().expect("--queries Q"),
            "--radii" => o.radii = v().split(',').map(|r| r.trim().parse().expect("--radii 1000,5000")).collect(),
            "--concurrency" => o.concurrency = Some(v().parse().expect("--concurrency C")),
            "--seed" => o.seed = v().parse().expect("--seed S"),
            "--export" => o.export = Some(v().into()),
            "--ingest-batches" => o.ingest_batches = v().parse().expect("--ingest-batches B"),
            "--layout" => {
                o.cities = match v().as_str() {
                    "uniform" => false,
                    "cities" => true,
                    l => panic!("--layout {l}: uniform or cities"),
                }
            }
            other => panic!("unknown option {other} (see the header of examples/geofence_bench.rs)"),
        }
    }
    o
}

/// The box for `n` fences: the full box scaled by sqrt(n / 100,000) about its centre.
fn bbox(n: usize) -> (f64, f64, f64, f64) {
    let k = (n as f64 / FULL_FENCES).sqrt().min(1.0);
    let (dlat, dlng) = (SPAN_LAT * k / 2.0, SPAN_LNG * k / 2.0);
    (CENTER_LNG - dlng, CENTER_LAT - dlat, CENTER_LNG + dlng, CENTER_LAT + dlat)
}

/// Meters east/north of `c` as a position (local flat approximation; fine at these sizes).
fn offset(c: LngLat, east_m: f64, north_m: f64) -> [f64; 2] {
    [c.lng + east_m / (M_PER_DEG * c.lat.to_radians().cos()), c.lat + north_m / M_PER_DEG]
}

/// The create bodies (half circles, half polygons).
fn fence_bodies(n: usize, rng: &mut Rng, cities: bool) -> Vec<Value> {
    let b = bbox(n);
    (0..n)
        .map(|i| {
            let c = position(rng, cities, b);
            if i % 2 == 0 {
                let r = 50 + (rng.next() % 951) as i64;
                json!({"coordinates": [c.lng, c.lat], "geometry_type": "circle", "geometry_radius": r,
                       "is_enabled": true, "description": format!("bench circle {i}")})
            } else {
                let k = 4 + (rng.next() % 5) as usize;
                let step = std::f64::consts::TAU / k as f64;
                let a0 = rng.range(0.0, std::f64::consts::TAU);
                let ring: Vec<[f64; 2]> = (0..k)
                    .map(|j| {
                        let a = a0 + step * (j as f64 + rng.range(-0.3, 0.3));
                        let d = rng.range(100.0, 500.0);
                        offset(c, d * a.cos(), d * a.sin())
                    })
                    .collect();
                json!({"coordinates": ring, "geometry_type": "polygon", "is_enabled": true,
                       "description": format!("bench polygon {i}")})
            }
        })
        .collect()
}

fn query_points(n: usize, q: usize, rng: &mut Rng, cities: bool) -> Vec<LngLat> {
    let (x0, y0, x1, y1) = bbox(n);
    let mlat = QUERY_MARGIN_M / M_PER_DEG;
    let mlng = QUERY_MARGIN_M / (M_PER_DEG * y1.to_radians().cos());
    (0..q).map(|_| position(rng, cities, (x0 + mlng, y0 + mlat, x1 - mlng, y1 - mlat))).collect()
}

/// A user driving through the box: position, heading (radians from north), next `recorded_at`.
struct Track {
    at: LngLat,
    heading: f64,
    t: i64,
}

impl Track {
    /// The next 100 fixes, 15 m and 1 s apart, turning back at the box's edge.
    fn batch(&mut self, rng: &mut Rng, (x0, y0, x1, y1): (f64, f64, f64, f64)) -> Vec<Location> {
        (0..100)
            .map(|_| {
                self.heading += rng.range(-0.15, 0.15);
                let [lng, lat] = offset(self.at, 15.0 * self.heading.sin(), 15.0 * self.heading.cos());
                if lng < x0 || lng > x1 || lat < y0 || lat > y1 {
                    self.heading += std::f64::consts::PI;
                } else {
                    self.at = LngLat { lng, lat };
                }
                self.t += 1;
                let ts = chrono::DateTime::from_timestamp(self.t, 0).expect("time");
                serde_json::from_value(json!({
                    "coordinates": [self.at.lng, self.at.lat], "accuracy": 5.0, "speed": 15.0,
                    "recorded_at": ts.format("%Y-%m-%dT%H:%M:%S").to_string(),
                }))
                .expect("fix")
            })
            .collect()
    }
}

/// Store batches for a user with geofence events off and one with them on, alternately (so drift
/// in the machine's load hits both alike); time storing and the ingest hook separately.
async fn ingest_bench(store: &dyn Store, p: &Project, label: &str, batches: usize, seed: u64, n: usize) {
    let b = bbox(n);
    let mut rng = Rng(seed ^ 0x1A6E57);
    let mut runs = Vec::new();
    for on in [false, true] {
        let body = json!({"app_type": 1, "device_token": format!("geofence-bench-{on}")});
        let u = users::create(store, p, serde_json::from_value(body).expect("user")).await.expect("user");
        let up = json!({"user_id": u.id, "geofence_events": on});
        users::update(store, p, serde_json::from_value(up).expect("update")).await.expect("update");
        let at = position(&mut rng, false, b);
        let track = Track { at, heading: rng.range(0.0, std::f64::consts::TAU), t: 1_609_459_200 };
        runs.push((on, u.id, track, Vec::new(), Vec::new()));
    }
    for _ in 0..batches {
        for (_, uid, track, store_ms, hook_ms) in runs.iter_mut() {
            let fixes = track.batch(&mut rng, b);
            let t = Instant::now();
            let _stored = store_prepared(store, p, uid, prepare(p, uid, fixes)).await.expect("store");
            let t1 = Instant::now();
            shared::pipeline::processor::process_user(store, p, uid).await.expect("hook");
            store_ms.push((t1 - t).as_secs_f64() * 1000.0);
            hook_ms.push(t1.elapsed().as_secs_f64() * 1000.0);
        }
    }
    for (on, uid, _, store_ms, hook_ms) in runs.iter_mut() {
        let range = shared::time::DateRange {
            start: chrono::DateTime::from_timestamp(1_600_000_000, 0).expect("time"),
            end: chrono::DateTime::from_timestamp(1_900_000_000, 0).expect("time"),
        };
        let page = shared::paging::PageNumber(1);
        let (_, info) = geofences::events::list(store, p, range, Some(uid.as_str()), None, page).await.expect("events");
        let total: Vec<f64> = store_ms.iter().zip(hook_ms.iter()).map(|(a, b)| a + b).collect();
        let secs = total.iter().sum::<f64>() / 1000.0;
        let mut total = total;
        total.sort_by(f64::total_cmp);
        store_ms.sort_by(f64::total_cmp);
        hook_ms.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({
                "kind": "ingest", "store": label, "geofence_events": on, "batches": batches,
                "locations_per_s": (100 * batches) as f64 / secs,
                "batch_p50_ms": pct(&total, 50.0), "batch_p99_ms": pct(&total, 99.0),
                "store_p50_ms": pct(store_ms, 50.0), "store_p99_ms": pct(store_ms, 99.0),
                "hook_p50_ms": pct(hook_ms, 50.0), "hook_p99_ms": pct(hook_ms, 99.0),
                "hook_mean_ms": hook_ms.iter().sum::<f64>() / hook_ms.len().max(1) as f64,
                "events_about": info.pages * 10,
            })
        );
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn wkt(g: &geofences::Geofence) -> String {
    match &g.ring {
        Some(ring) => format!(
            "POLYGON(({}))",
            ring.iter().map(|p| format!("{:.9} {:.9}", p.lng, p.lat)).collect::<Vec<_>>().join(",")
        ),
        None => format!("POINT({:.9} {:.9})", g.center.lng, g.center.lat),
    }
}

/// The allocator `waymark serve` runs on (its `main.rs`), so the figures are the server's: at
/// 1M fences most pages a search reads are new to redb's cache, and glibc's allocator handed
/// their memory back to the kernel as fast as it took it (munmap was a fifth of a search).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // As `waymark serve` runs, set before the runtime's threads exist.
    local::allocator::keep_freed_memory();
    tokio::runtime::Runtime::new().expect("runtime").block_on(run());
}

async fn run() {
    let o = opts();
    let mut dynamo: Option<DynamoStore> = None;
    let (store, mut label, dir): (Arc<dyn Store>, String, Option<PathBuf>) = match o.store.as_str() {
        "memory" => (Arc::new(EmbeddedStore::memory().expect("store")), "embedded (memory)".into(), None),
        "file" => {
            let d = o.data_dir.clone().expect("--store file needs --data-dir");
            std::fs::create_dir_all(&d).expect("data dir");
            (Arc::new(EmbeddedStore::open(&d.join("waymark.redb")).expect("store")), "embedded (file)".into(), Some(d))
        }
        "dynamo" => {
            std::env::var("AWS_ENDPOINT_URL_DYNAMODB").expect("--store dynamo needs AWS_ENDPOINT_URL_DYNAMODB");
            let prefix = o.prefix.clone().unwrap_or_else(|| {
                format!("gfbench-{}-", std::time::SystemTime::UNIX_EPOCH.elapsed().unwrap_or_default().as_secs())
            });
            let d = DynamoStore::from_env(TableNames::with_prefix(&prefix)).await;
            dynamo = Some(d.clone());
            (Arc::new(d), "DynamoDB Local".into(), None)
        }
        s => panic!("--store {s}: memory, file or dynamo"),
    };
    if o.cities {
        label += ", cities layout";
    }
    store.ensure_tables().await.expect("tables");
    let chosen = ChosenKeys { api_key: o.api_key.clone(), ..ChosenKeys::default() };
    let issued = projects::ensure_default(store.as_ref(), dir.as_deref(), &chosen).await.expect("project");
    let p = Project { project_id: issued.project_id, account_id: issued.account_id, kind: KeyKind::Secret };

    // Fences.
    let mut rng = Rng(o.seed);
    let bodies = fence_bodies(o.fences, &mut rng, o.cities);
    let conc = o.concurrency.unwrap_or(if dynamo.is_some() { 16 } else { 4 });
    let (x0, y0, x1, y1) = bbox(o.fences);
    eprintln!("{label}: creating {} fences in lng {x0:.3}..{x1:.3}, lat {y0:.3}..{y1:.3} ({conc} in flight)", o.fences);
    let wcu0 = dynamo.as_ref().map(DynamoStore::consumed_capacity);
    let t0 = Instant::now();
    let mut created: Vec<geofences::Geofence> = Vec::with_capacity(o.fences);
    let mut set = tokio::task::JoinSet::new();
    let mut it = bodies.into_iter();
    loop {
        while set.len() < conc {
            let Some(b) = it.next() else { break };
            let (s, p) = (store.clone(), p.clone());
            set.spawn(async move {
                let input: CreateGeofence = serde_json::from_value(b.clone()).expect("body");
                geofences::create(s.as_ref(), &p, input).await.unwrap_or_else(|e| panic!("create {b}: {e:?}"))
            });
        }
        match set.join_next().await {
            Some(r) => created.push(r.expect("task")),
            None => break,
        }
        if created.len().is_multiple_of(10_000) {
            eprintln!("  {} created, {:.0}/s", created.len(), created.len() as f64 / t0.elapsed().as_secs_f64());
        }
    }
    let insert_s = t0.elapsed().as_secs_f64();
    let write_units = dynamo.as_ref().map(|d| d.consumed_capacity() - wcu0.unwrap_or(0.0));

    // Index occupancy: copies per cell.
    let mut per_cell: HashMap<&str, usize> = HashMap::new();
    for g in &created {
        for c in &g.cells {
            *per_cell.entry(c.as_str()).or_default() += 1;
        }
    }
    let copies: usize = per_cell.values().sum();
    let mut occ: Vec<f64> = per_cell.values().map(|&v| v as f64).collect();
    occ.sort_by(f64::total_cmp);
    let hottest = per_cell.iter().max_by_key(|(_, v)| **v).map(|(c, v)| (c.to_string(), *v)).unwrap_or_default();
    let sizes: Vec<f64> = created.iter().map(|g| serde_json::to_vec(g).map(|v| v.len()).unwrap_or(0) as f64).collect();
    let mut cells_per_fence: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    for g in &created {
        let e = cells_per_fence.entry(g.geometry_type.as_str()).or_default();
        e.0 += 1;
        e.1 += g.cells.len();
        e.2 = e.2.max(g.cells.len());
    }
    println!(
        "{}",
        json!({
            "kind": "insert", "store": label, "fences": o.fences, "seconds": insert_s,
            "per_second": o.fences as f64 / insert_s, "concurrency": conc,
            "write_capacity_units": write_units,
            "bbox": [x0, y0, x1, y1],
            "index_items": copies, "cells": per_cell.len(),
            "redb_bytes": dir.as_ref().and_then(|d| std::fs::metadata(d.join("waymark.redb")).ok()).map(|m| m.len()),
            "item_json_bytes_mean": sizes.iter().sum::<f64>() / sizes.len().max(1) as f64,
            "item_json_bytes_max": sizes.iter().copied().fold(0.0, f64::max),
            "cell_fences_p50": pct(&occ, 50.0), "cell_fences_p99": pct(&occ, 99.0),
            "cell_fences_max": occ.last(), "hottest_cell": hottest,
            "cells_per_fence": cells_per_fence.iter().map(|(k, (n, s, m))| (k.to_string(), json!({
                "mean": *s as f64 / *n as f64, "max": m}))).collect::<serde_json::Map<_, _>>(),
        })
    );

    let points = query_points(o.fences, o.queries, &mut Rng(o.seed ^ 0x5EED), o.cities);
    if let Some(d) = &o.export {
        std::fs::create_dir_all(d).expect("export dir");
        let mut f = std::io::BufWriter::new(std::fs::File::create(d.join("fences.csv")).expect("fences.csv"));
        writeln!(f, "id,kind,lng,lat,radius_m,wkt").unwrap();
        for g in &created {
            writeln!(
                f,
                "{},{},{:.9},{:.9},{},\"{}\"",
                g.id,
                g.geometry_type.as_str(),
                g.center.lng,
                g.center.lat,
                g.radius_m.unwrap_or(0),
                wkt(g)
            )
            .unwrap();
        }
        let mut q = std::io::BufWriter::new(std::fs::File::create(d.join("queries.csv")).expect("queries.csv"));
        let mut w = std::io::BufWriter::new(std::fs::File::create(d.join("queries.txt")).expect("queries.txt"));
        writeln!(q, "qid,lng,lat").unwrap();
        for (i, pt) in points.iter().enumerate() {
            writeln!(q, "{i},{:.9},{:.9}", pt.lng, pt.lat).unwrap();
            writeln!(w, "{:.7},{:.7}", pt.lat, pt.lng).unwrap();
        }
    }
    drop(created);

    // Searches: a short warm-up, then one at a time.
    for &radius in &o.radii {
        for pt in points.iter().take(50) {
            geofences::search_page(store.as_ref(), &p, *pt, radius, 1, usize::MAX).await.expect("search");
        }
        let mut ms = Vec::with_capacity(points.len());
        let mut hits = Vec::with_capacity(points.len());
        let mut units = Vec::with_capacity(points.len());
        let mut cells = Vec::with_capacity(points.len());
        let mut out = o.export.as_ref().map(|d| {
            std::io::BufWriter::new(std::fs::File::create(d.join(format!("results_{radius}.csv"))).expect("results"))
        });
        for (i, pt) in points.iter().enumerate() {
            let before = dynamo.as_ref().map(DynamoStore::consumed_capacity);
            let t = Instant::now();
            // Every fence in the circle: the whole set is compared with PostGIS's.
            let (found, _) =
                geofences::search_page(store.as_ref(), &p, *pt, radius, 1, usize::MAX).await.expect("search");
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            if let (Some(d), Some(b)) = (&dynamo, before) {
                units.push(d.consumed_capacity() - b);
            }
            cells.push(geofences::index::search_cells(*pt, radius).expect("cells").len() as f64);
            hits.push(found.len() as f64);
            if let Some(f) = out.as_mut() {
                let list: Vec<String> = found.iter().map(|h| format!("{}:{:.3}", h.id, h.distance_m)).collect();
                writeln!(f, "{i},{}", list.join(" ")).unwrap();
            }
        }
        let mean = |v: &[f64]| if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 };
        let max = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
        let (m_hits, x_hits, m_units, m_cells) = (mean(&hits), max(&hits), mean(&units), mean(&cells));
        let total_s = ms.iter().sum::<f64>() / 1000.0;
        ms.sort_by(f64::total_cmp);
        units.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({
                "kind": "search", "store": label, "fences": o.fences, "radius_m": radius, "queries": points.len(),
                "p50_ms": pct(&ms, 50.0), "p99_ms": pct(&ms, 99.0), "max_ms": ms.last(),
                "queries_per_s": points.len() as f64 / total_s,
                "cells_mean": m_cells,
                "hits_mean": m_hits, "hits_max": x_hits,
                "capacity_units_mean": (!units.is_empty()).then_some(m_units),
                "capacity_units_p99": (!units.is_empty()).then(|| pct(&units, 99.0)),
            })
        );
    }
    if o.ingest_batches > 0 {
        ingest_bench(store.as_ref(), &p, &label, o.ingest_batches, o.seed, o.fences).await;
    }
}
