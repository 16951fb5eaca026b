//! Location history. One partition per project and user (`pk = <project>#<user>` in the
//! locations table); the sort key is the location id, whose first 12 hex digits are `recorded_at`
//! in milliseconds, so history is listed in `recorded_at` order and a date range is a key range.
//! The rest of the id is a hash of user, time and coordinates: a re-sent fix has the same key and
//! is stored once. With the project's `retention_days`, fixes recorded longer ago than that are
//! removed (`pipeline::retention`). The partition also holds its own counts for paging, under
//! sort keys from `~` (`domain::history_pages`): every read of fixes is a range of hex ids.

use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub mod view;

pub use view::LocationView;

use super::history_pages;
use crate::error::ApiError;
use crate::geometry::{LngLat, encode_polyline, encode_time_aware_polyline};
use crate::ids::{id_at, id_range};
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{Doc, Query, SkRange, Store, Table, Unsynced, from_item, to_item};
use crate::time::{DateRange, Timestamp};

/// Fixes recorded more than this after the server's clock are refused at ingest (seconds).
pub const FUTURE_TOLERANCE_SECONDS: i64 = 300;
/// The newest `recorded_at` accepted now.
pub fn latest_acceptable() -> Timestamp {
    Timestamp(Timestamp::now().0 + chrono::Duration::seconds(FUTURE_TOLERANCE_SECONDS))
}

/// Most locations in one ingest batch.
pub const MAX_BATCH: usize = 1000;
/// Most locations `points_encoded=true` returns in one response; narrow the dates for more.
pub const MAX_ENCODED_POINTS: usize = 50_000;

/// A location record: as the SDK sends it (validated while parsed) and as it is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    /// Assigned by the server; ignored on input.
    #[serde(default)]
    pub id: String,
    pub coordinates: LngLat,
    pub recorded_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizontal_accuracy: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vertical_accuracy: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub altitude: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub course: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone_offset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_stat: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gps_stat: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motion_stat: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gps_status: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_stat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_remaining: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bat_stat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bat_saver_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub airplane_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_permission: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    // What current Roam SDKs send (docs.roam.ai, "Location Updates"), stored and returned as sent.
    /// The SDK's tracking mode (`active`, `balanced`, `passive`, `custom`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking_mode: Option<String>,
    /// The device's offset where the fix was taken, `+hhmm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz_offset: Option<String>,
    /// `charging` or `unplugged`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_saver: Option<bool>,
    /// Whether the device had a network connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_status: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_manufacturer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
}

/// `POST /v1/api/location/` body.
#[derive(Debug, Deserialize)]
pub struct IngestBatch {
    pub user_id: String,
    #[serde(deserialize_with = "batch_of_locations")]
    pub locations: Vec<Location>,
}

/// Room for this many locations is made before a batch is read.
const BATCH_ROOM: usize = 128;

