//! Trip figures on realistic GPS (see `gps_truth`): each case is driven through the API as a
//! device and a server would (ingest in batches, start/pause/resume/end with times, summary) and
//! held to its ground truth:
//! - distance at least the geodesic length through the true positions at the same sample times
//!   less 1 % (walking at 3 km/h: 2.5 %, see `check`), at most the larger of that and the true
//!   path's length plus 1 % (sparse fixes cut corners the figures may recover), and never more
//!   than 2 % above the true path's length; pacing slowly at 5–10 m noise (accuracy sent or
//!   not), within 5 %;
//! - stops where they truly are (still at least 2 minutes), no others;
//! - movement while paused not counted;
//! - elevation gain within 20 % on a hilly route, under 20 m per 10 km on a flat one;
//! - cumulative per-point distance and duration ending at the totals, each point's duration the active time from the start to its fix;
//! - every outlier left out of the route.
//!
//! `cargo test -p waymark-tests --test api trip_gps -- --nocapture` prints the table docs/trips.md
//! keeps.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::both;
use crate::gps_truth::{Outliers, Sample, Timeline, at, city_route, sample, sampled_length, true_climb, true_stops};
use crate::helpers::{Key, TestApp};
use crate::trace::geodesic;

const HOME: (f64, f64) = (13.3777, 52.5163);

struct Case {
    name: String,
    tl: Timeline,
    every: usize,
    outliers: Outliers,
    /// Paused between these seconds.
    pause: Option<(usize, usize)>,
    /// Whether the elevation is checked as hilly (else as flat).
    hilly: bool,
    /// Fixes are sent without their accuracy.
    no_accuracy: bool,
}

fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
}

fn t0() -> DateTime<Utc> {
    // Whole seconds, a few hours back: every fix is in the past.
    let now = Utc::now() - Duration::hours(4);
    DateTime::from_timestamp(now.timestamp(), 0).unwrap()
}

/// A city drive with waits at lights (40 s, not stops), σ rising from 3 to 15 m.
fn drive() -> Timeline {
    let mut tl = Timeline::new(t0(), HOME, 34.0);
    let route = city_route(1.0);
    let sigmas = [3.0, 6.0, 10.0, 15.0];
    for (k, chunk) in route.chunks(route.len().div_ceil(4)).enumerate() {
        tl.travel(chunk, 12.0, 34.0, sigmas[k], false);
        tl.stay(40, 10.0);
    }
    tl
}

/// Drive, lie still for an hour at 20–50 m accuracy, drive on.
fn still_hour() -> Timeline {
    let mut tl = Timeline::new(t0(), HOME, 34.0);
    tl.travel(&[(600.0, 0.0), (600.0, 900.0)], 11.0, 34.0, 5.0, false);
    for acc in [20.0, 35.0, 50.0, 25.0, 45.0, 30.0] {
        tl.stay(600, acc);
    }
    tl.travel(&[(1400.0, 900.0), (1400.0, 1500.0)], 11.0, 34.0, 5.0, false);
    tl
}

/// Walking at 3.2 km/h through short blocks.
fn slow_walk() -> Timeline {
    let mut tl = Timeline::new(t0(), HOME, 34.0);
    tl.travel(&crate::gps_truth::walking_route((0.0, 0.0)), 0.9, 34.0, 5.0, false);
    tl
}

/// Walking back and forth along a 300 m path at 1.5 m/s, ten times, noise σ 5 m then 10 m: slow
/// movement, never a stop.
fn pacing() -> Timeline {
    let mut tl = Timeline::new(t0(), HOME, 34.0);
    for lap in 0..10 {
        tl.travel(&[(300.0, 0.0), (0.0, 0.0)], 1.5, 34.0, if lap < 5 { 5.0 } else { 10.0 }, false);
    }
    tl
}

/// Deliveries: three stops of 4–6 minutes at 10–20 m accuracy between drives.
fn deliveries() -> Timeline {
    let mut tl = Timeline::new(t0(), HOME, 34.0);
    let legs: [&[(f64, f64)]; 4] = [
        &[(500.0, 0.0), (500.0, 600.0)],
        &[(1200.0, 600.0)],
        &[(1200.0, 1300.0), (1700.0, 1300.0)],
        &[(1700.0, 2000.0)],
    ];
    for (k, leg) in legs.iter().enumerate() {
        tl.travel(leg, 10.0, 34.0, 6.0, false);
        if k < 3 {
            tl.stay(240 + 60 * k as i64, [10.0, 20.0, 15.0][k]);
        }
    }
    tl
}

