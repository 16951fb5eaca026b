//! Insights: home, work and frequently visited places, learned from stays.
//!
//! **Stays** are detected as locations arrive (the ingest hook): a stay is a run of fixes within
//! [`STAY_RADIUS_M`] of its running centre lasting at least [`MIN_STAY_SECONDS`], with no gap
//! longer than [`MAX_GAP_SECONDS`]; fixes less accurate than [`MAX_ACCURACY_M`] are ignored. A
//! stay keeps its start, end, centre, bounds, its last fix and the local offset of its records
//! (`timezone_offset` `+hhmm`, else UTC). Stays are stored per user (`<project>#ST#<user>`), and
//! the run in progress as `<project>#SS#<user>`; insights read only these, never raw history.
//! Locations not newer than the last one evaluated (late batches) are not used.
//!
//! **Places** are stays clustered greedily: a stay joins the place whose centre is within
//! [`PLACE_RADIUS_M`] of its own. For each place: total dwell, night dwell (22:00-06:00 local),
//! weekday dwell (Monday-Friday, any hour), the distinct local days it was visited on.
//! - home: the place with the most dwell overall, on at least [`MIN_DAYS`] distinct days, night
//!   dwell breaking ties. For most people that is where nights are spent; counting every hour
//!   also finds the home of someone who works nights and sleeps by day;
//! - work: the place other than home with the most weekday dwell (any hour, so night shifts
//!   count), on at least [`MIN_DAYS`] distinct weekdays;
//! - points of interest: other places visited on at least 2 distinct days.
//!
//! Confidence: `High` from 14 distinct days and at least 10% of all dwell, `Medium` from 5
//! days, else `Low` (POIs: `High` from 8 days, `Medium` from 4). Results are computed on each
//! request from the stored stays (no cache: a year of stays is a few thousand small items).
//! `type` of a POI is `poi`: naming places (road, residential, ...) needs a reverse geocoder,
//! which Waymark does not have; [`PlaceNamer`] is where one would plug in.

use std::collections::BTreeSet;

use chrono::{Datelike, Duration, FixedOffset, NaiveDate, Timelike, Weekday};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Project;
use crate::domain::locations::Location;
use crate::error::ApiError;
use crate::geometry::{GeoPoint, LngLat};
use crate::ids::id_at;
use crate::store::{Cond, Query, SkRange, Store, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;

pub const STAY_RADIUS_M: f64 = 80.0;
pub const MIN_STAY_SECONDS: i64 = 600;
pub const MAX_GAP_SECONDS: i64 = 3 * 3600;
pub const MAX_ACCURACY_M: f64 = 50.0;
pub const PLACE_RADIUS_M: f64 = 120.0;
pub const MIN_DAYS: usize = 3;
/// Margin (meters) around a place's stays in its `geometry`.
const GEOMETRY_MARGIN_M: f64 = 20.0;

/// Where a reverse geocoder would plug in: the class of a place (`road`, `residential`, ...).
pub trait PlaceNamer {
    fn class_of(&self, centre: LngLat) -> Option<String>;
}

/// Waymark has no geocoder: every POI is of type `poi`.
pub struct NoGeocoder;

impl PlaceNamer for NoGeocoder {
    fn class_of(&self, _centre: LngLat) -> Option<String> {
        None
    }
}

/// A detected stay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stay {
    pub id: String,
    pub centre: LngLat,
    pub start: Timestamp,
    pub end: Timestamp,
    /// Offset east of UTC, seconds.
    pub offset_s: i32,
    pub min: LngLat,
    pub max: LngLat,
    pub last: Location,
}

/// The run of fixes in progress.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Run {
    n: f64,
    sum_lng: f64,
    sum_lat: f64,
    first: Option<Location>,
    last: Option<Location>,
    min: Option<LngLat>,
    max: Option<LngLat>,
    offset_s: i32,
    version: u64,
}

