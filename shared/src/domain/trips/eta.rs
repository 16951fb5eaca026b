//! Estimated time of arrival at the place a trip is heading to: the next v2 stop not yet arrived
//! at, or the first v1/v3 destination not yet reached. The straight line to it times the trip's
//! own detour (blended with [`DETOUR_PRIOR`] while the trip has gone little), over its speed of
//! the last [`SPEED_WINDOW_SECONDS`] halts included, from the fixes the route cleaning keeps.
//! [`Method::CHOSEN`] is that rule; the alternatives run through the same code only to be
//! measured against it. Unknown (None) when lost, paused, outside the trip or without a target.
//! See docs/tracking-page.md, "ETA".

use serde_json::{Value, json};

use super::route::{self, Activity};
use super::{Trip, Waypoint, WaypointKind};
use crate::domain::locations::Location;
use crate::time::Timestamp;

/// The detour assumed before the trip shows its own: roads are longer than the straight line,
/// typical urban circuity is 1.2 to 1.4 (Ballou, Rahardja and Sakai 2002; Boscoe, Henry and Zdeb
/// 2012 measured a US mean of 1.42 for short trips); the middle is used.
pub const DETOUR_PRIOR: f64 = 1.3;
/// Straight-line meters of the trip so far at which its own detour weighs as much as the prior.
pub const DETOUR_PRIOR_M: f64 = 150.0;
/// Bounds of the detour used: a straight road to a trip that went twice the straight line (a
/// loop so far says little of the way left).
pub const DETOUR_BOUNDS: (f64, f64) = (1.0, 2.0);
/// A latest fix older than this (seconds) means the device is lost: no estimate.
pub const LOST_AFTER_SECONDS: i64 = 600;
/// How far back (seconds) fixes are read to learn the detour and the speed.
pub const SPEED_LOOKBACK_SECONDS: i64 = 3600;
/// Active time (seconds), counted back from the latest fix, that the speed is averaged over.
pub const SPEED_WINDOW_SECONDS: i64 = 1800;
/// Least moving time (seconds) within that window a speed is judged from.
pub const MIN_MOVING_SECONDS: i64 = 60;
/// Bounds of the speed used (m/s): a slow walk to a fast motorway drive.
pub const SPEED_BOUNDS: (f64, f64) = (0.5, 40.0);

/// How the estimate learns its detour and speed. [`Method::CHOSEN`] is the one in use (the
/// constants above); the others exist so the evaluation (`tests/api/eta_eval/analysis.rs`) measures the
/// alternatives through the same code, on the same trips (docs/tracking-page.md, "ETA").
#[derive(Debug, Clone, Copy)]
pub struct Method {
    /// Fixes read back from now (seconds).
    pub lookback_s: i64,
    /// Windows of active time (seconds) the speed is measured over; several are averaged (a
    /// blend of a recent and a long speed).
    pub speed_windows_s: &'static [i64],
    /// A halt (a stop the route found, or a silence over [`route::GAP_SECONDS`]) counts at most
    /// this long in the speed (None: whole).
    pub halt_cap_s: Option<i64>,
    pub detour: DetourRule,
}

/// Where the detour comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DetourRule {
    /// The path read over the straight line from its first to its latest fix, blended with
    /// [`DETOUR_PRIOR`] while that line is short.
    Trip,
    /// The median path over chord of the pieces of the path read whose chord is as long as the
    /// straight line left (at least `min_m`): a trip's circuity at the scale of the way left, not
    /// of its loops; [`DetourRule::Trip`] while no piece is that long.
    AtScale { min_m: f64 },
    /// [`DETOUR_PRIOR`] alone.
    Prior,
}

impl Method {
    /// The method in use.
    pub const CHOSEN: Method = Method {
        lookback_s: SPEED_LOOKBACK_SECONDS,
        speed_windows_s: &[SPEED_WINDOW_SECONDS],
        halt_cap_s: None,
        detour: DetourRule::Trip,
    };
}

