//! Trips: v1/v3 (origins and destinations) and v2 (named, with stops) share one record and one
//! lifecycle; only their shapes differ.
//!
//! Layout (main table):
//! - `<project>#T1` / `<project>#T2`, sort key trip id: v1/v3 and v2 trips, so each list is one
//!   Query in creation order; a deleted trip moves to `<project>#TD` (kept, never listed);
//! - `<project>#UT#<user>`, sort key trip id: the user's started trips, which the ingest hook
//!   reads to find the trips a batch of locations moves (one Query, not a scan of trips);
//! - `TRACK#<sha256(token)>`: the tracking link's token, resolved to its trip (see [`link`]).
//!
//! Every change is a read-modify-write checked on `version`, retried on conflict, so two
//! controls or updates racing on one trip never lose an event or leave contradictory flags.

mod bends;
pub mod by_user;
mod controls;
mod elevation;
pub mod eta;
pub mod events;
pub mod fix;
pub mod gps;
pub mod json;
mod length;
pub mod link;
mod list;
mod parallel;
mod progress;
mod reads;
pub mod render;
pub mod route;
mod smooth;
mod started;
mod stops;
pub mod stream_filter;
pub mod view;

pub use controls::{Action, control, quick};
use controls::{get_or_deleted, modify_once, set_figures};
pub use reads::{Summary, by_token, summary, trip_fixes, trip_locations, trip_locations_since};

pub use list::{ListFilter, StoredTrip, TripType, list_v1, list_v2};
pub use progress::{TripPlan, plan as plan_progress};
pub(crate) use started::{UserTrip, judge_of, user_trips_pk};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::history_pages::{self, NewEntry};
use crate::domain::keys::hash_secret;
use crate::domain::locations::{Location, locations_pk};
use crate::domain::webhooks::outbox::Message;
use crate::domain::{list_pages, users};
use crate::error::ApiError;
use crate::ids::{id_range, is_id, new_id, random_hex};
use crate::metadata;
use crate::metadata::check_text;
use crate::project::Project;
use crate::store::{
    Cond, Query, SkRange, Store, StoreError, Table, WriteOp, from_jsons, get_as, query_as, query_as_ranges, to_item,
};
use crate::time::{DateRange, Timestamp};

/// Radius (meters) within which an origin or destination counts as reached (v1/v3 have none).
pub const WAYPOINT_RADIUS_M: u32 = 100;
/// A reached waypoint is left once a fix is this much (meters) beyond its radius (hysteresis, so
/// jitter at the edge does not flap between reached and left).
pub const LEAVE_MARGIN_M: f64 = 25.0;
/// Locations recorded inside an ended trip's active time still update its figures when they
/// arrive up to this long after the trip ended (offline devices syncing).
pub const LATE_WINDOW_HOURS: i64 = 72;
/// Most origins, destinations or stops on one trip.
pub const MAX_WAYPOINTS: usize = 50;
/// Room (bytes) a trip record keeps for what locations and controls add later (reached/left
/// times, start and end locations, pauses), so no ingest can ever push it past the item limit.
pub const GROWTH_RESERVE_BYTES: usize = 16_000;
/// Most pauses of one trip.
pub const MAX_PAUSES: usize = 50;
/// Control times may be this far in the future (device clock skew).
pub const CLOCK_SKEW_SECONDS: i64 = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    V1,
    V2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TripState {
    Created,
    Started,
    Paused,
    Resumed,
    Ended,
}