/// A tunnel (150 s without fixes, bridged) and a jump no vehicle makes (not counted).
fn gaps() -> Timeline {
    let mut tl = Timeline::new(t0(), HOME, 34.0);
    tl.travel(&[(800.0, 0.0)], 12.0, 34.0, 5.0, false);
    tl.travel(&[(2600.0, 0.0)], 12.0, 34.0, 5.0, true);
    tl.travel(&[(3200.0, 0.0), (3200.0, 500.0)], 12.0, 34.0, 5.0, false);
    tl.stay(10, 10.0);
    tl.teleport((60_000.0, 30_000.0));
    tl.stay(5, 10.0);
    tl.travel(&[(60_000.0, 31_000.0)], 12.0, 34.0, 5.0, false);
    tl
}

/// A hilly route: up 45 m, down 45 m, up 40 m.
fn hills() -> Timeline {
    let mut tl = Timeline::new(t0(), HOME, 100.0);
    tl.travel(&[(1200.0, 0.0), (1200.0, 600.0)], 6.0, 145.0, 5.0, false);
    tl.travel(&[(2000.0, 600.0), (2000.0, 1400.0)], 6.0, 100.0, 5.0, false);
    tl.travel(&[(2600.0, 1400.0), (2600.0, 2000.0)], 6.0, 140.0, 5.0, false);
    tl
}

/// The drive, paused half way for 10 minutes while the car drives 2 km elsewhere.
fn paused() -> (Timeline, (usize, usize)) {
    let mut tl = Timeline::new(t0(), HOME, 34.0);
    tl.travel(&[(600.0, 0.0), (600.0, 450.0), (1100.0, 450.0)], 12.0, 34.0, 5.0, false);
    let from = tl.states.len() - 1;
    tl.travel(&[(1100.0, 1450.0), (2100.0, 1450.0)], 12.0, 34.0, 5.0, false);
    tl.stay(600 - (tl.states.len() - 1 - from) as i64, 10.0);
    let to = tl.states.len() - 1;
    tl.travel(&[(2100.0, 2000.0), (2600.0, 2000.0)], 12.0, 34.0, 5.0, false);
    (tl, (from, to))
}

fn cases() -> Vec<Case> {
    let case = |name: &str, tl: Timeline, every, outliers| Case {
        name: name.to_owned(),
        tl,
        every,
        outliers,
        pause: None,
        hilly: false,
        no_accuracy: false,
    };
    let mut v = Vec::new();
    for every in [1, 5, 15, 60] {
        v.push(case("drive, noise 3-15 m", drive(), every, Outliers::None));
    }
    for (o, label) in
        [(Outliers::Optimistic, "optimistic"), (Outliers::Missing, "missing"), (Outliers::Honest, "honest")]
    {
        for every in [1, 15] {
            v.push(case(&format!("drive, 1% outliers, {label} accuracy"), drive(), every, o));
        }
    }
    for every in [5, 15] {
        v.push(case("still 1 h at 20-50 m", still_hour(), every, Outliers::None));
        v.push(case("walk 3.2 km/h", slow_walk(), every, Outliers::None));
    }
    for no_accuracy in [false, true] {
        let label = if no_accuracy { "no accuracy" } else { "accuracy sent" };
        let mut p = case(&format!("pacing 300 m at 1.5 m/s, {label}"), pacing(), 3, Outliers::None);
        p.no_accuracy = no_accuracy;
        v.push(p);
    }
    v.push(case("deliveries, 3 stops", deliveries(), 5, Outliers::Optimistic));
    v.push(case("tunnel gap and a jump", gaps(), 5, Outliers::None));
    let mut h = case("hills, +85 m", hills(), 5, Outliers::None);
    h.hilly = true;
    v.push(h);
    let (tl, pause) = paused();
    let mut p = case("pause, moving while paused", tl, 5, Outliers::None);
    p.pause = Some(pause);
    v.push(p);
    v
}

