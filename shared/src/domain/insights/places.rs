//! Places: stays that belong together (within [`PLACE_RADIUS_M`]) and what they add up to in
//! local time, as the per-user aggregate keeps them. A stay's weight decays with its age counted
//! from the end of the user's latest stay ([`HALF_LIFE_DAYS`]), not from the request's time, so
//! an answer depends on the history only. The reference clustering the aggregate is held to is
//! in the tests (`tests/api/insights_oracle.rs`). See docs/insights.md.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Datelike, Duration, NaiveDate, Timelike, Weekday};
use geo::{Buffer, ConvexHull, Coord, MultiPoint, Point};

use super::stays::Stay;
use crate::geometry::LngLat;
use crate::time::Timestamp;

/// Two stays whose centres are within this distance (meters) belong to the same place (DBSCAN's
/// epsilon; chains of such stays too).
pub const PLACE_RADIUS_M: f64 = 50.0;
/// Half-life (days) of a stay's weight.
pub const HALF_LIFE_DAYS: f64 = 30.0;
/// Share of a place's stays, nearest its centre first, that its polygon covers.
pub const HULL_SHARE: f64 = 0.9;
/// Bounds (meters) of the margin around a place's stays in its polygon.
pub const MIN_BUFFER_M: f64 = 10.0;
pub const MAX_BUFFER_M: f64 = 50.0;
/// A local day counts for a place when at least this long (seconds) was spent there that day, so
/// a late visit running past midnight does not count twice.
pub const DAY_MIN_SECONDS: i64 = 1800;

const M_PER_DEG_LAT: f64 = 110_574.0;
const M_PER_DEG_LNG_EQUATOR: f64 = 111_320.0;

/// A place: stays clustered together, with what they add up to (the figures the insight rules
/// read, from all its stays or from the maintained aggregate alike).
#[derive(Debug, Clone)]
pub struct Place {
    /// How many stays it has.
    pub stays: usize,
    /// Id and start of its earliest stay (the place's id comes from it).
    pub first_id: String,
    pub first_start: Timestamp,
    /// Its stay that ended last.
    pub last: Stay,
    pub centre: LngLat,
    /// Closed ring, counter-clockwise, `[lng, lat]`.
    pub polygon: Vec<[f64; 2]>,
    pub dwell_s: i64,
    /// Dwell weighted by recency (seconds).
    pub weight: f64,
    /// Weekday (Monday-Friday) dwell weighted by recency (seconds).
    pub weekday_weight: f64,
    /// Seconds between 22:00 and 06:00 local, by the date the night began on (the aggregate
    /// keeps only the nights the move rule can still look at).
    pub nights: BTreeMap<NaiveDate, i64>,
    /// All its night seconds.
    pub night_s: i64,
    /// Local dates with at least [`DAY_MIN_SECONDS`] there.
    pub days: usize,
    /// Local dates a stay there began on (a visit counted per day, however short or long).
    pub visit_days: usize,
    /// By week (its Monday): weekday seconds and the number of weekdays with any (the aggregate
    /// keeps only the work rule's window).
    pub weeks: BTreeMap<NaiveDate, (i64, usize)>,
}

/// Of a stay, in its local time (daylight saving time followed): night seconds by the date the
/// night began, seconds by date, weekday seconds by week.
pub struct Split {
    pub nights: BTreeMap<NaiveDate, i64>,
    pub per_day: BTreeMap<NaiveDate, i64>,
    pub weeks: BTreeMap<NaiveDate, (i64, BTreeSet<NaiveDate>)>,
    pub weekday_s: i64,
}

pub fn is_weekend(d: Weekday) -> bool {
    matches!(d, Weekday::Sat | Weekday::Sun)
}

/// The Monday of a date's week.
pub fn monday_of(d: NaiveDate) -> NaiveDate {
    d - Duration::days(d.weekday().num_days_from_monday().into())
}

