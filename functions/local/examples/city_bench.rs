//! Geofence events at city density (issue 47): 100,000 circle fences spread uniformly over a
//! 30 km × 30 km box (radius 50 m plus an exponential tail of mean 110 m, at most 1,000 m;
//! metadata and tags set, as customers' sites carry them), then USERS users driving through it
//! at 8 to 16 m/s, each sending batches of 100 fixes 1 s apart, all at once, through the ingest
//! pipeline the HTTP handler calls (`pipeline::ingest`). Users with `geofence_events` off and on
//! take turns, round by round (so drift in the machine's load hits both alike), on the same
//! tracks. Every answer's `processed` is checked: `false` means a pass failed (a conflict).
//! Then nearby searches at each radius (first page and `pages`). Run in release:
//!
//! ```text
//! cargo run --release -p local --example city_bench -- [options]
//!   --store memory|file|dynamo   memory (default); file: a new redb file under --data-dir;
//!                                dynamo: AWS_ENDPOINT_URL_DYNAMODB, tables `<prefix>…` (created)
//!   --data-dir DIR               for --store file
//!   --fences N                   default 100000 (the box shrinks with N: density is unchanged)
//!   --users U                    users sending at once, default 8
//!   --batches B                  batches per user and round, default 20
//!   --rounds R                   rounds (each: events off, then on), default 2
//!   --queries Q                  search points per radius, default 200 (0: no searches)
//!   --radii 1000,5000            search radii in meters
//!   --seed S                     default 47
//!   --limit L                    page size of the searches, default 10 (the endpoint's default)
//!   --api-key KEY                the default project's secret key (for `waymark serve` on --store file)
//!   --export DIR                 write fences.csv (id,kind,lng,lat,radius_m,wkt, in creation order),
//!                                queries.csv (qid,lng,lat), queries.txt (lat,lng) and, per radius,
//!                                answers_<radius>.txt ("qid total id:distance …", the first page)
//! ```
//!
//! One JSON line per measurement goes to stdout; progress to stderr. On DynamoDB, capacity units
//! as reported and as AWS prices transactions (`priced_`: DynamoDB Local undercounts them).
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::io::Write as _;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use shared::domain::geofences::{self, CreateGeofence};
use shared::domain::locations::Location;
use shared::domain::projects::{self, ChosenKeys};
use shared::domain::{history_pages, users};
use shared::geometry::LngLat;
use shared::project::{KeyKind, Project};
use shared::store::{DynamoStore, EmbeddedStore, Store, Table, TableNames};

/// The full-size layout: 100,000 fences in 30 km × 30 km around this point (Berlin).
const FULL_FENCES: f64 = 100_000.0;
const SIDE_M: f64 = 30_000.0;
const CENTER: LngLat = LngLat { lng: 13.405, lat: 52.52 };
const M_PER_DEG: f64 = 111_320.0;
/// Circle radii: 50 m plus an exponential tail of this mean, at most 1,000 m.
const RADIUS_MIN_M: f64 = 50.0;
const RADIUS_TAIL_MEAN_M: f64 = 110.0;
const RADIUS_MAX_M: f64 = 1000.0;
/// Query points keep this far (m) from the box's edge, so a 5 km search sees full density.
const QUERY_MARGIN_M: f64 = 5000.0;
const TAGS: [&str; 6] = ["store", "warehouse", "customer", "depot", "office", "site"];

/// splitmix64: deterministic, dependency-free (as geofence_bench).
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
}

struct Opts {
    store: String,
    data_dir: Option<std::path::PathBuf>,
    fences: usize,
    users: usize,
    batches: usize,
    rounds: usize,
    queries: usize,
    radii: Vec<f64>,
    seed: u64,
    limit: usize,
    api_key: Option<String>,
    export: Option<std::path::PathBuf>,
}

