//! Insights: home, work and frequently visited places, learned from [`stays`] (detected by the
//! events processor as fixes arrive), never from raw history. Requests read the per-user
//! [`aggregate`]; [`places`] clusters every stay from scratch, the reference the aggregate is
//! held to. Here: which place is home, which is work, which are points of interest (thresholds
//! in [`rules`]), and the answer; [`PlaceNamer`] is where a reverse geocoder would plug in.
//! See docs/insights.md, "Home, work, points of interest" and "Confidence".

pub mod aggregate;
pub mod places;
pub mod rules;
pub mod stays;

use std::collections::BTreeMap;

use chrono::{Duration, NaiveDate};
use serde_json::{Value, json};

use crate::domain::locations::Location;
use crate::error::ApiError;
use crate::geometry::{GeoPoint, LngLat};
use crate::ids::id_at;
use crate::project::Project;
use crate::store::Store;
use crate::store::{Item, WriteOp};
use crate::time::Timestamp;
pub use places::{PLACE_RADIUS_M, Place};
pub use rules::{
    MIN_DAYS, MOVE_NIGHTS, NIGHT_MIN_SECONDS, POI_MIN_DAYS, WORK_MIN_HOURS_PER_WEEK, WORK_MIN_WEEKDAYS, WORK_MIN_WEEKS,
    WORK_WINDOW_WEEKS,
};
pub use stays::{Stay, stays};

/// What a range of new fixes changes: the run in progress and the places aggregate (states,
/// written in the processor's transaction) and the stays it closed (facts with deterministic
/// ids: the first fix's id).
pub struct InsightsPlan {
    pub run: WriteOp,
    pub aggregate: Option<WriteOp>,
    pub stays: Vec<Item>,
}

/// Extend the user's stays with `fixes` (new, past the processor's watermark, in order) and
/// count the stays they close in the places aggregate.
pub async fn plan(store: &dyn Store, p: &Project, user_id: &str, fixes: &[Location]) -> Result<InsightsPlan, ApiError> {
    let s = stays::plan(store, p, user_id, fixes).await?;
    let aggregate = aggregate::plan(store, p, user_id, &s.closed).await?;
    Ok(InsightsPlan { run: s.run, aggregate, stays: s.stays })
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Home,
    Work,
    Poi,
}

/// Home, work and points of interest among the places (indexes into `places`).
#[derive(Debug, Clone, Default)]
pub struct Classes {
    pub home: Option<usize>,
    /// Whether home is where the latest nights were spent after a move.
    pub moved: bool,
    pub work: Option<usize>,
    pub pois: Vec<usize>,
}

/// The place of each night (the date it began on) with enough of it spent there.
fn night_places(places: &[Place]) -> BTreeMap<NaiveDate, usize> {
    let mut best: BTreeMap<NaiveDate, (i64, usize)> = BTreeMap::new();
    for (i, p) in places.iter().enumerate() {
        for (&d, &secs) in &p.nights {
            if secs >= NIGHT_MIN_SECONDS && best.get(&d).is_none_or(|b| secs > b.0) {
                best.insert(d, (secs, i));
            }
        }
    }
    best.into_iter().map(|(d, (_, i))| (d, i)).collect()
}

pub fn classify(places: &[Place]) -> Classes {
    let eligible = |p: &Place| p.days >= MIN_DAYS;
    let weighted = places
        .iter()
        .enumerate()
        .filter(|(_, p)| eligible(p))
        .max_by(|a, b| a.1.weight.total_cmp(&b.1.weight).then(a.1.night_s.cmp(&b.1.night_s)))
        .map(|(i, _)| i);
    let latest: Vec<usize> = night_places(places).into_values().rev().take(MOVE_NIGHTS).collect();
    let moved_to = latest
        .first()
        .copied()
        .filter(|&first| latest.len() == MOVE_NIGHTS && latest.iter().all(|i| *i == first))
        .filter(|i| Some(*i) != weighted && eligible(&places[*i]));
    let home = moved_to.or(weighted);

    // Work: weeks of the window, counted back from the week of the latest stay.
    let last_week =
        places.iter().map(|p| &p.last).max_by_key(|s| s.end).map(|s| places::monday_of(s.zone().local(s.end.0).date()));
    let work = last_week.and_then(|last| {
        let first = last - Duration::weeks(WORK_WINDOW_WEEKS - 1);
        places
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != home)
            .filter(|(_, p)| {
                p.weeks
                    .range(first..=last)
                    .filter(|(_, (secs, days))| *secs >= WORK_MIN_HOURS_PER_WEEK * 3600 && *days >= WORK_MIN_WEEKDAYS)
                    .count()
                    >= WORK_MIN_WEEKS
            })
            .max_by(|a, b| a.1.weekday_weight.total_cmp(&b.1.weekday_weight))
            .map(|(i, _)| i)
    });
    let pois = (0..places.len())
        .filter(|i| Some(*i) != home && Some(*i) != work && places[*i].visit_days >= POI_MIN_DAYS)
        .collect();
    Classes { home, moved: moved_to.is_some(), work, pois }
}

