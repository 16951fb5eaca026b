//! What a trip's fixes say: which were stops, how far the user went, how much they climbed.
//! Pure functions over location records, so the trip summary and the figures stored at trip end
//! are one computation.
//!
//! Each *piece* (the trip cut at pauses and at gaps it cannot bridge) is measured on a cleaned
//! path: implausible fixes left out ([`gps::judge`]; they stay stored and are listed), a stop
//! counted as its centroid, moving fixes screened and smoothed ([`smooth`]). Nothing between a
//! pause and its resume counts; fixes more than [`GAP_SECONDS`] apart are joined by a straight
//! line only at a plausible speed. See docs/trips.md, "Distance, duration, route".

use std::ops::Range;

use super::elevation;
use super::fix::TripFix;
use super::gps::{self, Exclusion, Positioned, sigma};
use super::length::{Node, path_steps};
use super::parallel::in_two;
use super::smooth;
use super::stops::{STRAY_SECONDS, detect_stops};
use crate::domain::locations::Location;
use crate::geometry::LngLat;
use crate::time::Timestamp;

/// Sideways deviation (meters) of the smoothed path below which it is treated as straight.
pub const SIMPLIFY_TOLERANCE_M: f64 = 2.0;
/// Largest simplification tolerance (meters), for the least accurate fixes.
pub const MAX_SIMPLIFY_TOLERANCE_M: f64 = 8.0;
pub use super::length::GAP_SECONDS;
pub use super::stops::Activity;

#[derive(Debug, Clone)]
pub struct RoutePoint {
    pub location: TripFix,
    pub activity: Activity,
    /// Meters along the cleaned path since the previous route point (0 after a pause or a gap
    /// not bridged).
    pub distance: f64,
    /// Meters climbed since the previous route point.
    pub elevation_gain: f64,
}

/// A stop found in the route: indexes into [`Route::points`] and where it was.
#[derive(Debug, Clone)]
pub struct StopFound {
    pub first: usize,
    pub last: usize,
    pub centroid: LngLat,
    pub arrived_at: Timestamp,
    pub departed_at: Timestamp,
}

/// A fix left out of the figures, and why.
#[derive(Debug, Clone)]
pub struct ExcludedPoint {
    pub location: TripFix,
    pub reason: Exclusion,
}