impl TripState {
    pub fn as_str(self) -> &'static str {
        match self {
            TripState::Created => "created",
            TripState::Started => "started",
            TripState::Paused => "paused",
            TripState::Resumed => "resumed",
            TripState::Ended => "ended",
        }
    }
    pub fn parse(field: &str, s: &str) -> Result<Self, ApiError> {
        serde_json::from_value(Value::String(s.to_owned())).map_err(|_| {
            ApiError::field(field, format!("'{s}' is not one of created, started, paused, resumed, ended"))
        })
    }
    /// Started and not ended: locations move it.
    pub fn is_active(self) -> bool {
        matches!(self, TripState::Started | TripState::Resumed)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaypointKind {
    Origin,
    Destination,
    Stop,
}

/// An origin or destination (v1/v3) or a stop (v2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waypoint {
    pub id: String,
    pub kind: WaypointKind,
    pub coordinates: crate::geometry::LngLat,
    pub radius_m: u32,
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub address: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub reached_at: Option<Timestamp>,
    pub left_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TripEvent {
    pub id: String,
    pub trip_id: String,
    pub user_id: Option<String>,
    pub event_type: String,
    pub created_at: Timestamp,
    pub is_deleted: bool,
    pub event_source: Option<String>,
    pub event_version: Option<String>,
    pub trip_location_id: Option<String>,
    pub user_location_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub paused_at: Timestamp,
    pub resumed_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trip {
    pub id: String,
    pub project_id: String,
    pub account_id: String,
    pub api: Api,
    pub user_id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub waypoints: Vec<Waypoint>,
    /// Kept as items of their own (`<project>#TE#<trip>`), so a trip whose stops fill most of an
    /// item still takes every event; loaded by the reads below.
    #[serde(default, skip_serializing)]
    pub events: Vec<TripEvent>,
    /// How many events are stored: the next event's position (its sort key), so events list in
    /// the order they were recorded whatever their ids.
    #[serde(default)]
    pub event_count: u64,
    /// Events of this change that go to webhooks only (pause and resume are not trip events).
    #[serde(skip)]
    pub hook_only: Vec<TripEvent>,
    pub state: TripState,
    pub is_deleted: bool,
    pub started_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    pub pauses: Vec<Pause>,
    pub start_location: Option<Location>,
    pub end_location: Option<Location>,
    pub distance_m: Option<f64>,
    pub duration_s: Option<i64>,
    pub elevation_gain_m: Option<f64>,
    /// Which fixes waypoint events may trust (the last accepted, one held for its successor).
    #[serde(default, skip_serializing_if = "gps::OnlineFilter::is_empty")]
    pub gps: gps::OnlineFilter,
    pub tracking_token: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

impl Trip {
    pub fn waypoints(&self, kind: WaypointKind) -> impl Iterator<Item = &Waypoint> {
        self.waypoints.iter().filter(move |w| w.kind == kind)
    }

    /// Intervals of active time so far: from start to end (or `now`), pauses cut out.
    pub fn active_intervals(&self, now: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let Some(start) = self.started_at else { return Vec::new() };
        let end = self.ended_at.unwrap_or(now);
        let mut out = Vec::new();
        let mut from = start;
        for p in &self.pauses {
            if p.paused_at > from {
                out.push((from, p.paused_at.min(end)));
            }
            match p.resumed_at {
                Some(r) => from = r,
                None => return out,
            }
        }
        if end > from {
            out.push((from, end));
        }
        out
    }

    /// Closed pauses, a still-open one closed at `end`.
    pub fn pause_intervals(&self, end: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        self.pauses.iter().map(|p| (p.paused_at, p.resumed_at.unwrap_or(end))).collect()
    }

    /// Refuse a trip whose stops, names and metadata leave no room for what it will record.
    fn check_size(&self) -> Result<(), ApiError> {
        let size = serde_json::to_vec(self).map(|v| v.len()).unwrap_or(usize::MAX);
        let most = crate::store::MAX_ITEM_BYTES - GROWTH_RESERVE_BYTES;
        if size > most {
            return Err(ApiError::new(
                crate::error::Kind::TooLarge,
                format!("stops: the trip's stops, names and metadata take {size} bytes; at most {most}"),
            ));
        }
        Ok(())
    }

    fn push_event(
        &mut self,
        event_type: &str,
        source: Option<&str>,
        trip_location_id: Option<String>,
        user_location_id: Option<String>,
    ) {
        self.push_event_id(new_id(), event_type, source, trip_location_id, user_location_id);
    }

    /// A control's event, its id at its place in the user's sequence (`domain::sequence`).
    fn push_event_at(&mut self, place: Timestamp, event_type: &str, user_location_id: Option<String>) {
        self.push_event_id(placed_id(place), event_type, None, None, user_location_id);
    }

    fn hook_only_event_at(&mut self, place: Timestamp, event_type: &str) {
        let e = self.event(placed_id(place), event_type, None, None, None);
        self.hook_only.push(e);
    }

    fn push_event_id(
        &mut self,
        id: String,
        event_type: &str,
        source: Option<&str>,
        trip_location_id: Option<String>,
        user_location_id: Option<String>,
    ) {
        let e = self.event(id, event_type, source, trip_location_id, user_location_id);
        self.events.push(e);
    }

    fn event(
        &self,
        id: String,
        event_type: &str,
        source: Option<&str>,
        trip_location_id: Option<String>,
        user_location_id: Option<String>,
    ) -> TripEvent {
        TripEvent {
            id,
            trip_id: self.id.clone(),
            user_id: self.user_id.clone(),
            event_type: event_type.to_owned(),
            created_at: Timestamp::now(),
            is_deleted: false,
            event_source: source.map(str::to_owned),
            event_version: source.map(|_| "1.0".to_owned()),
            trip_location_id,
            user_location_id,
        }
    }
}

/// An id at `place`, random below the millisecond (as [`new_id`]'s).
fn placed_id(place: Timestamp) -> String {
    let low = u64::from_str_radix(&random_hex(6), 16).unwrap_or(0);
    crate::ids::id_at(place.0, low)
}

pub(crate) fn trips_pk(project_id: &str, api: Api) -> String {
    match api {
        Api::V1 => [project_id, "#T1"].concat(),
        Api::V2 => [project_id, "#T2"].concat(),
    }
}
pub(crate) fn deleted_pk(project_id: &str) -> String {
    [project_id, "#TD"].concat()
}
pub(crate) fn events_pk(project_id: &str, trip_id: &str) -> String {
    [project_id, "#TE#", trip_id].concat()
}

/// Writes of the events pushed onto `trip` since `before` of them were stored, at the positions
/// after the `stored` ones, and their copies in the user's trip-events list, with the entries to
/// count those by (the transaction runs inside `history_pages::counting`); advances
/// `trip.event_count`. The user-index copies expire with the project's `retention_days`; the
/// trip's own copies stay as long as the trip (see docs/endpoints.md, Retention).
fn event_puts(
    p: &Project,
    trip: &mut Trip,
    before: usize,
    stored: u64,
    retention_days: Option<u32>,
) -> Result<(Vec<WriteOp>, Vec<NewEntry>), ApiError> {
    let pk = events_pk(&p.project_id, &trip.id);
    let new = &trip.events[before.min(trip.events.len())..];
    let mut ops = Vec::with_capacity(new.len() * 2);
    let mut counted = Vec::with_capacity(new.len());
    for (e, n) in new.iter().zip(stored..) {
        ops.push(WriteOp::Put { table: Table::Main, item: to_item(&pk, &format!("{n:06}"), e)?, cond: Cond::None });
        if let Some((op, entry)) = events::index_put(&p.project_id, e, retention_days)? {
            ops.push(op);
            counted.push(entry);
        }
    }
    trip.event_count = stored + new.len() as u64;
    Ok((ops, counted))
}

/// Fill in the trip's events, in the order they were recorded (their positions).
async fn load_events(store: &dyn Store, p: &Project, trip: &mut Trip) -> Result<(), ApiError> {
    trip.events = query_as(store, Table::Main, &Query::new(events_pk(&p.project_id, &trip.id), SkRange::All)).await?;
    Ok(())
}

/// Fill in the events of a page of trips in one read of all their partitions (one read
/// transaction on the embedded store, Queries in flight together on DynamoDB) rather than a read
/// after each trip's.
async fn load_events_many(store: &dyn Store, p: &Project, trips: &mut [Trip]) -> Result<(), ApiError> {
    let qs: Vec<Query> = trips.iter().map(|t| Query::new(events_pk(&p.project_id, &t.id), SkRange::All)).collect();
    let docs = store.query_docs_many(Table::Main, &qs).await?;
    for (t, docs) in trips.iter_mut().zip(docs) {
        t.events = from_jsons(&docs)?;
    }
    Ok(())
}
pub fn tracking_pk(token: &str) -> String {
    format!("TRACK#{}", hash_secret(token))
}

/// Where a tracking token leads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackingRef {
    pub project_id: String,
    pub api: Api,
    pub trip_id: String,
}

/// A waypoint as given in a request.
#[derive(Debug, Clone)]
pub struct WaypointInput {
    pub kind: WaypointKind,
    pub coordinates: crate::geometry::LngLat,
    pub radius_m: Option<u32>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub address: Option<String>,
}

/// What a new trip carries; shape-specific parsing happens in the handlers' input types.
#[derive(Debug, Clone, Default)]
pub struct NewTrip {
    pub user_id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub waypoints: Vec<WaypointInput>,
}

fn make_waypoints(input: Vec<WaypointInput>, now: Timestamp) -> Result<Vec<Waypoint>, ApiError> {
    if input.len() > MAX_WAYPOINTS {
        return Err(ApiError::bad_request(format!(
            "a trip has at most {MAX_WAYPOINTS} origins, destinations or stops"
        )));
    }
    input
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            if let Some(m) = &w.metadata {
                metadata::validate(&format!("stops[{i}].metadata"), m)?;
            }
            check_text(&format!("stops[{i}].name"), &w.name)?;
            check_text(&format!("stops[{i}].description"), &w.description)?;
            check_text(&format!("stops[{i}].address"), &w.address)?;
            Ok(Waypoint {
                id: new_id(),
                kind: w.kind,
                coordinates: w.coordinates,
                radius_m: w.radius_m.unwrap_or(WAYPOINT_RADIUS_M),
                name: w.name,
                description: w.description,
                metadata: w.metadata,
                address: w.address,
                created_at: now,
                updated_at: now,
                reached_at: None,
                left_at: None,
            })
        })
        .collect()
}