impl Run {
    fn centre(&self) -> LngLat {
        LngLat { lng: self.sum_lng / self.n.max(1.0), lat: self.sum_lat / self.n.max(1.0) }
    }
    fn start(l: &Location, version: u64) -> Self {
        Run {
            n: 1.0,
            sum_lng: l.coordinates.lng,
            sum_lat: l.coordinates.lat,
            first: Some(l.clone()),
            last: Some(l.clone()),
            min: Some(l.coordinates),
            max: Some(l.coordinates),
            offset_s: offset_of(l),
            version,
        }
    }
    fn add(&mut self, l: &Location) {
        self.n += 1.0;
        self.sum_lng += l.coordinates.lng;
        self.sum_lat += l.coordinates.lat;
        let (mn, mx) = (self.min.unwrap_or(l.coordinates), self.max.unwrap_or(l.coordinates));
        self.min = Some(LngLat { lng: mn.lng.min(l.coordinates.lng), lat: mn.lat.min(l.coordinates.lat) });
        self.max = Some(LngLat { lng: mx.lng.max(l.coordinates.lng), lat: mx.lat.max(l.coordinates.lat) });
        self.last = Some(l.clone());
        self.offset_s = offset_of(l);
    }
    /// The run as a stay, if it lasted long enough.
    fn stay(&self) -> Option<Stay> {
        let (first, last) = (self.first.as_ref()?, self.last.as_ref()?);
        ((last.recorded_at.0 - first.recorded_at.0).num_seconds() >= MIN_STAY_SECONDS).then(|| Stay {
            id: first.id.clone(),
            centre: self.centre(),
            start: first.recorded_at,
            end: last.recorded_at,
            offset_s: self.offset_s,
            min: self.min.unwrap_or(first.coordinates),
            max: self.max.unwrap_or(first.coordinates),
            last: last.clone(),
        })
    }
}

/// `timezone_offset` of a record as seconds east of UTC (`+hhmm`, `-hh:mm`); 0 when absent.
fn offset_of(l: &Location) -> i32 {
    let Some(s) = l.timezone_offset.as_deref() else { return 0 };
    let s = s.replace(':', "");
    let (sign, digits) = match s.as_bytes().first() {
        Some(b'+') => (1, &s[1..]),
        Some(b'-') => (-1, &s[1..]),
        _ => return 0,
    };
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    let (h, m): (i32, i32) = (digits[..2].parse().unwrap_or(0), digits[2..].parse().unwrap_or(0));
    if h > 14 || m > 59 { 0 } else { sign * (h * 3600 + m * 60) }
}

fn stays_pk(pid: &str, uid: &str) -> String {
    format!("{pid}#ST#{uid}")
}
fn run_pk(pid: &str, uid: &str) -> String {
    format!("{pid}#SS#{uid}")
}

/// The ingest hook: extend the run in progress, closing stays as the user moves on.
/// What a range of new fixes changes: the run in progress (a state, written in the processor's
/// transaction) and the stays it closed (facts with deterministic ids: the first fix's id).
pub struct InsightsPlan {
    pub run: WriteOp,
    pub stays: Vec<crate::store::Item>,
}

/// Extend the user's stays with `fixes` (new, past the processor's watermark, in order).
pub async fn plan(store: &dyn Store, p: &Project, user_id: &str, fixes: &[Location]) -> Result<InsightsPlan, ApiError> {
    let run: Option<Run> =
        store.get(Table::Main, &run_pk(&p.project_id, user_id), "-").await?.map(from_item).transpose()?;
    let version = run.as_ref().map_or(0, |r| r.version);
    let mut run = run.unwrap_or_default();
    let mut closed = Vec::new();
    for l in fixes.iter().filter(|l| l.horizontal_accuracy.or(l.accuracy).is_none_or(|a| a <= MAX_ACCURACY_M)) {
        let same = run.last.as_ref().is_some_and(|last| {
            run.centre().distance_m(l.coordinates) <= STAY_RADIUS_M
                && (l.recorded_at.0 - last.recorded_at.0).num_seconds() <= MAX_GAP_SECONDS
        });
        if same {
            run.add(l);
        } else {
            closed.extend(run.stay());
            run = Run::start(l, run.version);
        }
    }
    run.version = version + 1;
    let run_op = WriteOp::Put {
        table: Table::Main,
        item: to_item(&run_pk(&p.project_id, user_id), "-", &run)?,
        cond: Cond::None,
    };
    let stays_pk = stays_pk(&p.project_id, user_id);
    let stays = closed.iter().map(|s| to_item(&stays_pk, &s.id, s)).collect::<Result<Vec<_>, _>>()?;
    Ok(InsightsPlan { run: run_op, stays })
}