/// An estimate of arrival at one target.
#[derive(Debug, Clone, PartialEq)]
pub struct Eta {
    pub target: WaypointKind,
    pub waypoint_id: String,
    pub name: Option<String>,
    pub arrival_at: Timestamp,
    /// Meters in a straight line to the edge of the target's arrival radius.
    pub distance_m: f64,
    /// The target has been reached (every target has: the trip is at its last one).
    pub arrived: bool,
    /// The speed (m/s) the estimate used (0 when arrived).
    pub speed_mps: f64,
    /// The detour (road over straight line) the estimate used (1 when arrived).
    pub detour: f64,
}

impl Eta {
    /// The API's `eta`: `{target, stop_id (stops only), arrival_at, distance_remaining}`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "target": if self.target == WaypointKind::Stop { "stop" } else { "destination" },
            "arrival_at": self.arrival_at.format(None),
            "distance_remaining": self.distance_m.round(),
        });
        if self.target == WaypointKind::Stop {
            v["stop_id"] = self.waypoint_id.clone().into();
        }
        v
    }
}

/// `eta` of a trip response: the estimate or null.
pub fn json_of(eta: Option<&Eta>) -> Value {
    eta.map(Eta::to_json).unwrap_or(Value::Null)
}

fn targets(trip: &Trip) -> impl Iterator<Item = &Waypoint> {
    let kind = if trip.api == super::Api::V2 { WaypointKind::Stop } else { WaypointKind::Destination };
    trip.waypoints(kind)
}

/// Whether an estimate can exist at all (no need to read locations otherwise).
pub fn applies(trip: &Trip) -> bool {
    trip.state.is_active() && !trip.is_deleted && targets(trip).next().is_some()
}

/// The estimate for `trip` at `now` from its locations (oldest first; only those of the last
/// [`SPEED_LOOKBACK_SECONDS`] before `now` are used).
pub fn estimate(trip: &Trip, locations: &[Location], now: Timestamp) -> Option<Eta> {
    estimate_with(trip, locations, now, &Method::CHOSEN)
}

/// [`estimate`] by `method` (reading its `lookback_s` of `locations`).
pub fn estimate_with(trip: &Trip, locations: &[Location], now: Timestamp, method: &Method) -> Option<Eta> {
    if !applies(trip) {
        return None;
    }
    let Some(next) = targets(trip).find(|w| w.reached_at.is_none()) else {
        let last = targets(trip).last()?;
        return Some(Eta {
            target: last.kind,
            waypoint_id: last.id.clone(),
            name: last.name.clone(),
            arrival_at: last.reached_at?,
            distance_m: 0.0,
            arrived: true,
            speed_mps: 0.0,
            detour: 1.0,
        });
    };
    let since = now.0 - chrono::Duration::seconds(method.lookback_s);
    let from = locations.partition_point(|l| l.recorded_at.0 < since);
    let to = locations.partition_point(|l| l.recorded_at <= now);
    let recent = &locations[from..to.max(from)];
    let pauses = trip.pause_intervals(trip.ended_at.unwrap_or(now));
    let r = route::analyse(recent, &pauses);
    let latest = r.points.last()?;
    let age = (now.0 - latest.location.recorded_at.0).num_seconds();
    if age > LOST_AFTER_SECONDS {
        return None;
    }
    let mut speed = 0.0;
    for &window in method.speed_windows_s {
        speed += recent_speed(&r, &pauses, window, method.halt_cap_s)?;
    }
    let speed = speed / method.speed_windows_s.len() as f64;
    let distance = (latest.location.coordinates.distance_m(next.coordinates) - f64::from(next.radius_m)).max(0.0);
    let detour = match method.detour {
        DetourRule::Trip => detour(&r),
        DetourRule::AtScale { min_m } => detour_at_scale(&r, distance.max(min_m)).unwrap_or_else(|| detour(&r)),
        DetourRule::Prior => DETOUR_PRIOR,
    };
    let travel = chrono::Duration::milliseconds((distance * detour / speed * 1000.0).round() as i64);
    let still = latest.activity == Activity::Stop || age > route::GAP_SECONDS;
    let from = if still { now } else { latest.location.recorded_at };
    let arrival = Timestamp((from.0 + travel).max(now.0));
    Some(Eta {
        target: next.kind,
        waypoint_id: next.id.clone(),
        name: next.name.clone(),
        arrival_at: arrival,
        distance_m: distance,
        arrived: false,
        speed_mps: speed,
        detour,
    })
}