/// Time without fixes between two consecutive route points.
#[derive(Debug, Clone)]
pub struct Gap {
    pub from: Timestamp,
    pub to: Timestamp,
    /// Straight-line meters between the fixes on either side.
    pub distance_m: f64,
    /// Whether that straight line is counted (the speed it implies is plausible).
    pub bridged: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Route {
    pub points: Vec<RoutePoint>,
    pub stops: Vec<StopFound>,
    /// Runs of one activity: (first, last) indexes into `points`.
    pub segments: Vec<(usize, usize, Activity)>,
    pub distance_m: f64,
    /// `None` when no fix carries an altitude.
    pub elevation_gain_m: Option<f64>,
    pub excluded: Vec<ExcludedPoint>,
    pub gaps: Vec<Gap>,
}

/// Seconds of `[a, b]` outside every pause.
pub fn active_seconds(a: Timestamp, b: Timestamp, pauses: &[(Timestamp, Timestamp)]) -> i64 {
    active_ms(a, b, pauses) / 1000
}

fn active_ms(a: Timestamp, b: Timestamp, pauses: &[(Timestamp, Timestamp)]) -> i64 {
    let total = (b.0 - a.0).num_milliseconds();
    let paused: i64 = pauses
        .iter()
        .map(|(p, r)| {
            let (s, e) = (p.0.max(a.0), r.0.min(b.0));
            if e > s { (e - s).num_milliseconds() } else { 0 }
        })
        .sum();
    (total - paused).max(0)
}

/// Analyse fixes in `recorded_at` order (already limited to the trip's active time).
pub fn analyse(locations: &[Location], pauses: &[(Timestamp, Timestamp)]) -> Route {
    analyse_owned(locations.iter().map(TripFix::from).collect(), pauses)
}

/// [`analyse`] of fixes the caller has no further use for: they move into the route's points
/// and exclusions instead of being copied (a copy of each of 100,000 fixes is a good part of a
/// summary's time).
pub fn analyse_owned(locations: Vec<TripFix>, pauses: &[(Timestamp, Timestamp)]) -> Route {
    let (mut route, per_fix) = figures(&locations, pauses);
    route.points.reserve(locations.len());
    for (l, fate) in locations.into_iter().zip(per_fix) {
        match fate {
            Fate::Point { activity, distance, elevation_gain } => {
                route.points.push(RoutePoint { location: l, activity, distance, elevation_gain })
            }
            Fate::Excluded(reason) => route.excluded.push(ExcludedPoint { location: l, reason }),
        }
    }
    route
}

/// What became of one fix.
#[derive(Clone, Copy)]
enum Fate {
    Point { activity: Activity, distance: f64, elevation_gain: f64 },
    Excluded(Exclusion),
}

/// The route's figures, without its points and exclusions, and what became of each fix (in
/// order).
fn figures(locations: &[TripFix], pauses: &[(Timestamp, Timestamp)]) -> (Route, Vec<Fate>) {
    let all: Vec<&TripFix> = locations.iter().collect();
    let mut route = Route::default();
    let mut fate = vec![Fate::Excluded(Exclusion::Accuracy); all.len()];
    let mut accepted_at: Vec<usize> = Vec::with_capacity(all.len());
    // Legs between pauses, judged on their own: a fix is never compared across a pause.
    let leg_of = |l: &TripFix| pauses.iter().filter(|(_, r)| *r <= l.recorded_at).count();
    let mut accepted: Vec<(&TripFix, usize)> = Vec::with_capacity(all.len());
    let mut start = 0;
    while start < all.len() {
        let leg = leg_of(all[start]);
        let mut end = start;
        while end < all.len() && leg_of(all[end]) == leg {
            end += 1;
        }
        let verdict = gps::judge(&all[start..end]);
        for (k, (l, v)) in all[start..end].iter().zip(verdict).enumerate() {
            match v {
                None => {
                    accepted.push((l, leg));
                    accepted_at.push(start + k);
                }
                Some(reason) => fate[start + k] = Fate::Excluded(reason),
            }
        }
        start = end;
    }
    // Excursions no vehicle makes that come back are outliers, not gaps to cut around.
    let away = excursions(&accepted);
    if away.iter().any(|&o| o) {
        for (k, _) in away.iter().enumerate().filter(|(_, o)| **o) {
            fate[accepted_at[k]] = Fate::Excluded(Exclusion::Outlier);
        }
        let keep: Vec<usize> = (0..away.len()).filter(|&k| !away[k]).collect();
        accepted = keep.iter().map(|&k| accepted[k]).collect();
        accepted_at = keep.iter().map(|&k| accepted_at[k]).collect();
    }
    // Pieces: cut at pauses and at gaps too fast to bridge.
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    let mut along = gps::Along::default();
    for k in 1..=accepted.len() {
        let cut = k == accepted.len() || {
            let (a, b) = (accepted[k - 1].0, accepted[k].0);
            let dt = (b.recorded_at.0 - a.recorded_at.0).num_milliseconds() as f64 / 1000.0;
            let mut cut = accepted[k - 1].1 != accepted[k].1;
            if !cut {
                let bridged = along.m(a.coordinates, b.coordinates) / dt.max(1e-3) <= gps::MAX_SPEED_MPS;
                if dt > GAP_SECONDS as f64 || !bridged {
                    let d = a.coordinates.distance_m(b.coordinates);
                    route.gaps.push(Gap { from: a.recorded_at, to: b.recorded_at, distance_m: d, bridged });
                }
                cut = !bridged;
            }
            cut
        };
        if cut && k > from {
            pieces.push((from, k));
            from = k;
        }
    }
    let fixes: Vec<&TripFix> = accepted.iter().map(|(l, _)| *l).collect();
    let mut activity = vec![Activity::Moving; fixes.len()];
    let mut distances = vec![0.0; fixes.len()];
    let mut outliers = vec![false; fixes.len()];
    let mut stops = Vec::new();
    for &(a, b) in &pieces {
        let piece = &fixes[a..b];
        let (found, dist, off) = analyse_piece(piece);
        for s in &found {
            activity[a + s.first..=a + s.last].fill(Activity::Stop);
            stops.push(StopFound { first: a + s.first, last: a + s.last, ..s.clone() });
        }
        distances[a..b].copy_from_slice(&dist);
        outliers[a..b].copy_from_slice(&off);
    }
    // The smoother's outliers leave the route like the judge's (their distance is 0 already).
    let (mut fixes, mut activity, mut distances, mut accepted_at) = (fixes, activity, distances, accepted_at);
    if outliers.iter().any(|&o| o) {
        let mut new_index = vec![0usize; fixes.len()];
        let mut k = 0;
        for (i, &o) in outliers.iter().enumerate() {
            new_index[i] = k;
            if o {
                fate[accepted_at[i]] = Fate::Excluded(Exclusion::Outlier);
            } else {
                k += 1;
            }
        }
        for s in &mut stops {
            (s.first, s.last) = (new_index[s.first], new_index[s.last]);
        }
        // In place: collected anew through a filter, each grew by doubling over 100,000 items.
        fn keep<T>(v: &mut Vec<T>, outliers: &[bool]) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                !outliers[i - 1]
            });
        }
        keep(&mut fixes, &outliers);
        keep(&mut activity, &outliers);
        keep(&mut distances, &outliers);
        keep(&mut accepted_at, &outliers);
    }
    route.stops = stops;
    let (gains, total_gain) = elevation::gains(&fixes, &activity);
    for (i, &at) in accepted_at.iter().enumerate() {
        fate[at] = Fate::Point { activity: activity[i], distance: distances[i], elevation_gain: gains[i] };
    }
    // `+ 0.0`: a float sum starts from -0.0, which an empty route would answer as `-0.0`.
    route.distance_m = distances.iter().sum::<f64>() + 0.0;
    route.elevation_gain_m = total_gain;
    route.segments = segments(&activity);
    (route, fate)
}