/// The user's stays, the run in progress included when it is long enough.
pub async fn stays(store: &dyn Store, p: &Project, user_id: &str) -> Result<Vec<Stay>, ApiError> {
    let mut out: Vec<Stay> = store
        .query(Table::Main, &Query::new(stays_pk(&p.project_id, user_id), SkRange::All))
        .await?
        .items
        .into_iter()
        .map(from_item)
        .collect::<Result<_, _>>()?;
    if let Some(run) =
        store.get(Table::Main, &run_pk(&p.project_id, user_id), "-").await?.map(from_item::<Run>).transpose()?
    {
        out.extend(run.stay());
    }
    Ok(out)
}

/// A place: stays clustered together, with what they add up to.
#[derive(Debug, Clone)]
pub struct Place {
    pub stays: Vec<Stay>,
    pub centre: LngLat,
    pub dwell_s: i64,
    pub night_s: i64,
    pub weekday_s: i64,
    pub days: BTreeSet<NaiveDate>,
    pub weekdays: BTreeSet<NaiveDate>,
}

/// A local day counts for a place when at least this long (seconds) was spent there that day,
/// so a late visit running past midnight does not count twice.
const DAY_MIN_SECONDS: i64 = 1800;

/// Of a stay, in its local time: seconds inside 22:00-06:00, seconds on weekdays, the local days
/// and weekdays with at least DAY_MIN_SECONDS there.
fn split(s: &Stay) -> (i64, i64, BTreeSet<NaiveDate>, BTreeSet<NaiveDate>) {
    let tz = FixedOffset::east_opt(s.offset_s).unwrap_or(FixedOffset::east_opt(0).expect("UTC"));
    let (mut t, end) = (s.start.0.with_timezone(&tz), s.end.0.with_timezone(&tz));
    let (mut night, mut weekday) = (0, 0);
    let mut per_day: std::collections::BTreeMap<NaiveDate, i64> = std::collections::BTreeMap::new();
    // Walk hour by hour, cut at hour boundaries.
    while t < end {
        let next_hour = (t + Duration::hours(1)).with_minute(0).and_then(|x| x.with_second(0)).unwrap_or(end).min(end);
        if next_hour <= t {
            break;
        }
        let secs = (next_hour - t).num_seconds();
        if t.hour() >= 22 || t.hour() < 6 {
            night += secs;
        }
        if !is_weekend(t.weekday()) {
            weekday += secs;
        }
        *per_day.entry(t.date_naive()).or_default() += secs;
        t = next_hour;
    }
    let days: BTreeSet<NaiveDate> =
        per_day.into_iter().filter(|(_, s)| *s >= DAY_MIN_SECONDS).map(|(d, _)| d).collect();
    let wdays = days.iter().copied().filter(|d| !is_weekend(d.weekday())).collect();
    (night, weekday, days, wdays)
}

fn is_weekend(d: Weekday) -> bool {
    matches!(d, Weekday::Sat | Weekday::Sun)
}

/// Cluster stays into places, biggest dwell first.
pub fn places(mut stays: Vec<Stay>) -> Vec<Place> {
    stays.sort_by_key(|s| std::cmp::Reverse((s.end.0 - s.start.0).num_seconds()));
    let mut places: Vec<Place> = Vec::new();
    for s in stays {
        let (night, weekday, days, wdays) = split(&s);
        let dwell = (s.end.0 - s.start.0).num_seconds();
        let near = places.iter_mut().find(|p| p.centre.distance_m(s.centre) <= PLACE_RADIUS_M);
        match near {
            Some(p) => {
                let w = p.dwell_s as f64 / (p.dwell_s + dwell).max(1) as f64;
                p.centre = LngLat {
                    lng: p.centre.lng * w + s.centre.lng * (1.0 - w),
                    lat: p.centre.lat * w + s.centre.lat * (1.0 - w),
                };
                p.dwell_s += dwell;
                p.night_s += night;
                p.weekday_s += weekday;
                p.days.extend(days);
                p.weekdays.extend(wdays);
                p.stays.push(s);
            }
            None => places.push(Place {
                centre: s.centre,
                dwell_s: dwell,
                night_s: night,
                weekday_s: weekday,
                days,
                weekdays: wdays,
                stays: vec![s],
            }),
        }
    }
    places.sort_by_key(|p| std::cmp::Reverse(p.dwell_s));
    places
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Home,
    Work,
    Poi,
}