struct Outcome {
    distance_err_pct: f64,
    /// Against the true path's length.
    path_err_pct: f64,
    stops: (usize, usize),
    elevation: String,
}

async fn control(app: &TestApp, trip: &str, action: &str, field: &str, at: DateTime<Utc>) -> Value {
    let body = json!({"trip_id": trip, "action": action, field: ts(at)});
    let (status, res) = app.call("POST", "/v3/api/trips/controls/", Key::Secret, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{action}: {res}");
    res["data"][0].clone()
}

async fn run(app: &TestApp, c: &Case) -> Outcome {
    let mut samples = sample(&c.tl, c.every, c.outliers, 7 + c.every as u64);
    if c.no_accuracy {
        for s in &mut samples {
            s.json.as_object_mut().unwrap().remove("accuracy");
        }
    }
    let last = c.tl.states.len() - 1;
    let user = app.create_user(json!({})).await;
    let o = c.tl.states[0].pos;
    let d = c.tl.states[last].pos;
    let body = json!({"user_id": user, "origins": [[o.0, o.1]], "destinations": [[d.0, d.1]]});
    let (_, res) = app.post("/v3/api/trips/", &body).await;
    let trip = res["data"][0]["id"].as_str().unwrap().to_owned();
    control(app, &trip, "start", "started_at", c.tl.time(0)).await;
    let mut sent = 0;
    let mut send_until = |second: usize| {
        let batch: Vec<Value> =
            samples.iter().filter(|s| s.second >= sent && s.second < second).map(|s| s.json.clone()).collect();
        sent = second;
        batch
    };
    let mut batches = Vec::new();
    if let Some((p, r)) = c.pause {
        batches.push((send_until(p), Some(("pause", "paused_at", p))));
        batches.push((send_until(r), Some(("resume", "resumed_at", r))));
    }
    batches.push((send_until(last + 1), None));
    for (fixes, then) in batches {
        for chunk in fixes.chunks(250) {
            let body = json!({"user_id": user, "locations": chunk});
            let (status, res) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
            assert_eq!(status, StatusCode::CREATED, "{res}");
        }
        if let Some((action, field, second)) = then {
            control(app, &trip, action, field, c.tl.time(second)).await;
        }
    }
    let ended = control(app, &trip, "end", "ended_at", c.tl.time(last) + Duration::seconds(1)).await;
    let (status, res) = app.get(&format!("/v1/api/trips/summary/?trip_id={trip}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let s = &res["data"];
    check(c, &samples, s, &ended)
}

/// Geodesic length through the true positions at the sample times, per active stretch, leaving
/// out the one jump no vehicle makes.
fn truth_length(c: &Case, samples: &[Sample]) -> f64 {
    let active = |k: usize| c.pause.is_none_or(|(p, r)| k <= p || k >= r);
    let kept: Vec<&Sample> = samples.iter().filter(|x| active(x.second)).collect();
    let mut truth = 0.0;
    for w in kept.windows(2) {
        let across_pause = c.pause.is_some_and(|(p, r)| w[0].second <= p && w[1].second >= r);
        let d = geodesic(w[0].truth, w[1].truth);
        if !across_pause && d / (w[1].second - w[0].second) as f64 <= 70.0 {
            truth += sampled_length(&[w[0], w[1]]);
        }
    }
    truth
}

/// Hold one summary to the case's truth; returns the figures for the table.
fn check(c: &Case, samples: &[Sample], s: &Value, ended: &Value) -> Outcome {
    let name = format!("{} @ {} s", c.name, c.every);
    let active = |k: usize| c.pause.is_none_or(|(p, r)| k <= p || k >= r);
    let truth = truth_length(c, samples);
    let path: f64 = (1..c.tl.states.len())
        .filter(|&k| active(k) && active(k - 1))
        .map(|k| geodesic(c.tl.states[k - 1].pos, c.tl.states[k].pos))
        .filter(|d| *d <= 70.0)
        .sum();
    let got = s["distance_covered"].as_f64().unwrap();
    let err = (got - truth) / truth * 100.0;
    // A walker at 3 km/h moves little more per fix than the correlated noise wanders (σ 5 m,
    // correlated over a minute: 54 m of walking). Each corner's position is then off by about
    // one σ, and the length with it: even an estimator told the true legs and their directions
    // (fitting each leg's offset to its fixes) spreads −1.6 … +2.0 % over 200 seeds at 5 s
    // sampling, 14 % of them beyond 1 %. Ours spreads about ±2.5 % (see `spread`), so walking
    // is held to 2.5 %.
    // Pacing slowly at 5-10 m noise, a step of 4.5 m is mostly noise: at least 95 % of the way
    // counts, and at most 5 % more.
    let bound = if c.name.starts_with("walk") {
        2.5
    } else if c.name.starts_with("pacing") {
        5.0
    } else {
        1.0
    };
    // Sparse fixes cut the corners of the true path: the samples' own path is the least to
    // count, and recovering the corners (see `route::curve_m`; real traces' truth is the road
    // driven) may count up to the true path's length.
    let most = truth.max(path) * (1.0 + bound / 100.0);
    assert!(
        err >= -bound && got <= most,
        "{name}: distance {got:.1} m vs truth {truth:.1} m ({err:+.2} %), true path {path:.1} m"
    );
    assert!(
        got <= path * (1.0 + bound.max(2.0) / 100.0),
        "{name}: distance {got:.1} m above the true path {path:.1} m"
    );
    assert_eq!(ended["distance_covered"], s["distance_covered"], "{name}: stored and summary figures agree");

    // Stops.
    let route = s["route"].as_array().unwrap();
    let last = c.tl.states.len() - 1;
    let truth_stops: Vec<_> =
        true_stops(&c.tl, 0, last, 120).into_iter().filter(|(a, b, _)| active(*a) && active(*b)).collect();
    let found: Vec<(f64, f64)> = s["route_indexes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|seg| route[seg[0].as_u64().unwrap() as usize - 1]["activity"] == "STOP")
        .map(|seg| {
            let (a, b) = (
                seg[0].as_u64().unwrap() as usize - 1,
                seg[seg.as_array().unwrap().len() - 1].as_u64().unwrap() as usize - 1,
            );
            let pts = &route[a..=b];
            let n = pts.len() as f64;
            let sum = pts.iter().fold((0.0, 0.0), |acc, p| {
                let c = &p["coordinates"]["coordinates"];
                (acc.0 + c[0].as_f64().unwrap(), acc.1 + c[1].as_f64().unwrap())
            });
            (sum.0 / n, sum.1 / n)
        })
        .collect();
    if c.every <= 15 {
        assert_eq!(found.len(), truth_stops.len(), "{name}: stops found {found:?} vs true {truth_stops:?}");
        for (f, (_, _, t)) in found.iter().zip(&truth_stops) {
            assert!(geodesic(*f, *t) < 40.0, "{name}: stop found {:.0} m from the truth", geodesic(*f, *t));
        }
    }

    // Elevation.
    let gain = s["total_elevation_gain"].as_f64().expect("altitude was sent");
    let elevation = if c.hilly {
        let true_gain = true_climb(&c.tl, 0, last);
        let e = (gain - true_gain) / true_gain * 100.0;
        assert!(e.abs() <= 20.0, "{name}: climbed {gain:.1} m vs {true_gain:.1} m");
        format!("{gain:.0} m of {true_gain:.0} m ({e:+.0} %)")
    } else {
        let per_10km = gain / (path / 10_000.0);
        // Pacing spends an hour on 6 km: altitude noise has ten times a drive's time to climb.
        // The case is there for its distance.
        assert!(
            per_10km < 20.0 || c.name.starts_with("pacing"),
            "{name}: flat route climbed {gain:.1} m over {path:.0} m"
        );
        format!("{gain:.0} m on flat ({per_10km:.1} m/10 km)")
    };

    // Cumulative per-point figures grow along the route and end at the totals; every point
    // but the last (which counts to the trip's end) has the active seconds from the start to its
    // fix, the pause left out, as the generator's clock says.
    let col = |f: &str| route.iter().map(|p| p[f].as_f64().unwrap_or_else(|| panic!("{f}: {p}"))).collect::<Vec<_>>();
    for f in ["distance", "duration", "elevation_gain"] {
        assert!(col(f).windows(2).all(|w| w[0] <= w[1]), "{name}: {f} not cumulative");
    }
    let end = route.last().unwrap();
    assert_eq!(end["distance"], s["distance_covered"], "{name}");
    assert_eq!(end["duration"], s["duration"], "{name}");
    assert_eq!(end["elevation_gain"], s["total_elevation_gain"], "{name}");
    let second_of: std::collections::HashMap<&str, usize> =
        samples.iter().map(|x| (x.json["recorded_at"].as_str().unwrap(), x.second)).collect();
    for p in &route[..route.len() - 1] {
        let k = second_of[p["recorded_at"].as_str().unwrap()];
        let paused = c.pause.map_or(0, |(a, b)| k.min(b).saturating_sub(a));
        assert_eq!(p["duration"].as_u64(), Some((k - paused) as u64), "{name}: duration at {p}");
    }

    // Every outlier in the trip's active time is left out, with its reason.
    let excluded: Vec<&str> =
        s["excluded_points"].as_array().unwrap().iter().map(|e| e["recorded_at"].as_str().unwrap()).collect();
    for x in samples.iter().filter(|x| x.outlier && active(x.second)) {
        let at = x.json["recorded_at"].as_str().unwrap();
        assert!(excluded.contains(&at), "{name}: outlier at {at} not excluded");
        assert!(route.iter().all(|p| p["recorded_at"] != at), "{name}: outlier at {at} in the route");
    }
    // And few honest fixes go with them (a good fix dropped is route lost).
    let outlier_at: Vec<&str> =
        samples.iter().filter(|x| x.outlier).map(|x| x.json["recorded_at"].as_str().unwrap()).collect();
    let honest_dropped = excluded.iter().filter(|at| !outlier_at.contains(at)).count();
    let active_fixes = samples.iter().filter(|x| active(x.second)).count();
    assert!(honest_dropped * 100 <= active_fixes, "{name}: {honest_dropped} honest fixes of {active_fixes} excluded");
    if c.pause.is_some() {
        assert_eq!(s["paused_intervals"].as_array().unwrap().len(), 1, "{name}");
    }
    Outcome {
        distance_err_pct: err,
        path_err_pct: (got - path) / path * 100.0,
        stops: (found.len(), truth_stops.len()),
        elevation,
    }
}

both!(trip_figures_hold_on_realistic_gps, |app| async move {
    let mut table = vec![
        "| Case | Sampling | Distance vs samples' path | vs true path | Stops found / true | Elevation gain |"
            .to_owned(),
        "|---|---|---|---|---|---|".to_owned(),
    ];
    for c in cases() {
        let o = run(&app, &c).await;
        table.push(format!(
            "| {} | {} s | {:+.2} % | {:+.2} % | {} / {} | {} |",
            c.name, c.every, o.distance_err_pct, o.path_err_pct, o.stops.0, o.stops.1, o.elevation
        ));
    }
    println!("{}", table.join("\n"));
});

#[test]
fn the_generator_keeps_its_truth() {
    let tl = drive();
    let s = sample(&tl, 1, Outliers::Optimistic, 3);
    let outliers = s.iter().filter(|x| x.outlier).count();
    assert!((3..=15).contains(&outliers), "about 1 % outliers: {outliers} of {}", s.len());
    let errs: Vec<f64> = s
        .iter()
        .filter(|x| !x.outlier)
        .map(|x| {
            let c = &x.json["coordinates"];
            geodesic((c[0].as_f64().unwrap(), c[1].as_f64().unwrap()), x.truth)
        })
        .collect();
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    assert!((3.0..20.0).contains(&mean), "mean error {mean:.1} m");
    let _ = at(HOME, 0.0, 0.0);
}

/// The same cases over several noise seeds, analysed in process (no API), to see the spread:
/// `SEEDS=16 cargo test -p waymark-tests --test api spread -- --ignored --nocapture` (a
/// second in a debug build per 8 seeds). Not asserted: at 1 % some seeds of walking and of
/// 15 s sampling fall outside (see `check` and docs/trips.md).
#[test]
#[ignore]
fn spread() {
    use shared::domain::locations::Location;
    use shared::domain::trips::route;
    use shared::time::Timestamp;
    let seeds: u64 = std::env::var("SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    let mut rows: std::collections::BTreeMap<String, Vec<(f64, u64)>> = Default::default();
    let mut dropped: std::collections::BTreeMap<String, Vec<(u64, usize)>> = Default::default();
    let from: u64 = std::env::var("SEED_FROM").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    for (seed, c) in (from..from + seeds).flat_map(|k| cases().into_iter().map(move |c| (k, c))) {
        let mut samples = sample(&c.tl, c.every, c.outliers, 7 + c.every as u64 + seed * 1000);
        if c.no_accuracy {
            for s in &mut samples {
                s.json.as_object_mut().unwrap().remove("accuracy");
            }
        }
        let active = |k: usize| c.pause.is_none_or(|(p, r)| k <= p || k >= r);
        let locs: Vec<Location> = samples
            .iter()
            .filter(|x| active(x.second))
            .map(|x| serde_json::from_value(x.json.clone()).unwrap())
            .collect();
        let pauses: Vec<(Timestamp, Timestamp)> =
            c.pause.iter().map(|(p, r)| (Timestamp(c.tl.time(*p)), Timestamp(c.tl.time(*r)))).collect();
        let r = route::analyse(&locs, &pauses);
        let truth = truth_length(&c, &samples);
        let name = format!("{} @ {} s", c.name, c.every);
        rows.entry(name.clone()).or_default().push(((r.distance_m - truth) / truth * 100.0, seed));
        // Honest fixes the screens left out as outliers (accuracy exclusions aside).
        let out: std::collections::BTreeSet<String> = r
            .excluded
            .iter()
            .filter(|e| e.reason.as_str() == "outlier")
            .map(|e| e.location.recorded_at.format(None))
            .collect();
        let honest = samples.iter().filter(|x| active(x.second) && !x.outlier);
        let lost = honest.filter(|x| out.contains(x.json["recorded_at"].as_str().unwrap_or_default())).count();
        if lost > 0 {
            dropped.entry(name).or_default().push((seed, lost));
        }
    }
    for (name, seeds) in &dropped {
        println!("honest fixes dropped: {name}: (seed, fixes) {seeds:?}");
    }
    // With the seed of the worst run (`SEED_FROM=k SEEDS=1` repeats it alone).
    for (name, errs) in rows {
        let (lo, hi) = errs.iter().fold((f64::MAX, f64::MIN), |(l, h), (e, _)| (l.min(*e), h.max(*e)));
        let within = errs.iter().filter(|(e, _)| e.abs() <= 1.0).count();
        let worst = errs.iter().max_by(|a, b| a.0.abs().total_cmp(&b.0.abs())).map_or(0, |w| w.1);
        println!("| {name} | {lo:+.2} % … {hi:+.2} % | {within} of {} within 1 % | worst seed {worst} |", errs.len());
    }
}

async fn send(app: &TestApp, user: &str, fixes: Vec<Value>) {
    let body = json!({"user_id": user, "locations": fixes});
    let (status, res) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
}

both!(an_outlier_fires_no_stop_departure_and_a_fix_before_the_start_reaches_nothing, |app| async move {
    let user = app.create_user(json!({})).await;
    let stop = at(HOME, 500.0, 0.0);
    let body = json!({"user_id": user, "stops": [{"name": "shop", "geometry_radius": 50,
        "geometry": {"type": "Point", "coordinates": [stop.0, stop.1]}}]});
    let (status, res) = app.call("POST", "/v2/trips", Key::Bearer, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let id = res["trip"]["id"].as_str().unwrap().to_owned();
    let t = t0();
    let fix = |s: i64, p: (f64, f64), acc: f64| json!({"coordinates": [p.0, p.1], "recorded_at": ts(t + Duration::seconds(s)), "accuracy": acc});
    // Already at the stop before the trip starts: that fix reaches nothing.
    send(&app, &user, vec![fix(-30, stop, 5.0)]).await;
    let start = json!({"action": "start", "started_at": ts(t)});
    let (status, res) = app.call("POST", &format!("/v2/trips/{id}/controls"), Key::Bearer, Some(&start)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let (_, got) = app.call("GET", &format!("/v2/trips/{id}"), Key::Bearer, None).await;
    assert!(got["trip"]["stops"][0]["arrived_at"].is_null(), "a fix from before the start: {got}");

    // Drive in, wait, one multipath fix 400 m off claiming 5 m, wait on, then really leave.
    let mut fixes: Vec<Value> = (0..=10).map(|k| fix(5 * k, at(HOME, 50.0 * k as f64, 0.0), 5.0)).collect();
    fixes.extend((11..=20).map(|k| fix(5 * k, stop, 8.0)));
    fixes.push(fix(105, at(stop, 0.0, 400.0), 5.0));
    fixes.extend((22..=30).map(|k| fix(5 * k, stop, 8.0)));
    fixes.extend((31..=40).map(|k| fix(5 * k, at(stop, 50.0 * (k - 30) as f64, 0.0), 5.0)));
    for f in &fixes {
        // One fix per request, as a phone sends them live: the outlier is judged when its
        // successor arrives.
        send(&app, &user, vec![f.clone()]).await;
    }
    let (_, got) = app.call("GET", &format!("/v2/trips/{id}"), Key::Bearer, None).await;
    let s = &got["trip"]["stops"][0];
    assert_eq!(s["arrived_at"], fixes[10]["recorded_at"], "{got}");
    assert_eq!(s["departed_at"], fixes[32]["recorded_at"], "left when it really left, not at the outlier: {got}");
    let departures =
        got["trip"]["events"].as_array().unwrap().iter().filter(|e| e["event_type"] == "trip:user_left_stop").count();
    assert_eq!(departures, 1, "{got}");
});

both!(stop_departures_keep_their_time_on_a_1_s_drive_with_outliers, |app| async move {
    // The deliveries at one fix a second with 1 % multipath outliers: each v2 stop is departed
    // at the first fix beyond its radius and margin, not minutes later.
    let route = city_route(1.0);
    let cases = [
        (deliveries(), vec![at(HOME, 500.0, 600.0), at(HOME, 1200.0, 600.0), at(HOME, 1700.0, 1300.0)]),
        // Stops the drive passes through without stopping, and one where it waits at a light.
        (drive(), [1, 4, 9, 17].iter().map(|&k| at(HOME, route[k].0, route[k].1)).collect()),
    ];
    for ((tl, places), outliers) in cases.iter().flat_map(|c| [(c, Outliers::Optimistic), (c, Outliers::Missing)]) {
        let samples = sample(tl, 1, outliers, 11);
        let user = app.create_user(json!({})).await;
        let stops: Vec<Value> = places
            .iter()
            .map(|p| json!({"geometry_radius": 50, "geometry": {"type": "Point", "coordinates": [p.0, p.1]}}))
            .collect();
        let (status, res) =
            app.call("POST", "/v2/trips", Key::Bearer, Some(&json!({"user_id": user, "stops": stops}))).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        let id = res["trip"]["id"].as_str().unwrap().to_owned();
        let start = json!({"action": "start", "started_at": ts(tl.time(0))});
        let (status, res) = app.call("POST", &format!("/v2/trips/{id}/controls"), Key::Bearer, Some(&start)).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        for chunk in samples.chunks(1000) {
            send(&app, &user, chunk.iter().map(|s| s.json.clone()).collect()).await;
        }
        let (_, got) = app.call("GET", &format!("/v2/trips/{id}"), Key::Bearer, None).await;
        for (k, place) in places.iter().enumerate() {
            // Truly left: the first second the device is beyond radius and margin.
            let d = |s: usize| geodesic(tl.states[s].pos, *place);
            let arrived = (0..tl.states.len()).find(|&s| d(s) <= 50.0).unwrap();
            let left = (arrived..tl.states.len()).find(|&s| d(s) > 75.0).unwrap();
            let departed = got["trip"]["stops"][k]["departed_at"].as_str().unwrap_or_else(|| panic!("{got}"));
            let departed = DateTime::parse_from_rfc3339(&format!("{departed}Z")).unwrap().with_timezone(&Utc);
            let late = (departed - tl.time(left)).num_seconds();
            assert!(late.abs() <= 10, "{outliers:?}: stop {k} departed {late} s after truly leaving");
        }
    }
});
