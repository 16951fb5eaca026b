//! The reference the insights aggregate is held to: every stay clustered from scratch (DBSCAN,
//! single linkage at `PLACE_RADIUS_M`, in a local metric projection per region of
//! [`REGION_DEG`]). No request runs it (the aggregate answers); `insights_aggregate.rs` compares
//! the two and `insights_bench` times both. See docs/insights.md, "Places (the reference)".

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use geo::{Dbscan, Point};
use serde_json::Value;
use shared::domain::insights::places::{DAY_MIN_SECONDS, HALF_LIFE_DAYS, PLACE_RADIUS_M, Place, Plane, outline, split};
use shared::domain::insights::{self, Kind, Stay};
use shared::geometry::LngLat;
use shared::project::Project;
use shared::store::Store;

/// Stays whose centres are within this many degrees (about 5 km; by cells of 0.01°) are projected
/// together.
pub const REGION_DEG: f64 = 0.05;

/// The insights of `kind` for a user from every stay, clustered from scratch.
pub async fn insights_from_stays(store: &dyn Store, p: &Project, user_id: &str, kind: Kind) -> Vec<Value> {
    insights::answer(&places(insights::stays(store, p, user_id).await.expect("stays")), kind)
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