fn opts() -> Opts {
    let mut o = Opts {
        store: "memory".into(),
        data_dir: None,
        fences: 100_000,
        users: 8,
        batches: 20,
        rounds: 2,
        queries: 200,
        radii: vec![1000.0, 5000.0],
        seed: 47,
        limit: 10,
        api_key: None,
        export: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--store" => o.store = v(),
            "--data-dir" => o.data_dir = Some(v().into()),
            "--fences" => o.fences = v().parse().expect("--fences N"),
            "--users" => o.users = v().parse().expect("--users U"),
            "--batches" => o.batches = v().parse().expect("--batches B"),
            "--rounds" => o.rounds = v().parse().expect("--rounds R"),
            "--queries" => o.queries = v().parse().expect("--queries Q"),
            "--radii" => o.radii = v().split(',').map(|r| r.trim().parse().expect("--radii 1000,5000")).collect(),
            "--seed" => o.seed = v().parse().expect("--seed S"),
            "--limit" => o.limit = v().parse().expect("--limit L"),
            "--api-key" => o.api_key = Some(v()),
            "--export" => o.export = Some(v().into()),
            other => panic!("unknown option {other} (see the header of examples/city_bench.rs)"),
        }
    }
    o
}

/// The box for `n` fences (west, south, east, north): the full box scaled by sqrt(n / 100,000).
fn bbox(n: usize) -> (f64, f64, f64, f64) {
    let half = SIDE_M / 2.0 * (n as f64 / FULL_FENCES).sqrt().min(1.0);
    let [w, s] = offset(CENTER, -half, -half);
    let [e, n] = offset(CENTER, half, half);
    (w, s, e, n)
}

/// Meters east/north of `c` as a position (local flat approximation; fine at these sizes).
fn offset(c: LngLat, east_m: f64, north_m: f64) -> [f64; 2] {
    [c.lng + east_m / (M_PER_DEG * c.lat.to_radians().cos()), c.lat + north_m / M_PER_DEG]
}

fn uniform(rng: &mut Rng, (x0, y0, x1, y1): (f64, f64, f64, f64)) -> LngLat {
    LngLat { lng: rng.range(x0, x1), lat: rng.range(y0, y1) }
}

/// The create bodies: circles, radius 50 m + Exp(110 m) capped at 1,000 m, with metadata and a tag.
fn fence_bodies(n: usize, rng: &mut Rng) -> Vec<Value> {
    let b = bbox(n);
    (0..n)
        .map(|i| {
            let c = uniform(rng, b);
            let tail = -RADIUS_TAIL_MEAN_M * (1.0 - rng.unit()).ln();
            let r = (RADIUS_MIN_M + tail).min(RADIUS_MAX_M).round() as i64;
            let tag = TAGS[(rng.next() % TAGS.len() as u64) as usize];
            json!({"coordinates": [c.lng, c.lat], "geometry_type": "circle", "geometry_radius": r,
                   "is_enabled": true, "description": format!("customer site {i}"), "tag": tag,
                   "metadata": {"customer_id": format!("C{:06}", rng.next() % 1_000_000), "site": i,
                                "opening_hours": "07:00-19:00", "priority": rng.next() % 5}})
        })
        .collect()
}

/// A user driving through the box at a speed of its own.
struct Track {
    at: LngLat,
    heading: f64,
    speed: f64,
    t: i64,
}

