//! Places: stays clustered by their centres (DBSCAN, single linkage at [`PLACE_RADIUS_M`], in a
//! local metric projection per region of [`REGION_DEG`]), with what they add up to in local
//! time. The reference the per-user aggregate is held to. A stay's weight decays with its age
//! counted from the end of the user's latest stay ([`HALF_LIFE_DAYS`]), not from the request's
//! time, so an answer depends on the history only. See docs/insights.md, "Places (the reference)".

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Datelike, Duration, NaiveDate, Timelike, Weekday};
use geo::{Buffer, ConvexHull, Coord, Dbscan, MultiPoint, Point};

use super::stays::Stay;
use crate::geometry::LngLat;
use crate::time::Timestamp;

/// Two stays whose centres are within this distance (meters) belong to the same place (DBSCAN's
/// epsilon; chains of such stays too).
pub const PLACE_RADIUS_M: f64 = 50.0;
/// Half-life (days) of a stay's weight.
pub const HALF_LIFE_DAYS: f64 = 30.0;
/// Stays whose centres are within this many degrees (about 5 km; by cells of 0.01°) are projected
/// together.
pub const REGION_DEG: f64 = 0.05;
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
pub(super) struct Split {
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

pub(super) fn split(s: &Stay) -> Split {
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
pub(super) struct Plane {
    lng0: f64,
    lat0: f64,
    kx: f64,
}

impl Plane {
    pub(super) fn around(ps: &[LngLat]) -> Self {
        let n = ps.len().max(1) as f64;
        let (lng0, lat0) = (ps.iter().map(|p| p.lng).sum::<f64>() / n, ps.iter().map(|p| p.lat).sum::<f64>() / n);
        Plane { lng0, lat0, kx: M_PER_DEG_LNG_EQUATOR * lat0.to_radians().cos().max(0.01) }
    }
    pub(super) fn to_xy(&self, p: LngLat) -> Point<f64> {
        Point::new((p.lng - self.lng0) * self.kx, (p.lat - self.lat0) * M_PER_DEG_LAT)
    }
    pub(super) fn to_lnglat(&self, c: Coord<f64>) -> [f64; 2] {
        [self.lng0 + c.x / self.kx, self.lat0 + c.y / M_PER_DEG_LAT]
    }
}

/// Group indices by DBSCAN label (every point labelled, `min_samples` 1).
fn groups(labels: Vec<Option<usize>>) -> Vec<Vec<usize>> {
    let mut by: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut alone = Vec::new();
    for (i, l) in labels.into_iter().enumerate() {
        match l {
            Some(l) => by.entry(l).or_default().push(i),
            None => alone.push(vec![i]),
        }
    }
    by.into_values().chain(alone).collect()
}

/// Cluster stays into places, most weight first.
pub fn places(mut stays: Vec<Stay>) -> Vec<Place> {
    stays.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.id.cmp(&b.id)));
    let Some(latest) = stays.iter().map(|s| s.end).max() else { return Vec::new() };
    let weight_of = |s: &Stay| {
        let age_days = (latest.0 - s.end.0).num_seconds().max(0) as f64 / 86_400.0;
        s.dwell_s() as f64 * 0.5f64.powf(age_days / HALF_LIFE_DAYS)
    };
    // Regions: DBSCAN over the distinct cells of a 0.01° grid that hold stays (a handful per
    // city), not over every stay (a year's stays are all within REGION_DEG of each other).
    let cell = |s: &Stay| ((s.centre.lng * 100.0).round() as i64, (s.centre.lat * 100.0).round() as i64);
    let mut cells: Vec<(i64, i64)> = stays.iter().map(cell).collect();
    cells.sort_unstable();
    cells.dedup();
    let cell_points: Vec<Point<f64>> =
        cells.iter().map(|&(x, y)| Point::new(x as f64 / 100.0, y as f64 / 100.0)).collect();
    let mut region_of = vec![0; cells.len()];
    for (r, members) in groups(cell_points.as_slice().dbscan(REGION_DEG, 1)).into_iter().enumerate() {
        for m in members {
            region_of[m] = r;
        }
    }
    let mut regions: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, s) in stays.iter().enumerate() {
        let c = cells.binary_search(&cell(s)).unwrap_or(0);
        regions.entry(region_of[c]).or_default().push(i);
    }
    let mut out = Vec::new();
    for region in regions.into_values() {
        let centres: Vec<LngLat> = region.iter().map(|&i| stays[i].centre).collect();
        let plane = Plane::around(&centres);
        let xy: Vec<Point<f64>> = centres.iter().map(|&c| plane.to_xy(c)).collect();
        for cluster in groups(xy.as_slice().dbscan(PLACE_RADIUS_M, 1)) {
            let members: Vec<(Point<f64>, &Stay)> = cluster.iter().map(|&k| (xy[k], &stays[region[k]])).collect();
            out.push(place(&plane, &members, &weight_of));
        }
    }
    out.sort_by(|a, b| b.weight.total_cmp(&a.weight).then_with(|| a.first_id.cmp(&b.first_id)));
    out
}