/// The trip's own detour so far (cleaned path over the straight line from its first to its
/// latest kept fix, bounded), blended with [`DETOUR_PRIOR`] while that line is short.
fn detour(r: &route::Route) -> f64 {
    let (Some(first), Some(last)) = (r.points.first(), r.points.last()) else { return DETOUR_PRIOR };
    let straight = first.location.coordinates.distance_m(last.location.coordinates);
    if straight <= 0.0 {
        return DETOUR_PRIOR;
    }
    let path: f64 = r.points.iter().map(|p| p.distance).sum();
    let learned = (path / straight).clamp(DETOUR_BOUNDS.0, DETOUR_BOUNDS.1);
    let weight = straight / (straight + DETOUR_PRIOR_M);
    weight * learned + (1.0 - weight) * DETOUR_PRIOR
}

/// The median path over chord of the pieces of the route whose chord first reaches `scale`
/// meters (one piece from each point, the next starting where the last one ended at the
/// earliest), bounded; None when no piece is that long.
fn detour_at_scale(r: &route::Route, scale: f64) -> Option<f64> {
    let p = &r.points;
    let mut along = Vec::with_capacity(p.len());
    let mut sum = 0.0;
    for q in p {
        sum += q.distance;
        along.push(sum);
    }
    let mut ratios = Vec::new();
    let mut b = 0;
    for a in 0..p.len() {
        b = b.max(a + 1);
        while b < p.len() && p[a].location.coordinates.distance_m(p[b].location.coordinates) < scale {
            b += 1;
        }
        if b == p.len() {
            break;
        }
        let chord = p[a].location.coordinates.distance_m(p[b].location.coordinates);
        ratios.push((along[b] - along[a]) / chord);
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    Some(ratios[ratios.len() / 2].clamp(DETOUR_BOUNDS.0, DETOUR_BOUNDS.1))
}

/// Meters per second over the last `window` seconds of active time (halts included, each at
/// most `halt_cap` seconds when given; pauses not), bounded; None with less than
/// [`MIN_MOVING_SECONDS`] of movement in it.
fn recent_speed(
    r: &route::Route,
    pauses: &[(Timestamp, Timestamp)],
    window: i64,
    halt_cap: Option<i64>,
) -> Option<f64> {
    let latest = r.points.last()?.location.recorded_at;
    let (mut meters, mut moving, mut start) = (0.0, 0.0, latest);
    let (mut halt, mut cut) = (0.0, 0.0);
    let gap = route::GAP_SECONDS as f64;
    let cap = halt_cap.map_or(f64::INFINITY, |c| c as f64);
    for pair in r.points.windows(2).rev() {
        let (a, b) = (&pair[0], &pair[1]);
        if route::active_seconds(a.location.recorded_at, latest, pauses) > window {
            break;
        }
        start = a.location.recorded_at;
        meters += b.distance;
        let dt = (b.location.recorded_at.0 - a.location.recorded_at.0).num_milliseconds() as f64 / 1000.0;
        if a.activity == Activity::Moving && b.activity == Activity::Moving && b.distance > 0.0 && dt <= gap {
            moving += dt;
            cut += (halt - cap).max(0.0);
            halt = 0.0;
        } else {
            halt += route::active_seconds(a.location.recorded_at, b.location.recorded_at, pauses) as f64;
        }
    }
    cut += (halt - cap).max(0.0);
    let seconds = route::active_seconds(start, latest, pauses) as f64 - cut;
    if moving < MIN_MOVING_SECONDS as f64 || seconds <= 0.0 {
        return None;
    }
    Some((meters / seconds).clamp(SPEED_BOUNDS.0, SPEED_BOUNDS.1))
}

/// The estimate for `trip` now, reading only the last [`SPEED_LOOKBACK_SECONDS`] of its fixes
/// (none read when no estimate can exist).
pub async fn for_trip(
    store: &dyn crate::store::Store,
    p: &crate::project::Project,
    trip: &Trip,
    now: Timestamp,
) -> Result<Option<Eta>, crate::error::ApiError> {
    if !applies(trip) {
        return Ok(None);
    }
    let since = Timestamp(now.0 - chrono::Duration::seconds(SPEED_LOOKBACK_SECONDS));
    let locs = super::trip_locations_since(store, p, trip, since, now).await?;
    Ok(estimate(trip, &locs, now))
}