impl Track {
    /// The next 100 fixes, 1 s apart, turning back at the box's edge.
    fn batch(&mut self, rng: &mut Rng, (x0, y0, x1, y1): (f64, f64, f64, f64)) -> Vec<Location> {
        (0..100)
            .map(|_| {
                self.heading += rng.range(-0.15, 0.15);
                let [lng, lat] = offset(self.at, self.speed * self.heading.sin(), self.speed * self.heading.cos());
                if lng < x0 || lng > x1 || lat < y0 || lat > y1 {
                    self.heading += std::f64::consts::PI;
                } else {
                    self.at = LngLat { lng, lat };
                }
                self.t += 1;
                let ts = chrono::DateTime::from_timestamp(self.t, 0).expect("time");
                serde_json::from_value(json!({
                    "coordinates": [self.at.lng, self.at.lat], "accuracy": 5.0, "speed": self.speed,
                    "recorded_at": ts.format("%Y-%m-%dT%H:%M:%S").to_string(),
                }))
                .expect("fix")
            })
            .collect()
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// One user's state across rounds.
struct Driver {
    id: String,
    track: Track,
    rng: Rng,
}

/// What one phase (all users of one mode sending at once) measured.
#[derive(Default)]
struct Phase {
    secs: f64,
    fixes: usize,
    batch_ms: Vec<f64>,
    unprocessed: usize,
    errors: usize,
    units: f64,
    /// Capacity units with transactions as AWS prices them (`DynamoStore::priced_capacity`).
    priced: f64,
}

async fn run_phase(store: Arc<dyn Store>, p: &Project, drivers: &mut [Driver], batches: usize, b: Bbox) -> Phase {
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, d) in drivers.iter_mut().enumerate() {
        let work: Vec<Vec<Location>> = (0..batches).map(|_| d.track.batch(&mut d.rng, b)).collect();
        let (store, p, uid) = (store.clone(), p.clone(), d.id.clone());
        set.spawn(async move {
            let mut out = (i, Vec::new(), 0, 0);
            for fixes in work {
                let t = Instant::now();
                match shared::pipeline::ingest::ingest(store.as_ref(), &p, &uid, None, fixes).await {
                    Ok(o) if o.processed => {}
                    Ok(_) => out.2 += 1,
                    Err(e) => {
                        eprintln!("ingest error: {:?} {}", e.kind, e.msg);
                        out.3 += 1
                    }
                }
                out.1.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            out
        });
    }
    let mut ph = Phase::default();
    while let Some(r) = set.join_next().await {
        let (_, ms, unprocessed, errors) = r.expect("task");
        ph.batch_ms.extend(ms);
        ph.unprocessed += unprocessed;
        ph.errors += errors;
    }
    ph.secs = t.elapsed().as_secs_f64();
    ph.fixes = drivers.len() * batches * 100;
    ph
}

type Bbox = (f64, f64, f64, f64);

/// The allocator `waymark serve` runs on (its `main.rs`), so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    local::allocator::keep_freed_memory();
    tokio::runtime::Runtime::new().expect("runtime").block_on(run());
}

async fn run() {
    let o = opts();
    let mut dynamo: Option<DynamoStore> = None;
    let (store, label): (Arc<dyn Store>, &str) = match o.store.as_str() {
        "memory" => (Arc::new(EmbeddedStore::memory().expect("store")), "embedded (memory)"),
        "file" => {
            let d = o.data_dir.clone().expect("--store file needs --data-dir");
            std::fs::create_dir_all(&d).expect("data dir");
            (Arc::new(EmbeddedStore::open(&d.join("waymark.redb")).expect("store")), "embedded (file)")
        }
        "dynamo" => {
            std::env::var("AWS_ENDPOINT_URL_DYNAMODB").expect("--store dynamo needs AWS_ENDPOINT_URL_DYNAMODB");
            let secs = std::time::SystemTime::UNIX_EPOCH.elapsed().unwrap_or_default().as_secs();
            let d = DynamoStore::from_env(TableNames::with_prefix(&format!("citybench-{secs}-"))).await;
            dynamo = Some(d.clone());
            (Arc::new(d), "DynamoDB Local")
        }
        s => panic!("--store {s}: memory, file or dynamo"),
    };
    store.ensure_tables().await.expect("tables");
    let chosen = ChosenKeys { api_key: o.api_key.clone(), ..ChosenKeys::default() };
    let issued = projects::ensure_default(store.as_ref(), None, &chosen).await.expect("project");
    let p = Project { project_id: issued.project_id, account_id: issued.account_id, kind: KeyKind::Secret };

    let mut rng = Rng(o.seed);
    let b = bbox(o.fences);
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let mut it = fence_bodies(o.fences, &mut rng).into_iter().enumerate();
    let conc = if dynamo.is_some() { 16 } else { 4 };
    let mut created = 0usize;
    // The fences in creation order (the export's rows).
    let mut fences: Vec<Option<geofences::Geofence>> = vec![None; o.fences];
    loop {
        while set.len() < conc {
            let Some((i, body)) = it.next() else { break };
            let (s, p) = (store.clone(), p.clone());
            set.spawn(async move {
                let input: CreateGeofence = serde_json::from_value(body).expect("body");
                (i, geofences::create(s.as_ref(), &p, input).await.expect("create"))
            });
        }
        match set.join_next().await {
            Some(r) => {
                let (i, g) = r.expect("task");
                fences[i] = Some(g);
            }
            None => break,
        }
        created += 1;
        if created.is_multiple_of(20_000) {
            eprintln!("  {created} fences, {:.0}/s", created as f64 / t0.elapsed().as_secs_f64());
        }
    }
    println!(
        "{}",
        json!({"kind": "insert", "store": label, "fences": o.fences, "seconds": t0.elapsed().as_secs_f64(),
               "bbox": [b.0, b.1, b.2, b.3], "seed": o.seed})
    );

    // Two sets of drivers on the same tracks (same seeds), events off and on.
    let start = chrono::Utc::now().timestamp() - (o.rounds * o.batches * 100) as i64 - 3600;
    let mut sets = Vec::new();
    for on in [false, true] {
        let mut drivers = Vec::new();
        let mut trng = Rng(o.seed ^ 0x7EAC);
        for u in 0..o.users {
            let body =
                json!({"app_type": 1, "device_token": format!("city-{on}-{u}"), "description": format!("driver {u}")});
            let user =
                users::create(store.as_ref(), &p, serde_json::from_value(body).expect("user")).await.expect("user");
            let up = json!({"user_id": user.id, "geofence_events": on});
            users::update(store.as_ref(), &p, serde_json::from_value(up).expect("update")).await.expect("update");
            let track = Track {
                at: uniform(&mut trng, b),
                heading: trng.range(0.0, std::f64::consts::TAU),
                speed: trng.range(8.0, 16.0),
                t: start,
            };
            drivers.push(Driver { id: user.id, track, rng: Rng(trng.next()) });
        }
        sets.push((on, drivers, Phase::default()));
    }
    for round in 0..o.rounds {
        for (on, drivers, total) in sets.iter_mut() {
            let u0 = dynamo.as_ref().map(DynamoStore::consumed_capacity).unwrap_or(0.0);
            let p0 = dynamo.as_ref().map(DynamoStore::priced_capacity).unwrap_or(0.0);
            let ph = run_phase(store.clone(), &p, drivers, o.batches, b).await;
            let units = dynamo.as_ref().map(DynamoStore::consumed_capacity).unwrap_or(0.0) - u0;
            let priced = dynamo.as_ref().map(DynamoStore::priced_capacity).unwrap_or(0.0) - p0;
            eprintln!(
                "round {round}, events {on}: {:.0} locations/s, {} unprocessed, {} errors",
                ph.fixes as f64 / ph.secs,
                ph.unprocessed,
                ph.errors
            );
            total.secs += ph.secs;
            total.fixes += ph.fixes;
            total.batch_ms.extend(ph.batch_ms);
            total.unprocessed += ph.unprocessed;
            total.errors += ph.errors;
            total.units += units;
            total.priced += priced;
        }
    }
    let (lo, hi) = shared::ids::all_ids();
    for (on, drivers, ph) in sets.iter_mut() {
        let mut events = 0;
        for d in drivers.iter() {
            let pk = geofences::events::user_events_pk(&p.project_id, &d.id);
            events += history_pages::count(store.as_ref(), Table::Main, &pk, &lo, &hi).await.expect("count");
        }
        ph.batch_ms.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({
                "kind": "ingest", "store": label, "geofence_events": on, "users": o.users,
                "locations": ph.fixes, "locations_per_s": ph.fixes as f64 / ph.secs,
                "batch_p50_ms": pct(&ph.batch_ms, 50.0), "batch_p99_ms": pct(&ph.batch_ms, 99.0),
                "events": events, "events_per_fix": events as f64 / ph.fixes as f64,
                "processed_false": ph.unprocessed, "errors": ph.errors,
                "capacity_units": dynamo.as_ref().map(|_| ph.units),
                "capacity_units_per_fix": dynamo.as_ref().map(|_| ph.units / ph.fixes as f64),
                "priced_units": dynamo.as_ref().map(|_| ph.priced),
            })
        );
    }
    if let (Some(_), [(_, _, off), (_, _, on)]) = (&dynamo, sets.as_slice()) {
        let mut events = 0;
        for d in &sets[1].1 {
            let pk = geofences::events::user_events_pk(&p.project_id, &d.id);
            events += history_pages::count(store.as_ref(), Table::Main, &pk, &lo, &hi).await.expect("count");
        }
        // The same tracks with and without events: the difference is what the events cost.
        println!(
            "{}",
            json!({"kind": "event_cost", "store": label, "events": events,
                   "capacity_units_per_event": (on.units - off.units) / events.max(1) as f64,
                   "priced_units_per_event": (on.priced - off.priced) / events.max(1) as f64})
        );
    }

