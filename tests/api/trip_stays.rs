//! STOP segments on generated phone days (issue 59, item 5): a person walks and rides between
//! places and stays 5–30 minutes at each, sampled as phones sample (every 1–60 s, gaps of 1–5
//! minutes while standing, correlated jitter of 5–40 m, now and then a fix 100–300 m off during
//! a stay, accuracy reported honestly or optimistically). Each day is one trip; its summary's
//! route must have a STOP segment overlapping every stay of 5 minutes or more, within 60 m of it,
//! and no STOP segment away from where someone stood 3 minutes or more.
//!
//! `STAY_DAYS=64 cargo test -p waymark-tests --test api phone_days -- --skip dynamodb --nocapture`
//! runs more days (default 24) and prints each miss; `STAY_STRICT=1` holds the target (no miss,
//! no phantom), which the stop rule does not meet yet; `STAY_DEBUG='<label>'` prints that day's route.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp};
use crate::trace::{Rng, geodesic, offset};

/// Beijing, where GeoLife's phones were.
const BASE: (f64, f64) = (116.3200, 39.9800);
/// A stay at least this long must have a STOP segment (seconds).
const REQUIRED_S: i64 = 300;
/// A STOP segment must overlap a stay at least this long (seconds).
const ALLOWED_S: i64 = 180;
/// How far a STOP segment's mean position may lie from the place (meters).
const NEAR_M: f64 = 60.0;

/// Someone standing still: seconds from the day's start, and where (meters from BASE).
#[derive(Debug, Clone)]
struct Still {
    from: i64,
    to: i64,
    at: (f64, f64),
    /// The jitter (reported-honest accuracy, meters) while there.
    jitter: f64,
}

struct Day {
    fixes: Vec<Value>,
    stills: Vec<Still>,
    seconds: i64,
    label: String,
}

/// Per-axis Gauss–Markov error (correlated over `tau` seconds), stepped once a second.
struct Markov {
    x: f64,
    tau: f64,
}

impl Markov {
    fn step(&mut self, rng: &mut Rng, sigma: f64) -> f64 {
        let a = (-1.0 / self.tau).exp();
        self.x = a * self.x + (1.0 - a * a).sqrt() * sigma * rng.normal();
        self.x
    }
}

/// The true state of each second: position, jitter (honest accuracy), and whether standing.
struct Second {
    pos: (f64, f64),
    jitter: f64,
    still: bool,
}