async fn check_user(store: &dyn Store, p: &Project, user_id: &Option<String>) -> Result<(), ApiError> {
    if let Some(u) = user_id {
        users::require_ref(store, p, "user_id", u).await?;
    }
    Ok(())
}

/// Create a trip. A `service:trip:created` event is recorded (v1/v3 responses still show the
/// events as they were before it, empty).
pub async fn create(store: &dyn Store, p: &Project, api: Api, input: NewTrip) -> Result<Trip, ApiError> {
    check_text("name", &input.name)?;
    check_text("description", &input.description)?;
    check_user(store, p, &input.user_id).await?;
    if let Some(m) = &input.metadata {
        metadata::validate("metadata", m)?;
    }
    let now = Timestamp::now();
    let mut trip = Trip {
        id: new_id(),
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        api,
        user_id: input.user_id,
        name: input.name,
        description: input.description,
        metadata: input.metadata,
        waypoints: make_waypoints(input.waypoints, now)?,
        events: Vec::new(),
        state: TripState::Created,
        is_deleted: false,
        started_at: None,
        ended_at: None,
        pauses: Vec::new(),
        start_location: None,
        end_location: None,
        distance_m: None,
        duration_s: None,
        elevation_gain_m: None,
        tracking_token: random_hex(16),
        created_at: now,
        updated_at: now,
        version: 1,
        event_count: 0,
        hook_only: Vec::new(),
        gps: gps::OnlineFilter::default(),
    };
    trip.check_size()?;
    // Its creation is not placed in the user's sequence (`domain::sequence`) as controls are:
    // moving the watermark here would make every fix recorded before it late, a backfill of a
    // planned trip's history included. `trip.created` takes the clock's id.
    trip.push_event("service:trip:created", Some("service:trip"), None, None);
    let tracking = TrackingRef { project_id: p.project_id.clone(), api, trip_id: trip.id.clone() };
    // Events first: they set the record's event count.
    let days = crate::domain::settings::retention_days(store, &p.project_id).await?;
    let (events, counted) = event_puts(p, &mut trip, 0, 0, days)?;
    let mut ops = vec![
        WriteOp::Put {
            table: Table::Main,
            item: to_item(&trips_pk(&p.project_id, api), &trip.id, &trip)?,
            cond: Cond::NotExists,
        },
        WriteOp::Put {
            table: Table::Main,
            item: to_item(&tracking_pk(&trip.tracking_token), "-", &tracking)?,
            cond: Cond::NotExists,
        },
    ];
    if api == Api::V1 {
        // The v1/v3 list pages by counts (v2 pages by cursor).
        ops.extend(list_pages::count_ops(Table::Main, &trips_pk(&p.project_id, api), &trip.id, 1));
    }
    if let Some(u) = &trip.user_id {
        ops.extend(by_user::add_ops(&p.project_id, api, u, &trip.id));
    }
    ops.extend(events);
    let messages = hook_ops(store, p, &trip, 0, &mut ops).await?;
    history_pages::counting(store, Table::Main, &counted, true, store.transact(ops)).await?;
    crate::domain::streams::connections::publish(store, &p.project_id, &messages).await;
    Ok(trip)
}

