//! Fault injection: `waymark serve` on a file store, and on DynamoDB Local, is killed with SIGKILL
//! while users send location batches; every batch is re-sent until acknowledged (as an SDK does). The geofence
//! events must come out exactly once (same as a run without kills) and every one of them must
//! reach the webhook receiver with a valid Standard Webhooks signature.
//!
//! Then the last kill leaves what a request cut off while storing leaves, for two users whose
//! clients die with it: one batch wholly in the log and one in part, both marked `stored: false`.
//! The restart must derive the whole one within seconds ([`DERIVED_WITHIN`]: the store is the
//! server's alone, so no request is alive) and hold the partial one until its client re-sends it.
//!
//! Duplicate deliveries are counted per 1,000 events and sorted out against the delivery log: an
//! attempt the log does not record, followed by a kill before the next, is inherent (the receiver
//! answered, the process died before writing it down); anything else sent twice is a bug.
//! `WAYMARK_FAULT_RUNS=n` repeats the run n times and sums the figures.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderMap;
use chrono::{NaiveDateTime, TimeDelta};
use rand::Rng;
use serde_json::{Value, json};

const API_KEY: &str = "wm_sk_fault_test_key_0123456789";
const PUB_KEY: &str = "wm_pk_fault_test_key_0123456789";
const TOKEN: &str = "wm_at_fault_test_token_0123456789";
const DAY: &str = "start_date=2024-05-01&end_date=2024-05-02";
const USERS: usize = 4;
const BATCHES: usize = 15;
const FENCES: usize = 3;
const ORIGIN: (f64, f64) = (13.40, 52.52);
/// How soon after a restart a batch left wholly stored (151 fixes, 6 events) must be derived and
/// listed: on the file store, and on DynamoDB Local, whose every write is a call to a JVM on the
/// same cores (measured at load 8: file store at most 1.0 s, DynamoDB Local at most 3.4 s; the
/// hold it replaces is 60 s).
const DERIVED_WITHIN: Duration = Duration::from_secs(5);
const DERIVED_WITHIN_DYNAMODB: Duration = Duration::from_secs(10);

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Where a killed server keeps its data.
enum Backend {
    /// The embedded store in a file under this folder.
    File(PathBuf),
    /// DynamoDB Local (`AWS_ENDPOINT_URL_DYNAMODB`), tables with this name prefix; the folder
    /// holds only `default-project.json`.
    Dynamo(String, PathBuf),
}