fn confidence(kind: Kind, p: &Place, total_weight: f64, moved: bool) -> &'static str {
    let days = p.days;
    let share = p.weight / total_weight.max(1e-9);
    match kind {
        Kind::Home | Kind::Work if days >= 14 && share >= 0.1 => "High",
        Kind::Home | Kind::Work if days >= 5 || moved => "Medium",
        Kind::Poi if p.visit_days >= 8 => "High",
        Kind::Poi if p.visit_days >= 4 => "Medium",
        _ => "Low",
    }
}

/// The `Insight` schema of openapi.yaml.
pub fn insight_json(kind: Kind, p: &Place, total_weight: f64, moved: bool, namer: &dyn PlaceNamer) -> Value {
    let last = &p.last;
    let kind_name = match kind {
        Kind::Home => "home".to_owned(),
        Kind::Work => "work".to_owned(),
        Kind::Poi => namer.class_of(p.centre).unwrap_or_else(|| "poi".to_owned()),
    };
    // A place's id is its first stay's (the id of the fix that began it): stable across requests.
    let seq = u64::from_str_radix(p.first_id.get(12..).unwrap_or("0"), 16).unwrap_or(0);
    json!({
        "id": id_at(p.first_start.0, seq),
        "geometry": {"type": "Polygon", "coordinates": [p.polygon]},
        "last_visited": {
            "id": last.last.id,
            "coordinates": GeoPoint::from(last.last.coordinates),
            "accuracy": last.last.horizontal_accuracy.or(last.last.accuracy),
            "altitude": last.last.altitude,
            "recorded_at": last.last.recorded_at.format(None),
            "started_at": last.start.format(None),
            "created_at": last.last.created_at.unwrap_or(last.end).format(None),
        },
        "tz_offset": last.zone().hhmm(last.end.0),
        "confidence": confidence(kind, p, total_weight, moved),
        "type": kind_name,
        "created_at": Timestamp::now().format(None),
    })
}

/// The insights of `kind` among places already computed (empty with too little history).
pub fn answer(places: &[Place], kind: Kind) -> Vec<Value> {
    let total: f64 = places.iter().map(|p| p.weight).sum();
    let c = classify(places);
    let chosen: Vec<usize> = match kind {
        Kind::Home => c.home.into_iter().collect(),
        Kind::Work => c.work.into_iter().collect(),
        Kind::Poi => c.pois.clone(),
    };
    chosen
        .into_iter()
        .map(|i| insight_json(kind, &places[i], total, c.moved && kind == Kind::Home, &NoGeocoder))
        .collect()
}

/// The user's places from the maintained aggregate (two small reads: the run in progress and
/// the aggregate, which counts every closed stay), the run in progress counted as a stay.
pub async fn current_places(store: &dyn Store, p: &Project, user_id: &str) -> Result<Vec<Place>, ApiError> {
    // The run first: a pass committing in between closes its stay into the aggregate read after,
    // which `fold` then skips (at or before `upto`); read the other way round, that stay could
    // be in neither.
    let open = stays::open_run(store, p, user_id).await?;
    let mut agg = aggregate::read(store, p, user_id).await?.unwrap_or_default();
    for s in &open {
        agg.fold(s);
    }
    Ok(agg.places())
}

/// The insights of `kind` for a user (empty with too little history).
pub async fn insights(store: &dyn Store, p: &Project, user_id: &str, kind: Kind) -> Result<Vec<Value>, ApiError> {
    Ok(answer(&current_places(store, p, user_id).await?, kind))
}