/// Fixes after a jump too fast for any vehicle ([`gps::MAX_SPEED_MPS`]) when, within
/// [`STRAY_SECONDS`](super::stops::STRAY_SECONDS) of the fix before it (`a`), the trace comes back to where the vehicle could
/// be by then at the pace it kept before `a` ([`gps::SPEED_SLACK`] times its median speed over
/// the last few steps, beyond the fixes' accuracy): two or more multipath fixes that agree with
/// each other (so the judge, comparing neighbours, keeps them), not a move. Only within a leg; a
/// jump that never comes back stays a gap.
fn excursions(accepted: &[(&TripFix, usize)]) -> Vec<bool> {
    let mut away = vec![false; accepted.len()];
    let secs =
        |a: &TripFix, b: &TripFix| ((b.recorded_at.0 - a.recorded_at.0).num_milliseconds() as f64 / 1000.0).max(1e-3);
    let speed = |a: &TripFix, b: &TripFix| gps::near_m(a.coordinates, b.coordinates) / secs(a, b);
    let mut along = gps::Along::default();
    let mut k = 1;
    while k < accepted.len() {
        let (a, leg) = accepted[k - 1];
        let b = accepted[k].0;
        if accepted[k].1 == leg && along.m(a.coordinates, b.coordinates) / secs(a, b) > gps::MAX_SPEED_MPS {
            let from = (k - 1).saturating_sub(5);
            let mut pace: Vec<f64> = (from + 1..k)
                .filter(|&i| accepted[i - 1].1 == leg)
                .map(|i| speed(accepted[i - 1].0, accepted[i].0))
                .collect();
            let pace = crate::stats::median(&mut pace).unwrap_or(0.0).max(gps::MIN_LOCAL_SPEED_MPS);
            let back = (k + 1..accepted.len())
                .take_while(|&m| accepted[m].1 == leg && secs(a, accepted[m].0) <= STRAY_SECONDS as f64)
                .find(|&m| {
                    let b = accepted[m].0;
                    let slack = gps::GATE_SIGMAS * sigma(a).max(sigma(b)) + gps::GATE_FLOOR_M;
                    gps::near_m(a.coordinates, b.coordinates) <= gps::SPEED_SLACK * pace * secs(a, b) + slack
                });
            if let Some(m) = back {
                away[k..m].fill(true);
                k = m + 1;
                continue;
            }
        }
        k += 1;
    }
    away
}