/// Start `waymark serve` (on `backend`, or in memory) on `port` and wait until it listens.
fn serve(backend: Option<&Backend>, port: u16) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_waymark"));
    cmd.args(["serve", "--port", &port.to_string()]);
    match backend {
        Some(Backend::File(d)) => {
            cmd.arg("--data-dir").arg(d).env_remove("AWS_ENDPOINT_URL_DYNAMODB");
        }
        Some(Backend::Dynamo(prefix, d)) => {
            cmd.arg("--dynamodb")
                .arg("--data-dir")
                .arg(d)
                .env("WAYMARK_MAIN_TABLE", format!("{prefix}main"))
                .env("WAYMARK_LOCATIONS_TABLE", format!("{prefix}locations"));
        }
        None => {
            cmd.arg("--memory").env_remove("AWS_ENDPOINT_URL_DYNAMODB");
        }
    };
    cmd.env("WAYMARK_API_KEY", API_KEY)
        .env("WAYMARK_PUBLISHABLE_KEY", PUB_KEY)
        .env("WAYMARK_ACCESS_TOKEN", TOKEN)
        .env("WAYMARK_WEBHOOK_ALLOW_PRIVATE", "1")
        .env("WAYMARK_WEBHOOK_RETRY_SCHEDULE", "0.2,0.2,0.5,1,1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut child = cmd.spawn().expect("waymark starts");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut printed = String::new();
        let mut ok = true;
        while !printed.trim_end().ends_with('}') {
            if out.read_line(&mut printed).unwrap_or(0) == 0 {
                ok = false;
                break;
            }
        }
        if ok {
            // Keep draining stdout so the server never writes into a closed pipe.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while out.read_line(&mut sink).unwrap_or(0) > 0 {
                    sink.clear();
                }
            });
            return Server { child };
        }
        // The port may still be held for a moment after a kill: try again.
        let _ = child.kill();
        let _ = child.wait();
        assert!(Instant::now() < deadline, "serve did not start: {printed}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A minimal HTTP/1.1 client; `None` when the connection fails or the answer is cut off.
fn try_http(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nApi-Key: {API_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status = raw.get(9..12)?.parse().ok()?;
    let json = raw.split("\r\n\r\n").nth(1)?;
    Some((status, serde_json::from_str(json).ok()?))
}

fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let body = body.map(|b| b.to_string());
    let (status, res) = try_http(port, method, path, body.as_deref()).expect("answer");
    assert!((200..300).contains(&status), "{method} {path}: {status} {res}");
    res
}

/// `p` moved `dx` east and `dy` north meters.
fn offset(p: (f64, f64), dx: f64, dy: f64) -> (f64, f64) {
    let lat = p.1 + dy / 111_320.0;
    let lng = p.0 + dx / (111_320.0 * p.1.to_radians().cos());
    (lng, lat)
}

fn ts(s: i64) -> String {
    let t0 = NaiveDateTime::parse_from_str("2024-05-01T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap();
    (t0 + TimeDelta::seconds(s)).format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
}

/// Each user's trace split into batches: walk east at 5 m/s through the three fences (1 km
/// apart, radius 200 m: about 80 s inside each, so no dwell), a fix every 5 s.
fn batches(user: usize) -> Vec<Value> {
    let dy = [0.0, 60.0, -60.0, 120.0][user];
    let start = user as i64 * 37;
    let fixes: Vec<Value> = (0..=150)
        .map(|i| {
            let p = offset(ORIGIN, -500.0 + 5.0 * 5.0 * i as f64, dy);
            json!({"coordinates": [p.0, p.1], "recorded_at": ts(start + 5 * i), "accuracy": 5.0})
        })
        .collect();
    let size = fixes.len().div_ceil(BATCHES);
    fixes.chunks(size).map(|c| Value::from(c.to_vec())).collect()
}

/// The webhook made by [`setup`]: its id and signing secret.
struct Hook {
    id: String,
    secret: String,
}

/// Create the fences, webhook (when a receiver is given) and users; return fence ids and users.
fn setup(port: u16, receiver: Option<u16>) -> (Vec<String>, Vec<String>, Option<Hook>) {
    let fences = (0..FENCES)
        .map(|i| {
            let c = offset(ORIGIN, 1000.0 * i as f64, 0.0);
            let body = json!({"geometry_type": "circle", "coordinates": [c.0, c.1], "geometry_radius": 200,
                "is_enabled": true, "description": format!("fence {i}")});
            let d = &http(port, "POST", "/v1/api/geofence/", Some(&body))["data"];
            d["id"].as_str().or_else(|| d["geofence_id"].as_str()).expect("fence id").to_owned()
        })
        .collect();
    let hook = receiver.map(|r| {
        let body = json!({"url": format!("http://127.0.0.1:{r}/hook"), "events": ["geofence.entry", "geofence.exit"]});
        let res = http(port, "POST", "/v1/api/webhooks/", Some(&body));
        let d = &res["data"];
        let id = d["webhook_id"].as_str().or_else(|| d["id"].as_str()).unwrap_or_else(|| panic!("{res}"));
        Hook { id: id.to_owned(), secret: d["secret"].as_str().unwrap_or_else(|| panic!("{res}")).to_owned() }
    });
    (fences, (0..USERS).map(|_| new_user(port)).collect(), hook)
}

/// A user with geofence events on.
fn new_user(port: u16) -> String {
    let res = http(port, "POST", "/v1/api/user/", Some(&json!({"app_type": 1, "device_token": "t"})));
    let u = res["data"]["user_id"].as_str().unwrap_or_else(|| panic!("{res}")).to_owned();
    http(port, "PUT", "/v1/api/user/", Some(&json!({"user_id": u, "geofence_events": true})));
    u
}

/// Every delivery in the webhook's log: event id and its attempts the receiver answered with a
/// 2xx; `None` when the server does not answer.
fn recorded_successes(port: u16, webhook: &str) -> Option<HashMap<String, usize>> {
    let mut out = HashMap::new();
    for page in 1.. {
        let uri = format!("/v1/api/webhooks/deliveries/?webhook_id={webhook}&page_number={page}");
        let (status, res) = try_http(port, "GET", &uri, None)?;
        if status != 200 {
            return None;
        }
        let items = res["data"]["deliveries"].as_array()?;
        if items.is_empty() {
            break;
        }
        for d in items {
            let ok = d["attempts"]
                .as_array()?
                .iter()
                .filter(|a| a["status_code"].as_u64().is_some_and(|s| (200..300).contains(&s)))
                .count();
            out.insert(d["event_id"].as_str()?.to_owned(), ok);
        }
        if res["data"]["next_page"].is_null() {
            break;
        }
    }
    Some(out)
}

/// Every event of `user` (all pages), or `None` when the server does not answer.
fn events(port: u16, user: &str) -> Option<Vec<Value>> {
    let mut out = Vec::new();
    for page in 1.. {
        let uri = format!("/v1/api/event/?{DAY}&user_id={user}&page_number={page}");
        let (status, res) = try_http(port, "GET", &uri, None)?;
        if status != 200 {
            return None;
        }
        let items = res["data"]["events"].as_array()?.clone();
        if items.is_empty() {
            break;
        }
        out.extend(items);
    }
    Some(out)
}

/// (type, fence index, recorded_at), sorted: comparable across servers.
fn summary(events: &[Value], fences: &[String]) -> Vec<(String, usize, String)> {
    let mut s: Vec<_> = events
        .iter()
        .map(|e| {
            let f = e["geofence_id"].as_str().unwrap();
            let idx = fences.iter().position(|x| x == f).unwrap_or(usize::MAX);
            (e["event_type"].as_str().unwrap().to_owned(), idx, e["recorded_at"].as_str().unwrap().to_owned())
        })
        .collect();
    s.sort();
    s
}

#[derive(Default)]
struct Received {
    /// Each request's `webhook-id` and when it came.
    ids: Vec<(String, Instant)>,
    bad_signatures: usize,
}

/// A webhook receiver on 127.0.0.1:0 that answers 200, records `webhook-id`s and verifies
/// signatures once the secret is known.
fn receiver(rt: &tokio::runtime::Runtime, secret: Arc<Mutex<Option<String>>>, got: Arc<Mutex<Received>>) -> u16 {
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let secret = secret.clone();
        let got = got.clone();
        async move {
            let ok =
                secret.lock().unwrap().as_deref().is_some_and(|s| {
                    standardwebhooks::Webhook::new(s).is_ok_and(|w| w.verify(&body, &headers).is_ok())
                });
            let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            let mut g = got.lock().unwrap();
            g.ids.push((id, Instant::now()));
            if !ok {
                g.bad_signatures += 1;
            }
            "ok"
        }
    });
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

fn temp_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    std::env::temp_dir().join(format!("waymark-fault-{}-{nanos}", std::process::id()))
}

