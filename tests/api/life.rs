//! Synthetic lives with ground truth, for insights: a day plan in local time (a zone with DST or a
//! fixed offset), sampled as a phone would (steady, sparse with silent nights, or only on arrival
//! and departure), Gaussian scatter at places, a few stray fixes that claim a good accuracy, and
//! travel between places. Seeded, so failures reproduce; the truth is kept beside the fixes.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

use crate::trace::{Rng, geodesic, offset};

pub type Pos = (f64, f64);
/// A local day plan: (from hour, to hour, place); time between entries is travel.
pub type DayPlan = Vec<(f64, f64, Pos)>;

#[derive(Debug, Clone, Copy)]
pub enum Sampling {
    /// A fix every so many seconds.
    Every(i64),
    /// A fix every `min..max` seconds at random; nothing from 23:00 to 07:00 local.
    Sparse(i64, i64),
    /// One fix on arrival at a place and one on departure, nothing in between or on the way.
    ArrivalDeparture,
}

/// What the insights should find.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    pub home: Option<Pos>,
    pub work: Option<Pos>,
    /// Places that are points of interest.
    pub pois: Vec<Pos>,
    /// Places that may be reported as POIs without being wrong (an old home), counted neither way.
    pub tolerated: Vec<Pos>,
}

pub struct Life {
    pub fixes: Vec<Value>,
    pub truth: Truth,
}

/// A visit in UTC.
struct Visit {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    at: Pos,
}

fn to_utc(zone: &str, local: NaiveDateTime) -> DateTime<Utc> {
    if let Ok(tz) = zone.parse::<Tz>() {
        // A local time skipped by DST is taken an hour later.
        return (0..3)
            .find_map(|h| tz.from_local_datetime(&(local + Duration::hours(h))).earliest())
            .map(|t| t.with_timezone(&Utc))
            .expect("a local time");
    }
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let d: String = zone.chars().filter(char::is_ascii_digit).collect();
    let secs = sign * (d[..2].parse::<i64>().unwrap() * 3600 + d[2..4].parse::<i64>().unwrap() * 60);
    (local - Duration::seconds(secs)).and_utc()
}

/// Live `days` days from `start` by `plan(day, index)` in `zone`, sampled by `sampling`.
pub fn live(
    start: NaiveDate,
    days: i64,
    zone: &str,
    sampling: Sampling,
    seed: u64,
    plan: impl Fn(NaiveDate, i64) -> DayPlan,
) -> Vec<Value> {
    let mut visits: Vec<Visit> = Vec::new();
    for i in 0..days {
        let day = start + Duration::days(i);
        let midnight = day.and_hms_opt(0, 0, 0).unwrap();
        for (a, b, at) in plan(day, i) {
            let local = |h: f64| midnight + Duration::seconds((h * 3600.0).round() as i64);
            let (from, to) = (to_utc(zone, local(a)), to_utc(zone, local(b)));
            match visits.last_mut() {
                Some(v) if v.at == at && (from - v.to).num_seconds().abs() <= 60 => v.to = to,
                _ => visits.push(Visit { from, to, at }),
            }
        }
    }
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut fix = |rng: &mut Rng, at: DateTime<Utc>, p: Pos, still: bool| {
        let (pos, acc) = if still && rng.uniform() < 0.01 {
            // A stray fix far off that claims a good accuracy.
            (offset(p.0, p.1, 300.0 + rng.uniform() * 400.0, 200.0), 15.0)
        } else if still {
            (offset(p.0, p.1, rng.normal() * 8.0, rng.normal() * 8.0), 10.0 + rng.uniform() * 10.0)
        } else {
            (p, 15.0)
        };
        out.push(json!({"coordinates": [pos.0, pos.1], "recorded_at": at.format("%Y-%m-%dT%H:%M:%S").to_string(),
            "accuracy": acc, "timezone_offset": zone}));
    };
    if let Sampling::ArrivalDeparture = sampling {
        for v in &visits {
            fix(&mut rng, v.from, v.at, true);
            fix(&mut rng, v.to, v.at, true);
        }
        return out;
    }
    let (Some(first), Some(last)) = (visits.first(), visits.last()) else { return out };
    let (mut t, end) = (first.from, last.to);
    let mut k = 0;
    while t <= end {
        while k + 1 < visits.len() && visits[k].to < t {
            k += 1;
        }
        let v = &visits[k];
        if v.from <= t && t <= v.to {
            fix(&mut rng, t, v.at, true);
        } else if k > 0 {
            // On the way from the previous place to this one.
            let p = &visits[k - 1];
            let f = (t - p.to).num_seconds() as f64 / (v.from - p.to).num_seconds().max(1) as f64;
            fix(&mut rng, t, (p.at.0 + (v.at.0 - p.at.0) * f, p.at.1 + (v.at.1 - p.at.1) * f), false);
        }
        t = match sampling {
            Sampling::Every(s) => t + Duration::seconds(s),
            Sampling::Sparse(a, b) => {
                let next = t + Duration::seconds(a + ((b - a) as f64 * rng.uniform()) as i64);
                let off = next.naive_utc() - to_utc(zone, next.naive_utc()).naive_utc();
                let local = next.naive_utc() + off;
                match local.hour() {
                    // Silent nights: the phone speaks again at 07:00 local.
                    h if h >= 23 => to_utc(zone, (local.date() + Duration::days(1)).and_hms_opt(7, 0, 0).unwrap()),
                    h if h < 7 => to_utc(zone, local.date().and_hms_opt(7, 0, 0).unwrap()),
                    _ => next,
                }
            }
            Sampling::ArrivalDeparture => unreachable!(),
        };
    }
    out
}