/// Stops (indexes local to the piece), meters since the previous fix along the cleaned path,
/// and which fixes the smoother found to be outliers (their distance is 0: they are left out).
fn analyse_piece(fixes: &[&TripFix]) -> (Vec<StopFound>, Vec<f64>, Vec<bool>) {
    // A fix's accuracy: as reported, else what the piece's fixes show of their noise.
    let offsets = gps::offsets(fixes);
    let residual = gps::residual_sigma(&offsets);
    let missing = gps::missing_sigma(residual);
    let sigmas: Vec<f64> =
        fixes.iter().map(|l| l.reported_accuracy().unwrap_or(missing).max(gps::MIN_ACCURACY_M)).collect();
    let runs = detect_stops(fixes, &sigmas);
    let mut activity = vec![Activity::Moving; fixes.len()];
    for &(a, b, _) in &runs {
        activity[a..=b].fill(Activity::Stop);
    }
    let (smoothed, outliers) = smooth_moving(fixes, &sigmas, &activity);
    // Nodes of the cleaned path: every moving fix (smoothed, and as recorded with its accuracy),
    // and one centroid per stop.
    let mut nodes: Vec<Node> = Vec::new();
    let mut node_of = vec![0usize; fixes.len()];
    let mut stop_nodes = Vec::new();
    let mut stops = Vec::new();
    let mut runs_iter = runs.iter().peekable();
    let mut i = 0;
    while i < fixes.len() {
        if let Some(&&(a, b, centroid)) = runs_iter.peek().filter(|(a, _, _)| *a == i) {
            runs_iter.next();
            stop_nodes.push(nodes.len());
            let ms = (fixes[a].recorded_at.0.timestamp_millis(), fixes[b].recorded_at.0.timestamp_millis());
            nodes.push(Node { smoothed: centroid, recorded: centroid, ms, noise2: 0.0 });
            node_of[a..=b].fill(nodes.len() - 1);
            stops.push(StopFound {
                first: a,
                last: b,
                centroid,
                arrived_at: fixes[a].recorded_at,
                departed_at: fixes[b].recorded_at,
            });
            i = b + 1;
        } else {
            if !outliers[i] {
                nodes.push(Node {
                    smoothed: smoothed[i],
                    recorded: fixes[i].coordinates,
                    ms: (fixes[i].recorded_at.0.timestamp_millis(), fixes[i].recorded_at.0.timestamp_millis()),
                    // What a step's length gains from this end's noise (see `path_steps`).
                    noise2: 2.0 * residual.unwrap_or(sigmas[i]).powi(2),
                });
            }
            // An outlier shares the node before it (never the first fix of a run: see `smooth`).
            node_of[i] = nodes.len().saturating_sub(1);
            i += 1;
        }
    }
    let mut sorted = sigmas.clone();
    let tolerance =
        (crate::stats::median(&mut sorted).unwrap_or(0.0) / 2.0).clamp(SIMPLIFY_TOLERANCE_M, MAX_SIMPLIFY_TOLERANCE_M);
    let steps = path_steps(&nodes, &stop_nodes, tolerance);
    let mut cum = vec![0.0; nodes.len()];
    for k in 1..nodes.len() {
        cum[k] = cum[k - 1] + steps[k];
    }
    let dist = (0..fixes.len()).map(|i| if i == 0 { 0.0 } else { cum[node_of[i]] - cum[node_of[i - 1]] }).collect();
    (stops, dist, outliers)
}

/// Smoothed positions of the moving fixes (stop fixes are returned as they are), and which are
/// outliers: each run of moving fixes between stops is smoothed on its own.
fn smooth_moving(fixes: &[&TripFix], sigmas: &[f64], activity: &[Activity]) -> (Vec<LngLat>, Vec<bool>) {
    let n = fixes.len();
    // Runs never cross a stop fix: long traces are smoothed in two halves at once, cut at one.
    let half = (n / 2..n).find(|&i| activity[i] == Activity::Stop).unwrap_or(n);
    let (mut out, mut outliers) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (pos, off) in in_two(n, n, half, &|span| smooth_span(fixes, sigmas, activity, span)) {
        out.extend(pos);
        outliers.extend(off);
    }
    (out, outliers)
}

/// [`smooth_moving`] of the fixes in `span`, which starts at a run's start or at a stop fix.
fn smooth_span(
    fixes: &[&TripFix],
    sigmas: &[f64],
    activity: &[Activity],
    span: Range<usize>,
) -> (Vec<LngLat>, Vec<bool>) {
    let n = fixes.len();
    let (mut out, mut outliers) = (Vec::with_capacity(span.len()), vec![false; span.len()]);
    let mut i = span.start;
    while i < span.end {
        if activity[i] == Activity::Stop {
            out.push(fixes[i].coordinates);
            i += 1;
            continue;
        }
        let mut j = i;
        while j + 1 < n && activity[j + 1] == Activity::Moving {
            j += 1;
        }
        // A run that leaves (reaches) a stop is screened and smoothed with the stop's last
        // (first) fix before (after) it: its own first (last) fix then has two sides, so an
        // outlier right at a departure or an arrival is judged like any other. The anchors keep
        // their place in the stop.
        let a = if i > 0 { i - 1 } else { i };
        let b = if j + 1 < n { j + 1 } else { j };
        let (pos, off) = smooth::run(&fixes[a..=b], &sigmas[a..=b]);
        out.extend_from_slice(&pos[i - a..=j - a]);
        outliers[i - span.start..=j - span.start].copy_from_slice(&off[i - a..=j - a]);
        i = j + 1;
    }
    (out, outliers)
}