/// A place's polygon: the convex hull of the [`HULL_SHARE`] of its points (stay centres, each
/// standing for `count` stays) nearest the centre and of `last_fix` (the fix an answer shows as
/// `last_visited`, which is then inside it), buffered by their median accuracy.
pub(super) fn outline(
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

fn place(plane: &Plane, members: &[(Point<f64>, &Stay)], weight_of: &dyn Fn(&Stay) -> f64) -> Place {
    let weights: Vec<f64> = members.iter().map(|(_, s)| weight_of(s).max(1e-9)).collect();
    let dist = |a: Point<f64>, b: Point<f64>| (a.x() - b.x()).hypot(a.y() - b.y());
    // Weighted medoid.
    let cost = |k: usize| members.iter().zip(&weights).map(|((q, _), w)| w * dist(members[k].0, *q)).sum::<f64>();
    let medoid = (0..members.len()).map(|k| (k, cost(k))).min_by(|a, b| a.1.total_cmp(&b.1)).map_or(0, |(k, _)| k);
    let points: Vec<(Point<f64>, f64, usize)> = members.iter().map(|(p, s)| (*p, s.accuracy_m, 1)).collect();
    let first = members.iter().map(|(_, s)| *s).min_by_key(|s| (s.start, &s.id)).expect("a place has stays");
    let last = members.iter().map(|(_, s)| *s).max_by_key(|s| s.end).expect("a place has stays");
    let polygon = outline(plane, members[medoid].0, &points, plane.to_xy(last.last.coordinates));

    let mut p = Place {
        stays: members.len(),
        first_id: first.id.clone(),
        first_start: first.start,
        last: last.clone(),
        centre: members[medoid].1.centre,
        polygon,
        dwell_s: 0,
        weight: weights.iter().sum(),
        weekday_weight: 0.0,
        nights: BTreeMap::new(),
        night_s: 0,
        days: 0,
        visit_days: 0,
        weeks: BTreeMap::new(),
    };
    let mut per_day: BTreeMap<NaiveDate, i64> = BTreeMap::new();
    let mut visit_days = BTreeSet::new();
    let mut weeks: BTreeMap<NaiveDate, (i64, BTreeSet<NaiveDate>)> = BTreeMap::new();
    for ((_, s), w) in members.iter().zip(&weights) {
        let sp = split(s);
        p.dwell_s += s.dwell_s();
        if s.dwell_s() > 0 {
            p.weekday_weight += w * sp.weekday_s as f64 / s.dwell_s() as f64;
        }
        for (d, secs) in sp.nights {
            *p.nights.entry(d).or_default() += secs;
            p.night_s += secs;
        }
        for (d, secs) in sp.per_day {
            *per_day.entry(d).or_default() += secs;
        }
        for (wk, (secs, days)) in sp.weeks {
            let e = weeks.entry(wk).or_default();
            e.0 += secs;
            e.1.extend(days);
        }
        visit_days.insert(s.zone().local(s.start.0).date());
    }
    p.days = per_day.values().filter(|s| **s >= DAY_MIN_SECONDS).count();
    p.visit_days = visit_days.len();
    p.weeks = weeks.into_iter().map(|(wk, (secs, days))| (wk, (secs, days.len()))).collect();
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stay(i: u32, day: u32, dx_m: f64) -> Stay {
        let at = |h: u32| format!("2024-04-{day:02}T{h:02}:00:00");
        serde_json::from_value(serde_json::json!({
            "id": format!("{i:024x}"), "centre": [13.4 + dx_m / 67_800.0, 52.52], "start": at(8), "end": at(17),
            "accuracy_m": 12.0, "fixes": 50,
            "last": {"id": format!("{i:024x}"), "coordinates": [13.4, 52.52], "recorded_at": at(17)},
        }))
        .unwrap()
    }

    #[test]
    fn stays_at_one_point_make_a_round_place_and_a_far_one_its_own() {
        let mut stays: Vec<Stay> = (1..=12).map(|d| stay(d, d, 0.0)).collect();
        stays.push(stay(13, 13, 30.0)); // chained: within 50 m
        stays.push(stay(14, 14, 400.0)); // elsewhere
        let ps = places(stays);
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].stays, 13);
        assert_eq!(ps[0].centre, LngLat { lng: 13.4, lat: 52.52 }, "the medoid is a real stay");
        let ring = &ps[0].polygon;
        assert!(ring.len() >= 4 && ring.first() == ring.last(), "{ring:?}");
        // The 90% nearest leave the 30 m stay out: a circle of the 12 m margin.
        let reach = ring.iter().map(|c| ps[0].centre.distance_m(LngLat { lng: c[0], lat: c[1] })).fold(0.0, f64::max);
        assert!((11.0..13.5).contains(&reach), "{reach}");
        assert!(ps[1].polygon.len() >= 4);
        assert_eq!(ps[0].days, 13);
    }
}