pub fn split(s: &Stay) -> Split {
    let zone = s.zone();
    let mut out = Split { nights: BTreeMap::new(), per_day: BTreeMap::new(), weeks: BTreeMap::new(), weekday_s: 0 };
    let (mut t, end) = (s.start.0, s.end.0);
    // Walk local hour by local hour.
    while t < end {
        let local = zone.local(t);
        let to_hour = 3600 - i64::from(local.minute() * 60 + local.second());
        let next = (t + Duration::seconds(to_hour.max(1))).min(end);
        let secs = (next - t).num_seconds();
        let d = local.date();
        match local.hour() {
            h if h >= 22 => *out.nights.entry(d).or_default() += secs,
            h if h < 6 => *out.nights.entry(d.pred_opt().unwrap_or(d)).or_default() += secs,
            _ => {}
        }
        *out.per_day.entry(d).or_default() += secs;
        if !is_weekend(d.weekday()) {
            out.weekday_s += secs;
            let w = out.weeks.entry(monday_of(d)).or_default();
            w.0 += secs;
            w.1.insert(d);
        }
        t = next;
    }
    out
}

/// A local plane (meters) around a reference position.
pub struct Plane {
    lng0: f64,
    lat0: f64,
    kx: f64,
}

impl Plane {
    pub fn around(ps: &[LngLat]) -> Self {
        let n = ps.len().max(1) as f64;
        let (lng0, lat0) = (ps.iter().map(|p| p.lng).sum::<f64>() / n, ps.iter().map(|p| p.lat).sum::<f64>() / n);
        Plane { lng0, lat0, kx: M_PER_DEG_LNG_EQUATOR * lat0.to_radians().cos().max(0.01) }
    }
    pub fn to_xy(&self, p: LngLat) -> Point<f64> {
        Point::new((p.lng - self.lng0) * self.kx, (p.lat - self.lat0) * M_PER_DEG_LAT)
    }
    pub fn to_lnglat(&self, c: Coord<f64>) -> [f64; 2] {
        [self.lng0 + c.x / self.kx, self.lat0 + c.y / M_PER_DEG_LAT]
    }
}

/// A place's polygon: the convex hull of the [`HULL_SHARE`] of its points (stay centres, each
/// standing for `count` stays) nearest the centre and of `last_fix` (the fix an answer shows as
/// `last_visited`, which is then inside it), buffered by their median accuracy.
pub fn outline(
    plane: &Plane,
    centre_xy: Point<f64>,
    points: &[(Point<f64>, f64, usize)],
    last_fix: Point<f64>,
) -> Vec<[f64; 2]> {
    let dist = |a: Point<f64>, b: Point<f64>| (a.x() - b.x()).hypot(a.y() - b.y());
    let mut near: Vec<&(Point<f64>, f64, usize)> = points.iter().collect();
    near.sort_by(|a, b| dist(a.0, centre_xy).total_cmp(&dist(b.0, centre_xy)));
    let n: usize = near.iter().map(|p| p.2).sum();
    let keep = if n >= 10 { (n as f64 * HULL_SHARE).ceil() as usize } else { n };
    let (mut taken, mut acc) = (0, Vec::new());
    near.retain(|p| {
        let take = taken < keep.max(1);
        if take {
            taken += p.2;
            acc.extend(std::iter::repeat_n(p.1, p.2));
        }
        take
    });
    let margin = crate::stats::median(&mut acc).unwrap_or(0.0).clamp(MIN_BUFFER_M, MAX_BUFFER_M);
    let hull = MultiPoint::new(near.iter().map(|p| p.0).chain([last_fix]).collect()).convex_hull();
    let corners = MultiPoint::new(hull.exterior().points().collect());
    let mut shape = corners.buffer(margin).convex_hull();
    if shape.exterior().0.len() < 4 {
        shape = MultiPoint::new(vec![centre_xy, last_fix]).buffer(margin).convex_hull();
    }
    shape.exterior().coords().map(|&c| plane.to_lnglat(c)).collect()
}