/// What one killed run measured.
#[derive(Default)]
struct Figures {
    kills: usize,
    events: usize,
    deliveries: usize,
    /// Deliveries beyond the first of an event, and those of them the kills explain.
    duplicates: usize,
    inherent: usize,
    /// Longest time from a delivery the log missed to the kill after it.
    window: Duration,
    /// Per run, from the restart until the batch left wholly stored was derived.
    derived_after: Vec<Duration>,
}

impl Figures {
    fn add(&mut self, f: Figures) {
        self.kills += f.kills;
        self.events += f.events;
        self.deliveries += f.deliveries;
        self.duplicates += f.duplicates;
        self.inherent += f.inherent;
        self.window = self.window.max(f.window);
        self.derived_after.extend(f.derived_after);
    }

    fn print(&self, label: &str) {
        println!(
            "{label}: {} kill rounds, {} events, {} deliveries, {} duplicate ({:.1} per 1,000 events), {} of them inherent \
             (delivered, then the process killed before the log had it: at most {} ms before its kill)",
            self.kills,
            self.events,
            self.deliveries,
            self.duplicates,
            self.duplicates as f64 * 1000.0 / self.events.max(1) as f64,
            self.inherent,
            self.window.as_millis()
        );
        let s: Vec<String> = self.derived_after.iter().map(|d| format!("{:.2}", d.as_secs_f64())).collect();
        println!("{label}: batch left wholly stored, derived after the restart in (s): {}", s.join(", "));
    }
}

