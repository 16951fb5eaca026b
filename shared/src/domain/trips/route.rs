//! What a trip's fixes say: which were stops, how far the user really went, how much they
//! climbed. Pure functions over location records, so the trip summary and the figures stored at
//! trip end are the same computation.
//!
//! GPS jitter inflates a naive sum of point-to-point distances, so distance is measured on a
//! cleaned path:
//! 1. fixes whose horizontal accuracy is worse than [`MAX_ACCURACY_M`] are dropped;
//! 2. a stop is a run of fixes that stays within [`STOP_RADIUS_M`] of its running centroid for
//!    at least [`STOP_MIN_SECONDS`]; the whole stop counts as one point (its centroid), so
//!    wandering inside it adds nothing;
//! 3. the remaining polyline is simplified (Ramer–Douglas–Peucker) with a tolerance of
//!    [`SIMPLIFY_TOLERANCE_M`], which removes sideways noise smaller than that while keeping turns;
//! 4. its length is the sum of geodesic distances (WGS 84) between the kept points.
//!
//! A customer can reason about it so: noise below ~10 m and stationary wandering below 50 m are
//! not counted; detours longer than 10 m sideways are.

use geo::SimplifyIdx;

use crate::domain::locations::Location;
use crate::geometry::LngLat;
use crate::time::Timestamp;

/// Fixes less accurate than this (meters, `horizontal_accuracy` or else `accuracy`) are ignored.
pub const MAX_ACCURACY_M: f64 = 50.0;
/// A stop keeps within this distance (meters) of its centroid...
pub const STOP_RADIUS_M: f64 = 50.0;
/// ...for at least this long (seconds).
pub const STOP_MIN_SECONDS: i64 = 120;
/// Sideways deviation (meters) below which the path is treated as straight.
pub const SIMPLIFY_TOLERANCE_M: f64 = 10.0;
/// Altitude changes smaller than this (meters) are treated as GPS noise.
pub const ELEVATION_NOISE_M: f64 = 5.0;

/// Mean Earth radius (meters, IUGG), only for the local flat projection used to simplify.
const EARTH_RADIUS_M: f64 = 6_371_008.8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Stop,
    Moving,
}