/// A batch's locations, read into room made for a usual batch at once: a `Vec` grows from 4 by
/// doubling, and a batch of 100 locations (about 550 bytes each) was copied six times into
/// fresh memory the kernel zeroed first (5 % of an ingest profile in page zeroing alone).
fn batch_of_locations<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Location>, D::Error> {
    struct Batch;
    impl<'de> serde::de::Visitor<'de> for Batch {
        type Value = Vec<Location>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of locations")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Location>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(BATCH_ROOM).min(MAX_BATCH));
            while let Some(l) = seq.next_element()? {
                out.push(l);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Batch)
}

pub fn locations_pk(project_id: &str, user_id: &str) -> String {
    [project_id, "#", user_id].concat()
}

/// The content-derived id: `recorded_at` (ms) then 48 bits of a hash of who, when and where.
pub fn location_id(project_id: &str, user_id: &str, loc: &Location) -> String {
    let mut h = Sha256::new();
    h.update(project_id.as_bytes());
    h.update(user_id.as_bytes());
    h.update(loc.recorded_at.0.timestamp_millis().to_be_bytes());
    h.update(loc.coordinates.lng.to_be_bytes());
    h.update(loc.coordinates.lat.to_be_bytes());
    let d = h.finalize();
    let low = u64::from_be_bytes([0, 0, d[0], d[1], d[2], d[3], d[4], d[5]]);
    id_at(loc.recorded_at.0, low)
}

/// Checks the parser cannot express: sizes of the batch and of free-text fields.
pub fn validate_batch(batch: &IngestBatch) -> Result<(), ApiError> {
    if batch.locations.is_empty() || batch.locations.len() > MAX_BATCH {
        return Err(ApiError::field(
            "locations",
            format!("must hold 1 to {MAX_BATCH} locations, got {}", batch.locations.len()),
        ));
    }
    for (i, l) in batch.locations.iter().enumerate() {
        for (name, v) in [
            ("activity", &l.activity),
            ("address", &l.address),
            ("timezone_offset", &l.timezone_offset),
            ("app_stat", &l.app_stat),
            ("app_context", &l.app_context),
            ("bat_stat", &l.bat_stat),
            ("source", &l.source),
            ("tracking_mode", &l.tracking_mode),
            ("tz_offset", &l.tz_offset),
            ("battery_status", &l.battery_status),
            ("device_manufacturer", &l.device_manufacturer),
            ("device_model", &l.device_model),
            ("os_version", &l.os_version),
        ] {
            if v.as_ref().is_some_and(|s| s.len() > 512) {
                return Err(ApiError::field(&format!("locations[{i}].{name}"), "at most 512 characters"));
            }
        }
        if let Some(z) = l.timezone_offset.as_deref().filter(|z| crate::time::Zone::parse(z).is_none()) {
            return Err(ApiError::field(
                &format!("locations[{i}].timezone_offset"),
                format!("'{z}' is not a time zone: +hh:mm, +hhmm or an IANA name such as Europe/Berlin"),
            ));
        }
        for (name, v) in [
            ("speed", l.speed),
            ("accuracy", l.accuracy),
            ("horizontal_accuracy", l.horizontal_accuracy),
            ("vertical_accuracy", l.vertical_accuracy),
            ("altitude", l.altitude),
            ("course", l.course),
        ] {
            if v.is_some_and(|x| !x.is_finite() || !crate::metadata::storable(x) || x.abs() > 1e12) {
                return Err(ApiError::field(
                    &format!("locations[{i}].{name}"),
                    "must be 0 or a number of magnitude between 1e-130 and 1e12",
                ));
            }
        }
    }
    Ok(())
}

/// Give each location its content-derived id and the time it was received, and drop duplicates
/// inside the batch itself. Sorted by id (`recorded_at` order).
pub fn prepare(p: &Project, user_id: &str, locations: Vec<Location>) -> Vec<Location> {
    let now = Timestamp::now();
    let mut locs: Vec<Location> = locations
        .into_iter()
        .map(|mut l| {
            l.id = location_id(&p.project_id, user_id, &l);
            l.created_at = Some(now);
            l
        })
        .collect();
    locs.sort_by(|a, b| a.id.cmp(&b.id));
    locs.dedup_by(|a, b| a.id == b.id);
    locs
}

/// Store prepared locations put-if-absent. Returns those newly stored (duplicates left out), in
/// `recorded_at` order.
pub async fn store_prepared(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    locs: Vec<Location>,
) -> Result<Vec<Location>, ApiError> {
    let (stored, unsynced) = store_unsynced(store, p, user_id, locs).await?;
    unsynced.durable().await?;
    Ok(stored)
}

/// [`store_prepared`], not yet durable on return (embedded store): the caller waits for the
/// returned [`Unsynced`] before it tells anyone the fixes are stored. Ingest does, after the
/// processing pass, whose synced commit usually covers them already: one file sync a request
/// instead of two.
pub async fn store_unsynced(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    locs: Vec<Location>,
) -> Result<(Vec<Location>, Unsynced), ApiError> {
    let pk = locations_pk(&p.project_id, user_id);
    // With retention, each item carries its expiry for DynamoDB's TTL (`pipeline::retention`).
    let days = crate::domain::settings::retention_days(store, &p.project_id).await?;
    let mut items = locs.iter().map(|l| to_item(&pk, &l.id, l)).collect::<Result<Vec<_>, _>>()?;
    for (item, l) in items.iter_mut().zip(&locs) {
        crate::expiry::stamp(item, l.recorded_at, days);
    }
    // Counted for paging (`history_pages`).
    let (stored, unsynced) = history_pages::put_new_counted(store, Table::Locations, items).await?;
    Ok((locs.into_iter().zip(stored).filter_map(|(l, s)| s.then_some(l)).collect(), unsynced))
}

/// The key range of the fixes recorded inside `range` (all of them without one); never the
/// partition's count items (`history_pages`).
fn bounds(range: Option<DateRange>) -> (String, String) {
    range.map(|r| id_range(&r)).unwrap_or_else(crate::ids::all_ids)
}

fn range_of(range: Option<DateRange>) -> SkRange {
    let (lo, hi) = bounds(range);
    SkRange::Between(lo, hi)
}

/// One page of a user's history in `recorded_at` order, at a cost independent of the page
/// number (`history_pages`), as stored JSON documents (shown through [`view::view_json`]).
pub async fn list(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    range: Option<DateRange>,
    page: PageNumber,
) -> Result<(Vec<Doc>, PageInfo), ApiError> {
    let pk = locations_pk(&p.project_id, user_id);
    let (lo, hi) = bounds(range);
    Ok(history_pages::page(store, Table::Locations, &pk, &lo, &hi, page, Order::OldestFirst).await?)
}

/// The whole range as a Google polyline and a time-aware polyline.
pub async fn encoded(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    range: Option<DateRange>,
) -> Result<(usize, String, String), ApiError> {
    let locs = in_range(store, p, user_id, range).await?;
    let points: Vec<LngLat> = locs.iter().map(|l| l.coordinates).collect();
    let timed: Vec<(LngLat, i64)> = locs.iter().map(|l| (l.coordinates, l.recorded_at.0.timestamp())).collect();
    Ok((locs.len(), encode_polyline(&points)?, encode_time_aware_polyline(&timed)))
}

/// Every location of the range in `recorded_at` order, at most [`MAX_ENCODED_POINTS`] (a 400
/// naming `start_date` beyond).
pub async fn in_range(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    range: Option<DateRange>,
) -> Result<Vec<Location>, ApiError> {
    let pk = locations_pk(&p.project_id, user_id);
    let q = Query::new(&pk, range_of(range)).limit(MAX_ENCODED_POINTS + 1);
    let page = store.query(Table::Locations, &q).await?;
    if page.items.len() > MAX_ENCODED_POINTS {
        return Err(ApiError::field(
            "start_date",
            format!("the range holds more than {MAX_ENCODED_POINTS} locations; narrow start_date/end_date"),
        ));
    }
    Ok(page.items.into_iter().map(from_item).collect::<Result<Vec<Location>, _>>()?)
}

/// [`LocationView`] as a JSON value (webhook payloads, the v2 answers still built as trees).
pub fn location_json(l: &Location, tz: Option<Tz>) -> Value {
    serde_json::to_value(LocationView::new(l, tz)).unwrap_or_else(|_| json!({}))
}