/// Home, work and the POIs among the places.
pub fn classify(places: &[Place]) -> Vec<(Kind, &Place)> {
    let mut out = Vec::new();
    let home = places
        .iter()
        .enumerate()
        .filter(|(_, p)| p.days.len() >= MIN_DAYS)
        .max_by_key(|(_, p)| (p.dwell_s, p.night_s))
        .map(|(i, _)| i);
    if let Some(h) = home {
        out.push((Kind::Home, &places[h]));
    }
    let work = places
        .iter()
        .enumerate()
        .filter(|(i, p)| Some(*i) != home && p.weekdays.len() >= MIN_DAYS)
        .max_by_key(|(_, p)| p.weekday_s)
        .map(|(i, _)| i);
    if let Some(w) = work {
        out.push((Kind::Work, &places[w]));
    }
    for (i, p) in places.iter().enumerate() {
        if Some(i) != home && Some(i) != work && p.days.len() >= 2 {
            out.push((Kind::Poi, p));
        }
    }
    out
}

fn confidence(kind: Kind, p: &Place, total_dwell: i64) -> &'static str {
    let days = p.days.len();
    let share = p.dwell_s as f64 / total_dwell.max(1) as f64;
    match kind {
        Kind::Home | Kind::Work if days >= 14 && share >= 0.1 => "High",
        Kind::Home | Kind::Work if days >= 5 => "Medium",
        Kind::Poi if days >= 8 => "High",
        Kind::Poi if days >= 4 => "Medium",
        _ => "Low",
    }
}

/// The Insight shape of interface.md.
pub fn insight_json(kind: Kind, p: &Place, total_dwell: i64, namer: &dyn PlaceNamer) -> Value {
    let last = p.stays.iter().max_by_key(|s| s.end).expect("a place has stays");
    let (mut min, mut max) = (p.stays[0].min, p.stays[0].max);
    for s in &p.stays {
        min = LngLat { lng: min.lng.min(s.min.lng), lat: min.lat.min(s.min.lat) };
        max = LngLat { lng: max.lng.max(s.max.lng), lat: max.lat.max(s.max.lat) };
    }
    let dlat = GEOMETRY_MARGIN_M / 110_574.0;
    let dlng = GEOMETRY_MARGIN_M / (111_320.0 * p.centre.lat.to_radians().cos().max(0.01));
    let ring = [
        [min.lng - dlng, min.lat - dlat],
        [max.lng + dlng, min.lat - dlat],
        [max.lng + dlng, max.lat + dlat],
        [min.lng - dlng, max.lat + dlat],
        [min.lng - dlng, min.lat - dlat],
    ];
    let o = last.offset_s;
    let tz_offset = format!("{}{:02}{:02}", if o < 0 { '-' } else { '+' }, o.abs() / 3600, (o.abs() % 3600) / 60);
    let kind_name = match kind {
        Kind::Home => "home".to_owned(),
        Kind::Work => "work".to_owned(),
        Kind::Poi => namer.class_of(p.centre).unwrap_or_else(|| "poi".to_owned()),
    };
    // A place's id is its first stay's (the id of the fix that began it): stable across requests.
    let first = p.stays.iter().min_by_key(|s| s.start).expect("a place has stays");
    json!({
        "id": id_at(first.start.0, u64::from_str_radix(&first.id[12..], 16).unwrap_or(0)),
        "geometry": {"type": "Polygon", "coordinates": [ring]},
        "last_visited": {
            "id": last.last.id,
            "coordinates": GeoPoint::from(last.last.coordinates),
            "accuracy": last.last.horizontal_accuracy.or(last.last.accuracy),
            "altitude": last.last.altitude,
            "recorded_at": last.last.recorded_at.format(None),
            "started_at": last.start.format(None),
            "created_at": last.last.created_at.unwrap_or(last.end).format(None),
        },
        "tz_offset": tz_offset,
        "confidence": confidence(kind, p, total_dwell),
        "type": kind_name,
        "created_at": Timestamp::now().format(None),
    })
}

/// The insights of `kind` for a user (empty with too little history).
pub async fn insights(store: &dyn Store, p: &Project, user_id: &str, kind: Kind) -> Result<Vec<Value>, ApiError> {
    let places = places(stays(store, p, user_id).await?);
    let total: i64 = places.iter().map(|p| p.dwell_s).sum();
    Ok(classify(&places)
        .into_iter()
        .filter(|(k, _)| *k == kind)
        .map(|(k, pl)| insight_json(k, pl, total, &NoGeocoder))
        .collect())
}