fn day(seed: u64) -> Day {
    let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let every = [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0][(rng.uniform() * 7.0) as usize];
    let optimistic = rng.uniform() < 0.5;
    let factor = if optimistic { 0.3 + 0.4 * rng.uniform() } else { 1.0 };
    let sleeps = rng.uniform() < 0.6; // whether the phone pauses fixes while standing
    let label = format!(
        "{seed}: every {every} s, {}, {}",
        if optimistic { "optimistic" } else { "honest" },
        if sleeps { "gaps" } else { "no gaps" }
    );

    let mut secs: Vec<Second> = Vec::new();
    let mut stills = Vec::new();
    let mut pos = (0.0, 0.0);
    let places = 5 + (rng.uniform() * 3.0) as usize;
    for p in 0..places {
        // A stay: 5-30 min (one in five 3-5 min, neither required nor a phantom).
        let len = if rng.uniform() < 0.2 {
            180 + (rng.uniform() * 120.0) as i64
        } else {
            300 + (rng.uniform() * 1500.0) as i64
        };
        let jitter = 5.0 + rng.uniform() * 35.0;
        let from = secs.len() as i64;
        // Standing or moving about a room: a few meters around the place.
        let (mut wx, mut wy) = (0.0f64, 0.0f64);
        for _ in 0..len {
            wx = (wx + 0.3 * rng.normal()).clamp(-4.0, 4.0);
            wy = (wy + 0.3 * rng.normal()).clamp(-4.0, 4.0);
            secs.push(Second { pos: (pos.0 + wx, pos.1 + wy), jitter, still: true });
        }
        stills.push(Still { from, to: secs.len() as i64 - 1, at: pos, jitter });
        if p + 1 == places {
            break;
        }
        // Then walk (1.0-1.6 m/s) or ride (4-12 m/s) 1-3 legs, now and then halting up to 60 s (a light:
        // with the approach and departure inside the radius, longer halts are 2-minute stops by rule).
        let ride = rng.uniform() < 0.5;
        let speed = if ride { 4.0 + 8.0 * rng.uniform() } else { 1.0 + 0.6 * rng.uniform() };
        let jitter = 5.0 + rng.uniform() * 10.0;
        for _ in 0..1 + (rng.uniform() * 3.0) as usize {
            let heading = rng.uniform() * std::f64::consts::TAU;
            let length = if ride { 800.0 + 3000.0 * rng.uniform() } else { 250.0 + 900.0 * rng.uniform() };
            let steps = (length / speed) as usize;
            for _ in 0..steps {
                pos = (pos.0 + speed * heading.cos(), pos.1 + speed * heading.sin());
                secs.push(Second { pos, jitter, still: false });
            }
            if rng.uniform() < 0.5 {
                for _ in 0..20 + (rng.uniform() * 40.0) as usize {
                    secs.push(Second { pos, jitter, still: true });
                }
            }
        }
    }

    // Sample it as a phone does.
    let t0 = DateTime::from_timestamp((Utc::now() - Duration::hours(5)).timestamp(), 0).unwrap();
    let (mut ex, mut ey) = (Markov { x: 0.0, tau: 30.0 }, Markov { x: 0.0, tau: 30.0 });
    let mut fixes = Vec::new();
    let mut next = 0i64;
    let mut awake_until = i64::MAX;
    let mut asleep = false;
    for (k, s) in secs.iter().enumerate() {
        let k = k as i64;
        let sigma = s.jitter / 1.5;
        let (dx, dy) = (ex.step(&mut rng, sigma), ey.step(&mut rng, sigma));
        // Motion wakes a sleeping phone.
        if k < next && (!asleep || s.still) {
            continue;
        }
        asleep = false;
        next = k + (every * (0.7 + 0.6 * rng.uniform())).round().max(1.0) as i64;
        if sleeps && s.still {
            // Standing, the phone goes quiet for 1-5 min after a while awake.
            if awake_until == i64::MAX {
                awake_until = k + (rng.uniform() * 180.0) as i64;
            }
            if k >= awake_until {
                next = k + 60 + (rng.uniform() * 240.0) as i64;
                asleep = true;
                awake_until = next + (rng.uniform() * 180.0) as i64;
            }
        } else {
            awake_until = i64::MAX;
        }
        let honest = (s.jitter + 2.0 * rng.normal().abs()).round();
        let (mut p, mut accuracy) = ((s.pos.0 + dx, s.pos.1 + dy), (honest * factor).round().max(3.0));
        // During a stay, about one fix in 40 (at least 30 s into it) is 100-300 m off.
        if s.still && rng.uniform() < 0.025 && k > 30 && secs[(k - 30) as usize].still {
            let (dir, far) = (rng.uniform() * std::f64::consts::TAU, 100.0 + 200.0 * rng.uniform());
            p = (s.pos.0 + far * dir.cos(), s.pos.1 + far * dir.sin());
            if !optimistic && rng.uniform() < 0.5 {
                accuracy = far.round();
            }
        }
        let (lng, lat) = offset(BASE.0, BASE.1, p.0, p.1);
        fixes.push(json!({
            "coordinates": [lng, lat],
            "recorded_at": (t0 + Duration::seconds(k)).format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
            "accuracy": accuracy,
            "altitude": 50.0,
        }));
    }
    Day { fixes, stills, seconds: secs.len() as i64, label }
}

/// A time as sent or answered (with or without its `Z`).
fn utc(at: &str) -> DateTime<Utc> {
    chrono::NaiveDateTime::parse_from_str(at.trim_end_matches('Z'), "%Y-%m-%dT%H:%M:%S%.f").unwrap().and_utc()
}