/// A trip that is not deleted, or 404.
pub async fn get(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Trip, ApiError> {
    let missing = || ApiError::not_found(format!("trip_id: no trip '{trip_id}' in this project"));
    if !is_id(trip_id) {
        return Err(ApiError::field("trip_id", format!("'{trip_id}' is not a trip id (24 hexadecimal characters)")));
    }
    let mut trip = get_record(store, p, api, trip_id).await?.ok_or_else(missing)?;
    load_events(store, p, &mut trip).await?;
    Ok(trip)
}

/// The trip record without its events (what the events processor needs).
async fn get_record(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Option<Trip>, ApiError> {
    Ok(get_as(store, Table::Main, &trips_pk(&p.project_id, api), trip_id).await?)
}

/// Add to `ops` the webhook messages for the events pushed onto `trip` since `before` (with
/// pending deliveries to the endpoints that want them), for the same transaction as the trip.
/// Returns the messages, for live streams once the transaction commits.
async fn hook_ops(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    before: usize,
    ops: &mut Vec<WriteOp>,
) -> Result<Vec<Message>, ApiError> {
    let new: Vec<&TripEvent> = trip.events[before.min(trip.events.len())..].iter().chain(&trip.hook_only).collect();
    if new.is_empty() {
        return Ok(Vec::new());
    }
    // Messages whether or not an endpoint listens: live streams resume from them.
    let subs = crate::domain::webhooks::subscriptions(store, p).await?;
    let user = match &trip.user_id {
        Some(u) => users::get(store, p, u).await?,
        None => None,
    };
    let hooks: Vec<_> = new.into_iter().filter_map(|e| progress::hook_event(trip, e, user.as_ref())).collect();
    let days = crate::domain::settings::retention_days(store, &p.project_id).await?;
    let (hook_ops, messages) =
        crate::domain::webhooks::outbox::enqueue_ops(p, &subs, &hooks, days, store.bills_by_kilobyte())?;
    ops.extend(hook_ops);
    Ok(messages)
}

async fn is_deleted(store: &dyn Store, p: &Project, trip_id: &str) -> Result<bool, ApiError> {
    Ok(is_id(trip_id) && store.get(Table::Main, &deleted_pk(&p.project_id), trip_id).await?.is_some())
}

/// Read-modify-write of one trip, retried on version conflicts. `change` returns extra writes
/// to commit in the same transaction (index entries).
async fn modify(
    store: &dyn Store,
    p: &Project,
    api: Api,
    trip_id: &str,
    mut change: impl FnMut(&mut Trip) -> Result<Vec<WriteOp>, ApiError>,
) -> Result<Trip, ApiError> {
    for _ in 0..30 {
        let snapshot = get_or_deleted(store, p, api, trip_id).await?;
        if let Some(trip) = modify_once(store, p, api, &snapshot, &mut change).await? {
            return Ok(trip);
        }
    }
    Err(ApiError::conflict(format!("trip_id: trip '{trip_id}' is being changed by other requests; retry")))
}

/// What an update may change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct TripUpdate {
    pub user_id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    /// Replace the waypoints of these kinds with the given ones.
    pub replace: Vec<(WaypointKind, Vec<WaypointInput>)>,
}

/// Update a trip that has not started. v1/v3 updates append one `motion:trip:created` event.
pub async fn update(store: &dyn Store, p: &Project, api: Api, trip_id: &str, up: TripUpdate) -> Result<Trip, ApiError> {
    check_text("name", &up.name)?;
    check_text("description", &up.description)?;
    check_user(store, p, &up.user_id).await?;
    if let Some(m) = &up.metadata {
        metadata::validate("metadata", m)?;
    }
    modify(store, p, api, trip_id, |trip| {
        if trip.state != TripState::Created {
            return Err(ApiError::conflict(format!(
                "trip_id: trip is {}; only a trip that has not started can be updated",
                trip.state.as_str()
            )));
        }
        let now = Timestamp::now();
        for (kind, list) in &up.replace {
            trip.waypoints.retain(|w| w.kind != *kind);
            trip.waypoints.extend(make_waypoints(list.clone(), now)?);
        }
        if trip.waypoints.len() > MAX_WAYPOINTS {
            return Err(ApiError::bad_request(format!(
                "a trip has at most {MAX_WAYPOINTS} origins, destinations or stops"
            )));
        }
        if let Some(u) = &up.user_id {
            trip.user_id = Some(u.clone());
        }
        if let Some(n) = &up.name {
            trip.name = Some(n.clone());
        }
        if let Some(d) = &up.description {
            trip.description = Some(d.clone());
        }
        if let Some(m) = &up.metadata {
            trip.metadata = Some(m.clone());
        }
        trip.check_size()?;
        if api == Api::V1 {
            trip.push_event("motion:trip:created", Some("motion:trip"), None, None);
        }
        Ok(Vec::new())
    })
    .await
}

/// Delete a trip: it leaves lists and lookups, its tracking link stops working, and it can no
/// longer be started. The record is kept aside.
pub async fn delete(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Trip, ApiError> {
    for _ in 0..30 {
        let mut trip = get(store, p, api, trip_id).await?;
        let expected = trip.version;
        trip.is_deleted = true;
        trip.version += 1;
        trip.updated_at = Timestamp::now();
        let mut ops = vec![
            WriteOp::Delete {
                table: Table::Main,
                pk: trips_pk(&p.project_id, api),
                sk: trip.id.clone(),
                cond: Cond::Equals("version", expected.into()),
            },
            WriteOp::Put {
                table: Table::Main,
                item: to_item(&deleted_pk(&p.project_id), &trip.id, &trip)?,
                cond: Cond::None,
            },
            WriteOp::Delete {
                table: Table::Main,
                pk: tracking_pk(&trip.tracking_token),
                sk: "-".into(),
                cond: Cond::None,
            },
        ];
        if let Some(u) = &trip.user_id {
            ops.push(WriteOp::Delete {
                table: Table::Main,
                pk: user_trips_pk(&p.project_id, u),
                sk: trip.id.clone(),
                cond: Cond::None,
            });
        }
        if api == Api::V1 {
            ops.extend(list_pages::count_ops(Table::Main, &trips_pk(&p.project_id, api), &trip.id, -1));
        }
        ops.extend(by_user::move_ops(&p.project_id, api, &trip.id, trip.user_id.as_deref(), None));
        match store.transact(ops).await {
            Ok(()) => return Ok(trip),
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(format!("trip_id: trip '{trip_id}' is being changed by other requests; retry")))
}