fn segments(activity: &[Activity]) -> Vec<(usize, usize, Activity)> {
    let mut out: Vec<(usize, usize, Activity)> = Vec::new();
    for (i, a) in activity.iter().enumerate() {
        match out.last_mut() {
            Some(last) if last.2 == *a => last.1 = i,
            _ => out.push((i, i, *a)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::length::segment_m;
    use super::super::parallel::one_pass;
    use super::*;

    /// 30,000 fixes a second along a winding road, a stop every 400 s, 1 % far fixes.
    fn long_trace() -> Vec<TripFix> {
        (0..30_000i64)
            .map(|i| {
                let t = i as f64;
                // Still for three minutes and more in every 400 s.
                let still = i % 400 > 200;
                let along = (i / 400 * 200 + (i % 400).min(200)) as f64;
                let wild = if i % 97 == 0 { 0.002 } else { 0.0 };
                let wobble = ((t * 0.37).sin() + (t * 1.9).cos()) * 0.00004;
                TripFix::from(&fix(
                    13.4 + along * 0.00012 + wobble + wild,
                    52.5 + (along * 0.01).sin() * 0.003 + wobble,
                    i,
                    if still { 35.0 } else { 6.0 },
                ))
            })
            .collect()
    }

    #[test]
    fn a_long_trip_analysed_on_two_cores_is_as_in_one_pass() {
        // A ten-minute pause: legs judged apart.
        let pauses = [(fix(0.0, 0.0, 9_000, 5.0).recorded_at, fix(0.0, 0.0, 9_600, 5.0).recorded_at)];
        let two = analyse_owned(long_trace(), &pauses);
        let one = one_pass(|| analyse_owned(long_trace(), &pauses));
        assert!(format!("{two:?}") == format!("{one:?}"), "the route differs from one pass's");
        assert!(
            two.stops.len() > 50 && !two.excluded.is_empty(),
            "{} stops, {} excluded",
            two.stops.len(),
            two.excluded.len()
        );
    }

    #[test]
    fn long_pieces_smoothed_in_halves_are_as_in_one_pass() {
        let locs = long_trace();
        let fixes: Vec<&TripFix> = locs.iter().collect();
        let sigmas: Vec<f64> = fixes.iter().map(|l| sigma(*l)).collect();
        let activity: Vec<Activity> =
            (0..fixes.len()).map(|i| if i % 400 > 300 { Activity::Stop } else { Activity::Moving }).collect();
        let (pos, off) = smooth_moving(&fixes, &sigmas, &activity);
        let one = one_pass(|| smooth_moving(&fixes, &sigmas, &activity));
        assert!((&pos, &off) == (&one.0, &one.1), "smoothed in halves differs");
        assert!(off.iter().any(|&o| o), "no outlier found: the trace does not test them");
    }

    fn fix(lng: f64, lat: f64, secs: i64, accuracy: f64) -> Location {
        let at = chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap_or_default();
        serde_json::from_value(serde_json::json!({
            "coordinates": [lng, lat],
            "recorded_at": at.format("%Y-%m-%dT%H:%M:%S").to_string(),
            "accuracy": accuracy,
        }))
        .unwrap()
    }

    #[test]
    fn an_empty_route_is_zero_not_minus_zero() {
        let r = analyse(&[], &[]);
        assert!(r.distance_m == 0.0 && r.distance_m.is_sign_positive(), "{}", r.distance_m);
    }

    #[test]
    fn a_long_wait_is_one_stop_and_adds_no_distance() {
        let mut locs = vec![fix(13.0, 52.0, 0, 5.0), fix(13.001, 52.0, 10, 5.0)];
        // Ten minutes wandering a few meters around one place, one wild fix among them.
        for i in 0..60 {
            let wobble = if i % 2 == 0 { 0.00003 } else { -0.00003 };
            locs.push(fix(13.002 + wobble, 52.0 + wobble, 20 + i * 10, 8.0));
        }
        locs.push(fix(13.01, 52.01, 300, 200.0));
        locs.sort_by_key(|l| l.recorded_at);
        locs.push(fix(13.003, 52.0, 640, 5.0));
        locs.push(fix(13.004, 52.0, 650, 5.0));
        let r = analyse(&locs, &[]);
        assert_eq!(r.stops.len(), 1);
        assert_eq!(r.points.len(), locs.len() - 1, "the wild fix is dropped");
        let clean = LngLat { lng: 13.0, lat: 52.0 }.distance_m(LngLat { lng: 13.004, lat: 52.0 });
        assert!((r.distance_m - clean).abs() / clean < 0.02, "{} vs {clean}", r.distance_m);
        assert_eq!(r.segments.iter().filter(|s| s.2 == Activity::Stop).count(), 1);
    }

    #[test]
    fn two_far_fixes_that_agree_and_come_back_are_outliers_not_a_gap() {
        // East at 10 m/s, a fix every 5 s; two multipath fixes 400 m north (80 m/s away: no
        // vehicle), 150 m apart from each other (so each has a plausible neighbour).
        let step = 50.0 / 67_800.0;
        let clean: Vec<Location> = (0..40).map(|k| fix(13.0 + step * k as f64, 52.0, 5 * k, 5.0)).collect();
        let mut locs = clean.clone();
        locs[20].coordinates.lat += 400.0 / 111_250.0;
        locs[21].coordinates.lat += 400.0 / 111_250.0;
        locs[21].coordinates.lng += 100.0 / 67_800.0;
        let r = analyse(&locs, &[]);
        let out: Vec<i64> = r.excluded.iter().map(|e| e.location.recorded_at.0.timestamp() - 1_700_000_000).collect();
        assert_eq!(out, vec![100, 105], "both far fixes, as outliers");
        assert!(r.excluded.iter().all(|e| e.reason == Exclusion::Outlier));
        assert!(r.gaps.is_empty(), "{:?}", r.gaps);
        let line = locs[0].coordinates.distance_m(locs[39].coordinates);
        assert!((r.distance_m - line).abs() / line < 0.005, "{} vs {line}", r.distance_m);
        // A jump that never comes back stays a gap, not counted, and no fix is lost.
        let mut moved = clean;
        for l in &mut moved[20..] {
            l.coordinates.lat += 800.0 / 111_250.0;
        }
        let r = analyse(&moved, &[]);
        assert!(r.excluded.is_empty() && r.gaps.len() == 1 && !r.gaps[0].bridged, "{:?}", r.gaps);
    }

    #[test]
    fn adjacent_stops_within_three_radii_are_one_place_and_good_fixes_tell_them_apart() {
        // Ten minutes at A, then ten at B 150 m east, a fix every 15 s, nothing between.
        let at = |accuracy: f64| -> Vec<Location> {
            (0..80).map(|k| fix(13.0 + if k < 40 { 0.0 } else { 150.0 / 68_700.0 }, 52.0, 15 * k, accuracy)).collect()
        };
        // At 60 m accuracy (radius 100 m) the 150 m is within the noise: one stop, no distance.
        let r = analyse(&at(60.0), &[]);
        assert_eq!(r.stops.len(), 1);
        assert!(r.distance_m < 1.0, "{}", r.distance_m);
        // At 5 m (radius 25 m) it is a move: two stops, the 150 m counted.
        let r = analyse(&at(5.0), &[]);
        assert_eq!(r.stops.len(), 2);
        assert!((r.distance_m - 150.0).abs() < 5.0, "{}", r.distance_m);
    }

    #[test]
    fn short_segments_agree_with_the_geodesic() {
        for (lat, d) in [(0.0, 0.001), (52.0, 0.004), (-33.9, 0.01), (70.0, 0.015)] {
            let (a, b) = (LngLat { lng: 13.0, lat }, LngLat { lng: 13.0 + d, lat: lat + d / 2.0 });
            let (fast, exact) = (segment_m(a, b), a.distance_m(b));
            assert!((fast - exact).abs() < exact * 1e-6 + 1e-3, "{fast} vs {exact}");
        }
    }

    #[test]
    fn paused_time_is_not_active() {
        let t = |s| Timestamp(chrono::DateTime::from_timestamp(s, 0).unwrap_or_default());
        assert_eq!(active_seconds(t(0), t(100), &[(t(10), t(40)), (t(90), t(200))]), 60);
        assert_eq!(active_seconds(t(0), t(100), &[]), 100);
    }
}