    // Searches: the first page and `pages`, as the endpoint answers them.
    let mut qrng = Rng(o.seed ^ 0x5EED);
    let m = QUERY_MARGIN_M.min(SIDE_M / 4.0);
    let (w, s) = (offset(LngLat { lng: b.0, lat: b.1 }, m, m), offset(LngLat { lng: b.2, lat: b.3 }, -m, -m));
    let inner = (w[0], w[1], s[0], s[1]);
    let points: Vec<LngLat> = (0..o.queries).map(|_| uniform(&mut qrng, inner)).collect();
    if let Some(d) = &o.export {
        export(d, &fences, &points);
    }
    drop(fences);
    for &radius in &o.radii {
        let mut ms = Vec::new();
        let mut hits = Vec::new();
        let mut answers = o.export.as_ref().map(|d| {
            std::io::BufWriter::new(std::fs::File::create(d.join(format!("answers_{radius}.txt"))).expect("answers"))
        });
        for (i, pt) in points.iter().enumerate() {
            let t = Instant::now();
            let (page, total) = first_page(store.as_ref(), &p, *pt, radius, o.limit).await;
            std::hint::black_box(total.div_ceil(o.limit));
            if i >= 5 {
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            hits.push(total as f64);
            if let Some(f) = answers.as_mut() {
                let list: Vec<String> = page.iter().map(|h| format!("{}:{:.3}", h.id, h.distance_m)).collect();
                writeln!(f, "{i} {total} {}", list.join(" ")).expect("answers");
            }
        }
        ms.sort_by(f64::total_cmp);
        hits.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({"kind": "search", "store": label, "radius_m": radius, "queries": points.len(), "limit": o.limit,
                   "p50_ms": pct(&ms, 50.0), "p99_ms": pct(&ms, 99.0), "found_p50": pct(&hits, 50.0)})
        );
    }
}