async fn control(app: &TestApp, trip: &str, action: &str, field: &str, at: &str) {
    let body = json!({"trip_id": trip, "action": action, field: at});
    let (status, res) = app.call("POST", "/v3/api/trips/controls/", Key::Secret, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{action}: {res}");
}

/// STOP segments of a day's trip: (first, last second from the day's start, mean position).
async fn stop_segments(app: &TestApp, d: &Day) -> Vec<(i64, i64, (f64, f64))> {
    let user = app.create_user(json!({})).await;
    let (_, res) = app.post("/v3/api/trips/", &json!({"user_id": user})).await;
    let trip = res["data"][0]["id"].as_str().unwrap().to_owned();
    let first = d.fixes[0]["recorded_at"].as_str().unwrap();
    let t0 = utc(first);
    control(app, &trip, "start", "started_at", first).await;
    for chunk in d.fixes.chunks(500) {
        let body = json!({"user_id": user, "locations": chunk});
        let (status, res) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
    }
    let end = (t0 + Duration::seconds(d.seconds)).format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
    control(app, &trip, "end", "ended_at", &end).await;
    let (status, res) = app.get(&format!("/v1/api/trips/summary/?trip_id={trip}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let route = res["data"]["route"].as_array().unwrap().clone();
    let second = |p: &Value| (utc(p["recorded_at"].as_str().unwrap()) - t0).num_seconds();
    if std::env::var("STAY_DEBUG").is_ok_and(|v| v == d.label) {
        let m = |c: &Value, k: usize, base: f64, per: f64| (c[k].as_f64().unwrap() - base) * per;
        for p in &route {
            let c = &p["coordinates"]["coordinates"];
            let (x, y) = (m(c, 0, BASE.0, 111_320.0 * BASE.1.to_radians().cos()), m(c, 1, BASE.1, 111_320.0));
            println!("{} {x:.0} {y:.0} {} {}", second(p), p["accuracy"], p["activity"]);
        }
        for e in res["data"]["excluded_points"].as_array().unwrap() {
            println!("excluded {} {}", second(e), e);
        }
    }
    let mut out = Vec::new();
    for seg in res["data"]["route_indexes"].as_array().unwrap() {
        let seg = seg.as_array().unwrap();
        let (a, b) = (seg[0].as_u64().unwrap() as usize - 1, seg[seg.len() - 1].as_u64().unwrap() as usize - 1);
        if route[a]["activity"] != "STOP" {
            continue;
        }
        let pts = &route[a..=b];
        let n = pts.len() as f64;
        let sum = pts.iter().fold((0.0, 0.0), |acc, p| {
            let c = &p["coordinates"]["coordinates"];
            (acc.0 + c[0].as_f64().unwrap(), acc.1 + c[1].as_f64().unwrap())
        });
        out.push((second(&route[a]), second(&route[b]), (sum.0 / n, sum.1 / n)));
    }
    out
}

both!(stop_segments_cover_every_stay_of_five_minutes_on_phone_days, |app| async move {
    let days: u64 = std::env::var("STAY_DAYS").ok().and_then(|s| s.parse().ok()).unwrap_or(24);
    let from: u64 = std::env::var("STAY_DAY_FROM").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let (mut required, mut missed, mut phantoms, mut stops, mut split) = (0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    for seed in from..from + days {
        let d = day(seed);
        let found = stop_segments(&app, &d).await;
        stops += found.len();
        let place = |s: &Still| offset(BASE.0, BASE.1, s.at.0, s.at.1);
        let matches =
            |f: &(i64, i64, (f64, f64)), s: &Still| f.0 <= s.to && f.1 >= s.from && geodesic(f.2, place(s)) <= NEAR_M;
        for s in d.stills.iter().filter(|s| s.to - s.from + 1 >= REQUIRED_S) {
            required += 1;
            let n = found.iter().filter(|f| matches(f, s)).count();
            split += n.saturating_sub(1);
            if n == 0 {
                missed += 1;
                let near: Vec<String> = found
                    .iter()
                    .filter(|f| f.0 <= s.to && f.1 >= s.from)
                    .map(|f| format!("{}..{} at {:.0} m", f.0, f.1, geodesic(f.2, place(s))))
                    .collect();
                failures.push(format!(
                    "day {}: stay {}..{} ({} s, jitter {:.0} m) missed; overlapping: {near:?}",
                    d.label,
                    s.from,
                    s.to,
                    s.to - s.from + 1,
                    s.jitter
                ));
            }
        }
        for f in &found {
            if !d.stills.iter().any(|s| s.to - s.from + 1 >= ALLOWED_S && matches(f, s)) {
                phantoms += 1;
                failures.push(format!("day {}: STOP {}..{} where no one stood 3 min", d.label, f.0, f.1));
            }
        }
    }
    for f in &failures {
        println!("{f}");
    }
    println!(
        "phone days {from}..{}: {required} stays of 5+ min, {missed} missed, {phantoms} phantom STOPs, {split} extra pieces, {stops} STOP segments",
        from + days
    );
    // The target (no miss, no phantom) is not met yet (see docs/trips.md): `STAY_STRICT=1` holds
    // it; by default the default days are held to today's figures (7 misses, no phantom), so a
    // change that loses more stays fails.
    if std::env::var("STAY_STRICT").is_ok() {
        assert!(missed == 0 && phantoms == 0, "{missed} stays missed, {phantoms} phantom STOPs over {days} days");
    } else if (from, days) == (0, 24) {
        assert!(
            missed <= 7 && phantoms == 0,
            "{missed} stays missed (7 before), {phantoms} phantom STOPs over {days} days"
        );
    }
    assert!(required >= 2 * days as usize, "{required} stays over {days} days");
});

#[test]
fn phone_days_are_what_they_say() {
    for seed in 0..8 {
        let d = day(seed);
        let stays = d.stills.iter().filter(|s| s.to - s.from + 1 >= REQUIRED_S).count();
        assert!(stays >= 2, "day {seed}: {stays} stays");
        assert!(d.fixes.len() > 50, "day {seed}: {} fixes", d.fixes.len());
    }
}