/// Centre of an insight's polygon (area centroid).
pub fn centre(i: &Value) -> Pos {
    let ring: Vec<Pos> = i["geometry"]["coordinates"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    let (mut a, mut cx, mut cy) = (0.0, 0.0, 0.0);
    for w in ring.windows(2) {
        let c = w[0].0 * w[1].1 - w[1].0 * w[0].1;
        a += c;
        cx += (w[0].0 + w[1].0) * c;
        cy += (w[0].1 + w[1].1) * c;
    }
    if a.abs() < 1e-18 {
        return ring[0];
    }
    (cx / (3.0 * a), cy / (3.0 * a))
}

/// Largest distance (meters) from an insight's centre to its polygon's corners.
pub fn reach_m(i: &Value) -> f64 {
    let c = centre(i);
    i["geometry"]["coordinates"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| geodesic(c, (p[0].as_f64().unwrap(), p[1].as_f64().unwrap())))
        .fold(0.0, f64::max)
}

/// How an answer compares with the truth.
#[derive(Debug, Clone, Default)]
pub struct Score {
    pub home_m: Option<f64>,
    pub work_m: Option<f64>,
    pub poi_precision: f64,
    pub poi_recall: f64,
}

/// A POI matches a true place within this distance (meters).
pub const MATCH_M: f64 = 60.0;

pub fn score(truth: &Truth, home: &[Value], work: &[Value], pois: &[Value]) -> Score {
    let err = |t: Option<Pos>, got: &[Value]| match (t, got.first()) {
        (Some(t), Some(g)) => Some(geodesic(t, centre(g))),
        _ => None,
    };
    let got: Vec<Pos> = pois.iter().map(centre).collect();
    let counted: Vec<&Pos> =
        got.iter().filter(|g| !truth.tolerated.iter().any(|t| geodesic(**g, *t) < MATCH_M)).collect();
    let right = counted.iter().filter(|g| truth.pois.iter().any(|t| geodesic(***g, *t) < MATCH_M)).count();
    let found = truth.pois.iter().filter(|t| got.iter().any(|g| geodesic(*g, **t) < MATCH_M)).count();
    Score {
        home_m: err(truth.home, home),
        work_m: err(truth.work, work),
        poi_precision: if counted.is_empty() { 1.0 } else { right as f64 / counted.len() as f64 },
        poi_recall: if truth.pois.is_empty() { 1.0 } else { found as f64 / truth.pois.len() as f64 },
    }
}