/// The first page of a search (`limit` fences, each rendered as the endpoint shows it) and how
/// many were found (for `pages`).
async fn first_page(
    store: &dyn Store,
    p: &Project,
    at: LngLat,
    radius: f64,
    limit: usize,
) -> (Vec<geofences::Hit>, usize) {
    let (page, total) = geofences::search_page(store, p, at, radius, 1, limit).await.expect("search");
    std::hint::black_box(page.iter().map(|h| h.view().expect("view").size_hint()).sum::<usize>());
    (page, total)
}

/// The fences (creation order) and query points as CSV for PostGIS (geofences_pg.sql's columns).
fn export(d: &std::path::Path, fences: &[Option<geofences::Geofence>], points: &[LngLat]) {
    std::fs::create_dir_all(d).expect("export dir");
    let file = |name: &str| std::io::BufWriter::new(std::fs::File::create(d.join(name)).expect(name));
    let mut f = file("fences.csv");
    writeln!(f, "id,kind,lng,lat,radius_m,wkt").expect("fences.csv");
    for g in fences.iter().flatten() {
        let (c, r) = (g.center, g.radius_m.unwrap_or(0));
        writeln!(f, "{},circle,{:.9},{:.9},{r},\"\"", g.id, c.lng, c.lat).expect("fences.csv");
    }
    let (mut q, mut t) = (file("queries.csv"), file("queries.txt"));
    writeln!(q, "qid,lng,lat").expect("queries.csv");
    for (i, pt) in points.iter().enumerate() {
        writeln!(q, "{i},{:.9},{:.9}", pt.lng, pt.lat).expect("queries.csv");
        writeln!(t, "{:.9},{:.9}", pt.lat, pt.lng).expect("queries.txt");
    }
}