impl Activity {
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Stop => "STOP",
            Activity::Moving => "MOVING",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RoutePoint {
    pub location: Location,
    pub activity: Activity,
    /// Meters along the cleaned path since the previous route point.
    pub distance: f64,
    /// Active seconds since the previous route point (paused time excluded).
    pub duration: i64,
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

#[derive(Debug, Clone, Default)]
pub struct Route {
    pub points: Vec<RoutePoint>,
    pub stops: Vec<StopFound>,
    /// Runs of one activity: (first, last) indexes into `points`.
    pub segments: Vec<(usize, usize, Activity)>,
    pub distance_m: f64,
    pub elevation_gain_m: f64,
}

fn accuracy_ok(l: &Location) -> bool {
    l.horizontal_accuracy.or(l.accuracy).is_none_or(|a| a <= MAX_ACCURACY_M)
}

/// Seconds of `[a, b]` outside every pause.
pub fn active_seconds(a: Timestamp, b: Timestamp, pauses: &[(Timestamp, Timestamp)]) -> i64 {
    let total = (b.0 - a.0).num_milliseconds();
    let paused: i64 = pauses
        .iter()
        .map(|(p, r)| {
            let (s, e) = (p.0.max(a.0), r.0.min(b.0));
            if e > s { (e - s).num_milliseconds() } else { 0 }
        })
        .sum();
    (total - paused).max(0) / 1000
}

/// Analyse fixes in `recorded_at` order (already limited to the trip's active time).
pub fn analyse(locations: &[Location], pauses: &[(Timestamp, Timestamp)]) -> Route {
    let fixes: Vec<&Location> = locations.iter().filter(|l| accuracy_ok(l)).collect();
    if fixes.is_empty() {
        return Route::default();
    }
    let runs = detect_stops(&fixes);
    let mut activity = vec![Activity::Moving; fixes.len()];
    for &(a, b) in &runs {
        activity[a..=b].fill(Activity::Stop);
    }

    // Nodes of the cleaned path: every moving fix, and one centroid per stop.
    let mut nodes: Vec<LngLat> = Vec::new();
    let mut node_of = vec![0usize; fixes.len()];
    let mut stops = Vec::new();
    let mut runs_iter = runs.iter().peekable();
    let mut i = 0;
    while i < fixes.len() {
        if let Some(&&(a, b)) = runs_iter.peek().filter(|(a, _)| *a == i) {
            runs_iter.next();
            let centroid = centroid(&fixes[a..=b]);
            nodes.push(centroid);
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
            nodes.push(fixes[i].coordinates);
            node_of[i] = nodes.len() - 1;
            i += 1;
        }
    }
    let kept = simplify(&nodes);
    // Cumulative path length at each kept node; other nodes interpolate between kept neighbours.
    let mut cum = vec![f64::NAN; nodes.len()];
    let mut total = 0.0;
    for (k, &n) in kept.iter().enumerate() {
        if k > 0 {
            total += nodes[kept[k - 1]].distance_m(nodes[n]);
        }
        cum[n] = total;
    }
    for w in kept.windows(2) {
        let (a, b) = (w[0], w[1]);
        for m in a + 1..b {
            cum[m] = cum[a] + (cum[b] - cum[a]) * (m - a) as f64 / (b - a) as f64;
        }
    }

    let gains = elevation_gains(&fixes);
    let mut points = Vec::with_capacity(fixes.len());
    for (idx, l) in fixes.iter().enumerate() {
        let (distance, duration) = if idx == 0 {
            (0.0, 0)
        } else {
            (
                cum[node_of[idx]] - cum[node_of[idx - 1]],
                active_seconds(fixes[idx - 1].recorded_at, l.recorded_at, pauses),
            )
        };
        points.push(RoutePoint {
            location: (*l).clone(),
            activity: activity[idx],
            distance,
            duration,
            elevation_gain: gains[idx],
        });
    }
    let segments = segments(&activity);
    Route { points, stops, segments, distance_m: total, elevation_gain_m: gains.iter().sum() }
}

/// Runs of fixes that are stops: each stays within STOP_RADIUS_M of its running centroid for at
/// least STOP_MIN_SECONDS; a run grows while the next fix stays inside. Returns (first, last).
fn detect_stops(fixes: &[&Location]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < fixes.len() {
        let (mut sum_lng, mut sum_lat, mut n) = (fixes[i].coordinates.lng, fixes[i].coordinates.lat, 1.0);
        let mut j = i;
        while j + 1 < fixes.len() {
            let c = LngLat { lng: sum_lng / n, lat: sum_lat / n };
            if c.distance_m(fixes[j + 1].coordinates) > STOP_RADIUS_M {
                break;
            }
            j += 1;
            sum_lng += fixes[j].coordinates.lng;
            sum_lat += fixes[j].coordinates.lat;
            n += 1.0;
        }
        if j > i && (fixes[j].recorded_at.0 - fixes[i].recorded_at.0).num_seconds() >= STOP_MIN_SECONDS {
            runs.push((i, j));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    runs
}

fn centroid(fixes: &[&Location]) -> LngLat {
    let n = fixes.len() as f64;
    LngLat {
        lng: fixes.iter().map(|l| l.coordinates.lng).sum::<f64>() / n,
        lat: fixes.iter().map(|l| l.coordinates.lat).sum::<f64>() / n,
    }
}

/// Indexes of the nodes kept by Ramer–Douglas–Peucker at SIMPLIFY_TOLERANCE_M, computed in a
/// local flat projection in meters (geo's epsilon is in the units of the coordinates).
fn simplify(nodes: &[LngLat]) -> Vec<usize> {
    if nodes.len() < 3 {
        return (0..nodes.len()).collect();
    }
    let lat0 = nodes.iter().map(|p| p.lat).sum::<f64>() / nodes.len() as f64;
    let lng0 = nodes[0].lng;
    let k = EARTH_RADIUS_M * std::f64::consts::PI / 180.0;
    let line: geo::LineString<f64> = nodes
        .iter()
        .map(|p| {
            // Wrap longitude differences so a route across the antimeridian stays continuous.
            let dlng = (p.lng - lng0 + 540.0).rem_euclid(360.0) - 180.0;
            geo::Coord { x: dlng * k * lat0.to_radians().cos(), y: (p.lat - lat0) * k }
        })
        .collect();
    line.simplify_idx(SIMPLIFY_TOLERANCE_M)
}

/// Meters climbed at each fix, counting a rise only once it exceeds ELEVATION_NOISE_M above the
/// lowest altitude since the last counted rise (hysteresis against GPS altitude noise).
fn elevation_gains(fixes: &[&Location]) -> Vec<f64> {
    let mut out = vec![0.0; fixes.len()];
    let mut base: Option<f64> = None;
    for (i, l) in fixes.iter().enumerate() {
        let Some(alt) = l.altitude else { continue };
        match base {
            None => base = Some(alt),
            Some(b) if alt < b => base = Some(alt),
            Some(b) if alt - b >= ELEVATION_NOISE_M => {
                out[i] = alt - b;
                base = Some(alt);
            }
            Some(_) => {}
        }
    }
    out
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