/// Run the killed run `WAYMARK_FAULT_RUNS` times (default once) on fresh stores.
fn repeat(fresh: impl Fn() -> (Backend, PathBuf)) {
    let runs = std::env::var("WAYMARK_FAULT_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1usize).max(1);
    let mut total = Figures::default();
    for _ in 0..runs {
        let (backend, dir) = fresh();
        total.add(kill_9_run(&backend));
        let _ = std::fs::remove_dir_all(&dir);
    }
    total.print(&format!("{runs} run(s)"));
}

#[test]
fn events_survive_kill_9_exactly_once_and_are_all_delivered_file_store() {
    repeat(|| {
        let dir = temp_dir();
        (Backend::File(dir.clone()), dir)
    });
}

#[test]
fn events_survive_kill_9_exactly_once_and_are_all_delivered_dynamodb() {
    assert!(
        std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some(),
        "AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with scripts/test.sh, which starts DynamoDB Local"
    );
    repeat(|| {
        let dir = temp_dir();
        let prefix = format!("fault-{}-{}-", std::process::id(), rand::rng().random_range(0..u32::MAX));
        (Backend::Dynamo(prefix, dir.clone()), dir)
    });
}

/// Every fix of user `user`'s trace, as one batch.
fn all_fixes(user: usize) -> Vec<Value> {
    batches(user).iter().flat_map(|b| b.as_array().unwrap().clone()).collect()
}

/// What requests cut off by a kill leave in the (stopped) server's store when they had stored
/// their fixes but not yet said so: each batch's mark, still `stored: false`, written just now,
/// and its fixes: all of them, or when `in_part` every other one (DynamoDB writes a batch's fixes
/// in parallel calls, so a kill leaves any subset).
async fn leave_cut_off_batches(backend: &Backend, batches: &[(&str, Vec<Value>, bool)]) {
    use shared::domain::locations::{self, Location};
    use shared::store::{DynamoStore, EmbeddedStore, Store, TableNames};
    let (Backend::File(dir) | Backend::Dynamo(_, dir)) = backend;
    let project: Value = serde_json::from_slice(&std::fs::read(dir.join("default-project.json")).unwrap()).unwrap();
    let p = shared::project::Project {
        project_id: project["project_id"].as_str().unwrap().to_owned(),
        account_id: project["account_id"].as_str().unwrap().to_owned(),
        kind: shared::project::KeyKind::Secret,
    };
    let store: Box<dyn Store> = match backend {
        Backend::File(d) => Box::new(EmbeddedStore::open(&d.join("waymark.redb")).unwrap()),
        Backend::Dynamo(prefix, _) => Box::new(DynamoStore::from_env(TableNames::with_prefix(prefix)).await),
    };
    for (user, fixes, in_part) in batches {
        let fixes: Vec<Location> = fixes.iter().map(|f| serde_json::from_value(f.clone()).unwrap()).collect();
        let prepared = locations::prepare(&p, user, fixes);
        let now = shared::time::Timestamp::now();
        shared::pipeline::marks::write_mark(store.as_ref(), &p, user, &prepared, false, now).await.unwrap();
        let kept = if *in_part { prepared.into_iter().step_by(2).collect() } else { prepared };
        locations::store_prepared(store.as_ref(), &p, user, kept).await.unwrap();
    }
}

fn kill_9_run(backend: &Backend) -> Figures {
    let started = Instant::now();
    let traces: Vec<Vec<Value>> = (0..USERS).map(batches).collect();

    // Ground truth: the same batches, in order, against a memory server that is never killed.
    let mut truth: Vec<Vec<(String, usize, String)>> = {
        let port = free_port();
        let _server = serve(None, port);
        let (fences, users, _) = setup(port, None);
        for (u, trace) in users.iter().zip(&traces) {
            for b in trace {
                http(port, "POST", "/v1/api/location/", Some(&json!({"user_id": u, "locations": b})));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut last = Vec::new();
        loop {
            let now: Vec<_> = users.iter().map(|u| summary(&events(port, u).unwrap(), &fences)).collect();
            // Settled when two reads 1 s apart agree and every user has events.
            if now == last && now.iter().all(|e| !e.is_empty()) {
                break now;
            }
            assert!(Instant::now() < deadline, "ground truth did not settle: {now:?}");
            last = now;
            std::thread::sleep(Duration::from_secs(1));
        }
    };

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let secret = Arc::new(Mutex::new(None));
    let got = Arc::new(Mutex::new(Received::default()));
    let hook_port = receiver(&rt, secret.clone(), got.clone());

    let port = free_port();
    let mut server = serve(Some(backend), port);
    let (fences, mut users, hook) = setup(port, Some(hook_port));
    let hook = hook.expect("a webhook");
    *secret.lock().unwrap() = Some(hook.secret.clone());

    // One sender per user, each batch re-sent until a 2xx answers it.
    let in_flight: Arc<Vec<AtomicBool>> = Arc::new((0..USERS).map(|_| AtomicBool::new(false)).collect());
    let resends = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = users
        .iter()
        .cloned()
        .zip(traces.clone())
        .enumerate()
        .map(|(i, (user, trace))| {
            let (in_flight, resends, done) = (in_flight.clone(), resends.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                for b in trace {
                    let body = json!({"user_id": user, "locations": b}).to_string();
                    let mut first = true;
                    loop {
                        if !first {
                            resends.fetch_add(1, Ordering::Relaxed);
                        }
                        first = false;
                        in_flight[i].store(true, Ordering::SeqCst);
                        let r = try_http(port, "POST", "/v1/api/location/", Some(&body));
                        in_flight[i].store(false, Ordering::SeqCst);
                        if r.is_some_and(|(s, _)| (200..300).contains(&s)) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    std::thread::sleep(Duration::from_millis(rng.random_range(100..400)));
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();

    // Kill -9 at random moments while the senders run; restart on the same data dir and port.
    // Each kill's moment is when the process was gone (its `wait` returned).
    let mut rng = rand::rng();
    let rounds = rng.random_range(3..=5);
    let (mut at_kill, mut kills) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1200)));
        if done.load(Ordering::SeqCst) == USERS {
            break;
        }
        // Prefer a moment with a request outstanding (a kill mid-batch), waiting at most 300 ms.
        let aim = Instant::now() + Duration::from_millis(300);
        let in_flight_now = || in_flight.iter().filter(|f| f.load(Ordering::SeqCst)).count();
        while in_flight_now() == 0 && Instant::now() < aim {
            std::thread::yield_now();
        }
        let flying = in_flight_now();
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        kills.push(Instant::now());
        at_kill.push(flying);
        std::thread::sleep(Duration::from_millis(rng.random_range(0..300)));
        server = serve(Some(backend), port);
    }
    for s in senders {
        s.join().unwrap();
    }
    assert!(!at_kill.is_empty(), "no kill happened");

    // The last kill cuts off two requests of users whose clients die with it: one had stored
    // its whole batch, the other part of it. The restart knows no request is alive: it derives
    // the whole batch at once, and holds the partial one for its re-send (derived now, the
    // re-sent rest would come late and fire no geofence events).
    let (whole, part) = (new_user(port), new_user(port));
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    kills.push(Instant::now());
    rt.block_on(leave_cut_off_batches(backend, &[(&whole, all_fixes(0), false), (&part, all_fixes(1), true)]));
    server = serve(Some(backend), port);
    let restarted = Instant::now();
    let derived_after = loop {
        if events(port, &whole).is_some_and(|e| summary(&e, &fences) == truth[0]) {
            break restarted.elapsed();
        }
        let waited = restarted.elapsed();
        assert!(
            waited < Duration::from_secs(90),
            "a batch left wholly stored not derived {waited:?} after the restart"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    println!("batch left wholly stored: derived {:.2} s after the restart", derived_after.as_secs_f64());
    // A sweep or two later, the partial one is still held.
    std::thread::sleep((restarted + Duration::from_secs(3)).saturating_duration_since(Instant::now()));
    let early = events(port, &part).expect("events");
    assert!(early.is_empty(), "a batch stored in part was derived before its re-send: {early:?}");
    http(port, "POST", "/v1/api/location/", Some(&json!({"user_id": part, "locations": all_fixes(1)})));
    let within = if matches!(backend, Backend::File(_)) { DERIVED_WITHIN } else { DERIVED_WITHIN_DYNAMODB };
    assert!(
        derived_after <= within,
        "a batch left wholly stored was derived {derived_after:?} after the restart (at most {within:?})"
    );
    users.extend([whole, part]);
    truth.extend([truth[0].clone(), truth[1].clone()]);
    let expected: usize = truth.iter().map(Vec::len).sum();

    // Every user's events equal the ground truth, and every event reaches the receiver, as the
    // delivery log records.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (present, ids, recorded) = loop {
        let now: Option<Vec<Vec<Value>>> = users.iter().map(|u| events(port, u)).collect();
        if let (Some(now), Some(recorded)) = (now, recorded_successes(port, &hook.id)) {
            let ids: Vec<String> = now.iter().flatten().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
            let delivered: HashSet<String> = got.lock().unwrap().ids.iter().map(|(id, _)| id.clone()).collect();
            let same = now.iter().zip(&truth).all(|(e, t)| summary(e, &fences) == *t);
            let done = |id: &String| delivered.contains(id) && recorded.get(id).is_some_and(|n| *n > 0);
            if same && ids.iter().all(done) {
                break (now, ids, recorded);
            }
            if Instant::now() > deadline {
                for (u, (e, t)) in now.iter().zip(&truth).enumerate() {
                    assert_eq!(summary(e, &fences), *t, "user {u}: events differ from the run without kills");
                }
                let missing: Vec<_> = ids.iter().filter(|id| !done(id)).collect();
                panic!("events never delivered, or not as the log says: {missing:?}; log: {recorded:?}");
            }
        }
        assert!(Instant::now() < deadline, "events API did not answer");
        std::thread::sleep(Duration::from_millis(500));
    };
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicate event ids: {ids:?}");

    let got = got.lock().unwrap();
    assert_eq!(got.bad_signatures, 0, "signatures that did not verify");
    let mut per_id: BTreeMap<&str, Vec<Instant>> = BTreeMap::new();
    for (id, at) in &got.ids {
        per_id.entry(id).or_default().push(*at);
    }
    let event_ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let unknown: Vec<&&str> = per_id.keys().filter(|id| !event_ids.contains(**id)).collect();
    assert!(unknown.is_empty(), "deliveries of ids the events API does not know: {unknown:?}");
    // A delivery the log does not record as a success is one whose process died before writing
    // it down: a kill must lie between it and the next delivery of the same event (250 ms before
    // it too: the receiver may handle a request after its sender died). The recorded success is
    // the last; a second one would be a re-send of what the log knew delivered.
    let (mut duplicates, mut inherent, mut window, mut unexplained) = (0, 0, Duration::ZERO, Vec::new());
    for (id, times) in &per_id {
        duplicates += times.len() - 1;
        let ok = recorded[*id];
        if ok > 1 {
            unexplained.push(format!("{id}: {ok} successes in the log"));
        }
        for (i, at) in times.iter().enumerate().take(times.len().saturating_sub(ok)) {
            let next = times[i + 1];
            match kills.iter().find(|k| **k + Duration::from_millis(250) >= *at && **k <= next) {
                Some(k) => {
                    inherent += 1;
                    window = window.max(k.saturating_duration_since(*at));
                }
                None => unexplained.push(format!("{id}: sent again {:?} later, no kill between", next - *at)),
            }
        }
    }
    let present_n: usize = present.iter().map(Vec::len).sum();
    let f = Figures {
        kills: kills.len(),
        events: expected,
        deliveries: got.ids.len(),
        duplicates,
        inherent,
        window,
        derived_after: vec![derived_after],
    };
    println!("backend: {}", if matches!(backend, Backend::File(_)) { "file store" } else { "DynamoDB Local" });
    println!("batches in flight at each random kill: {at_kill:?}; batch re-sends: {}", resends.load(Ordering::Relaxed));
    println!("events expected: {expected}, present: {present_n}, delivered (unique): {}", per_id.len());
    f.print("this run");
    println!("elapsed: {:.1} s", started.elapsed().as_secs_f64());
    assert!(unexplained.is_empty(), "duplicate deliveries no kill explains: {unexplained:?}");
    assert_eq!(duplicates, inherent, "every duplicate is explained");
    // Each user's deliveries go one at a time, so a kill cuts off at most one per user.
    assert!(inherent <= kills.len() * users.len(), "{inherent} deliveries cut off by {} kills", kills.len());
    drop(server);
    f
}
