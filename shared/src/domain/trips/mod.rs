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

pub mod by_user;
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
pub mod render;
pub mod route;
mod smooth;
mod stops;
pub mod view;

pub use list::{ListFilter, StoredTrip, TripType, list_v1, list_v2};
pub use progress::{TripPlan, plan as plan_progress};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::auth::{Project, hash_secret};
use crate::domain::check_text;
use crate::domain::history_pages::{self, NewEntry};
use crate::domain::locations::{Location, locations_pk};
use crate::domain::{list_pages, users};
use crate::error::ApiError;
use crate::ids::{id_range, is_id, new_id, random_hex};
use crate::metadata;
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
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
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

    fn hook_only_event(&mut self, event_type: &str) {
        let e = self.event(new_id(), event_type, None, None, None);
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
pub(crate) fn user_trips_pk(project_id: &str, user_id: &str) -> String {
    [project_id, "#UT#", user_id].concat()
}
pub fn tracking_pk(token: &str) -> String {
    format!("TRACK#{}", hash_secret(token))
}

/// Entry of the user's started trips.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct UserTrip {
    pub(crate) trip_id: String,
    pub(crate) api: Api,
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
    trip.push_event("service:trip:created", Some("service:trip"), None, None);
    let tracking = TrackingRef { project_id: p.project_id.clone(), api, trip_id: trip.id.clone() };
    // Events first: they set the record's event count.
    let days = crate::domain::retention::days(store, &p.project_id).await?;
    let (events, mut counted) = event_puts(p, &mut trip, 0, 0, days)?;
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
    hook_ops(store, p, &trip, 0, &mut ops, &mut counted).await?;
    history_pages::counting(store, Table::Main, &counted, true, store.transact(ops)).await?;
    Ok(trip)
}

/// A trip that is not deleted, or 404.
pub async fn get(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Trip, ApiError> {
    let missing = || ApiError::not_found(format!("trip_id: no trip '{trip_id}' in this project"));
    if !is_id(trip_id) {
        return Err(missing());
    }
    let mut trip = get_record(store, p, api, trip_id).await?.ok_or_else(missing)?;
    load_events(store, p, &mut trip).await?;
    Ok(trip)
}

/// The trip record without its events (what the events processor needs).
async fn get_record(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Option<Trip>, ApiError> {
    Ok(get_as(store, Table::Main, &trips_pk(&p.project_id, api), trip_id).await?)
}

/// Add to `ops` the webhook messages for the events pushed onto `trip` since `before` (none when
/// the project has no endpoints), for the same transaction as the trip, and to `counted` the
/// delivery log entries among them.
async fn hook_ops(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    before: usize,
    ops: &mut Vec<WriteOp>,
    counted: &mut Vec<NewEntry>,
) -> Result<(), ApiError> {
    let new: Vec<&TripEvent> = trip.events[before.min(trip.events.len())..].iter().chain(&trip.hook_only).collect();
    if new.is_empty() {
        return Ok(());
    }
    let subs = crate::domain::webhooks::subscriptions(store, p).await?;
    if subs.is_empty() {
        return Ok(());
    }
    let user = match &trip.user_id {
        Some(u) => users::get(store, p, u).await?,
        None => None,
    };
    let hooks: Vec<_> = new.into_iter().filter_map(|e| progress::hook_event(trip, e, user.as_ref())).collect();
    let days = crate::domain::retention::days(store, &p.project_id).await?;
    let (hook_ops, logged) = crate::domain::webhooks::outbox::enqueue_ops(p, &subs, &hooks, days)?;
    ops.extend(hook_ops);
    counted.extend(logged);
    Ok(())
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
        ops.extend(by_user::move_ops(store, &p.project_id, api, &trip.id, trip.user_id.as_deref(), None).await?);
        match store.transact(ops).await {
            Ok(()) => return Ok(trip),
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(format!("trip_id: trip '{trip_id}' is being changed by other requests; retry")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Start,
    Pause,
    Resume,
    End,
}

impl Action {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        serde_json::from_value(Value::String(s.to_owned()))
            .map_err(|_| ApiError::field("action", format!("'{s}' is not one of start, pause, resume, end")))
    }
    /// The body field that may carry the time of the move.
    pub fn time_field(self) -> &'static str {
        match self {
            Action::Start => "started_at",
            Action::Pause => "paused_at",
            Action::Resume => "resumed_at",
            Action::End => "ended_at",
        }
    }
    /// Of the times given as `[started_at, paused_at, resumed_at, ended_at]`, the one for this
    /// action (the others are ignored).
    pub fn pick(self, times: [Option<Timestamp>; 4]) -> Option<Timestamp> {
        times[self as usize]
    }
    fn verb(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::End => "end",
        }
    }
}

/// The time of the latest move so far (a control may not go back before it).
fn last_move(t: &Trip) -> Option<Timestamp> {
    let mut last = t.started_at;
    for p in &t.pauses {
        last = last.max(Some(p.paused_at)).max(p.resumed_at);
    }
    last.max(t.ended_at)
}

/// Move a trip through its lifecycle: created → started → paused ↔ resumed → ended.
pub async fn control(
    store: &dyn Store,
    p: &Project,
    api: Api,
    trip_id: &str,
    action: Action,
    at: Option<Timestamp>,
) -> Result<Trip, ApiError> {
    let given = at;
    if given.is_some_and(|t| (t.0 - Timestamp::now().0).num_seconds() > CLOCK_SKEW_SECONDS) {
        return Err(ApiError::field(action.time_field(), "is in the future"));
    }
    let mut last_fix: Option<Location> = None;
    let mut route: Option<route::Route> = None;
    for _ in 0..30 {
        let snapshot = get_or_deleted(store, p, api, trip_id).await?;
        legal(&snapshot, action)?;
        // Without a given time the move happens now, taken afresh on each attempt: a concurrent
        // move that won the race may have happened after this request began.
        let at = given.unwrap_or_else(|| Timestamp::now().max(last_move(&snapshot).unwrap_or(Timestamp::now())));
        if last_move(&snapshot).is_some_and(|l| at < l) {
            return Err(ApiError::field(action.time_field(), "is before the trip's previous move"));
        }
        match action {
            Action::Start => {
                let user = snapshot.user_id.as_deref().ok_or_else(|| {
                    ApiError::conflict("trip_id: the trip has no user; assign one with an update before starting it")
                })?;
                last_fix = users::get(store, p, user).await?.and_then(|u| u.last_location_update);
            }
            Action::End => {
                let mut ended = snapshot.clone();
                ended.ended_at = Some(at);
                let locs = trip_locations(store, p, &ended, at).await?;
                last_fix = locs.last().cloned();
                route = Some(route::analyse(&locs, &ended.pause_intervals(at)));
            }
            _ => {}
        }
        let result = modify_once(store, p, api, &snapshot, &mut |trip: &mut Trip| {
            apply(trip, action, at, last_fix.as_ref(), route.as_ref());
            Ok(index_ops(p, trip, action))
        })
        .await;
        match result {
            Ok(Some(trip)) => return Ok(trip),
            Ok(None) => continue, // lost a race: re-read and re-check legality
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict(format!("trip_id: trip '{trip_id}' is being changed by other requests; retry")))
}

async fn get_or_deleted(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Trip, ApiError> {
    match get(store, p, api, trip_id).await {
        Err(e) if e.status == axum::http::StatusCode::NOT_FOUND && is_deleted(store, p, trip_id).await? => {
            Err(ApiError::conflict(format!("trip_id: trip '{trip_id}' is deleted")))
        }
        other => other,
    }
}

/// One version-checked write of `snapshot` changed by `change`; `None` when another write got in.
async fn modify_once(
    store: &dyn Store,
    p: &Project,
    api: Api,
    snapshot: &Trip,
    change: &mut impl FnMut(&mut Trip) -> Result<Vec<WriteOp>, ApiError>,
) -> Result<Option<Trip>, ApiError> {
    let mut trip = snapshot.clone();
    let mut ops = change(&mut trip)?;
    if trip.user_id != snapshot.user_id {
        let (from, to) = (snapshot.user_id.as_deref(), trip.user_id.as_deref());
        ops.extend(by_user::move_ops(store, &p.project_id, api, &trip.id, from, to).await?);
    }
    trip.version += 1;
    trip.updated_at = Timestamp::now();
    let days = crate::domain::retention::days(store, &p.project_id).await?;
    let (events, mut counted) = event_puts(p, &mut trip, snapshot.events.len(), snapshot.event_count, days)?;
    ops.extend(events);
    let item = to_item(&trips_pk(&p.project_id, api), &trip.id, &trip)?;
    ops.insert(0, WriteOp::Put { table: Table::Main, item, cond: Cond::Equals("version", snapshot.version.into()) });
    hook_ops(store, p, &trip, snapshot.events.len(), &mut ops, &mut counted).await?;
    match history_pages::counting(store, Table::Main, &counted, true, store.transact(ops)).await {
        Ok(()) => Ok(Some(trip)),
        Err(StoreError::ConditionFailed) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn legal(t: &Trip, action: Action) -> Result<(), ApiError> {
    use TripState::*;
    let ok = matches!(
        (t.state, action),
        (Created, Action::Start)
            | (Started | Resumed, Action::Pause)
            | (Paused, Action::Resume)
            | (Started | Paused | Resumed, Action::End)
    );
    if !ok {
        return Err(ApiError::conflict(format!(
            "action: cannot {} a trip that is {}",
            action.verb(),
            t.state.as_str()
        )));
    }
    if action == Action::Pause && t.pauses.len() >= MAX_PAUSES {
        return Err(ApiError::conflict(format!("action: a trip can be paused at most {MAX_PAUSES} times")));
    }
    Ok(())
}

fn apply(trip: &mut Trip, action: Action, at: Timestamp, fix: Option<&Location>, route: Option<&route::Route>) {
    match action {
        Action::Start => {
            trip.state = TripState::Started;
            trip.started_at = Some(at);
            // The user's last fix names where the trip started, but it was recorded before the
            // start: it moves no waypoint.
            trip.push_event("trip:started", None, None, fix.map(|f| f.id.clone()));
        }
        Action::Pause => {
            trip.state = TripState::Paused;
            trip.pauses.push(Pause { paused_at: at, resumed_at: None });
            trip.hook_only_event("trip:paused");
        }
        Action::Resume => {
            trip.state = TripState::Resumed;
            if let Some(p) = trip.pauses.last_mut() {
                p.resumed_at = Some(at);
            }
            trip.hook_only_event("trip:resumed");
        }
        Action::End => {
            if let Some(p) = trip.pauses.last_mut().filter(|p| p.resumed_at.is_none()) {
                p.resumed_at = Some(at);
            }
            // A fix held back for its successor is judged now, on its predecessor alone.
            if let Some(held) = trip.gps.finish() {
                progress::reach(trip, &[held]);
            }
            trip.state = TripState::Ended;
            trip.ended_at = Some(at);
            if let Some(r) = route {
                set_figures(trip, r, at);
            }
            trip.end_location = fix.cloned();
            trip.push_event("trip:completed", None, None, fix.map(|f| f.id.clone()));
        }
    }
}

pub(crate) fn set_figures(trip: &mut Trip, r: &route::Route, end: Timestamp) {
    trip.distance_m = Some(r.distance_m);
    trip.elevation_gain_m = r.elevation_gain_m;
    trip.duration_s = trip.started_at.map(|s| route::active_seconds(s, end, &trip.pause_intervals(end)));
}

/// Index writes for a move: a started trip enters the user's list of trips that locations move.
fn index_ops(p: &Project, trip: &Trip, action: Action) -> Vec<WriteOp> {
    let (Action::Start, Some(user)) = (action, &trip.user_id) else { return Vec::new() };
    let entry = UserTrip { trip_id: trip.id.clone(), api: trip.api };
    match to_item(&user_trips_pk(&p.project_id, user), &trip.id, &entry) {
        Ok(item) => vec![WriteOp::Put { table: Table::Main, item, cond: Cond::None }],
        Err(_) => Vec::new(),
    }
}

/// Create a trip for a user and start it at once (for a user with no planned trip).
pub async fn quick(store: &dyn Store, p: &Project, api: Api, input: NewTrip) -> Result<Trip, ApiError> {
    if input.user_id.is_none() {
        return Err(ApiError::field("user_id", "is required for a quick trip"));
    }
    let trip = create(store, p, api, input).await?;
    control(store, p, api, &trip.id, Action::Start, None).await
}

/// The trip's locations inside its active time up to `now`, pauses excluded, oldest first.
pub async fn trip_locations(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    now: Timestamp,
) -> Result<Vec<Location>, ApiError> {
    trip_locations_since(store, p, trip, Timestamp(chrono::DateTime::<chrono::Utc>::MIN_UTC), now).await
}

/// [`trip_locations`] recorded at `since` or later.
pub async fn trip_locations_since(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    since: Timestamp,
    now: Timestamp,
) -> Result<Vec<Location>, ApiError> {
    trip_records(store, p, trip, since, now, |l: &Location| l.recorded_at).await
}

/// [`trip_locations`] as the figures read them ([`fix::TripFix`]): a summary's long read.
pub async fn trip_fixes(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    now: Timestamp,
) -> Result<Vec<fix::TripFix>, ApiError> {
    let since = Timestamp(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    trip_records(store, p, trip, since, now, |l: &fix::TripFix| l.recorded_at).await
}

async fn trip_records<T: serde::de::DeserializeOwned + Send + 'static>(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    since: Timestamp,
    now: Timestamp,
    at: impl Fn(&T) -> Timestamp,
) -> Result<Vec<T>, ApiError> {
    let (Some(user), Some(start)) = (&trip.user_id, trip.started_at) else { return Ok(Vec::new()) };
    let start = start.max(since);
    let end = trip.ended_at.unwrap_or(now);
    if end <= start {
        return Ok(Vec::new());
    }
    // The two halves of the trip's time, read at once where the store can (a long trip's fixes
    // are most of its summary's read), cut at a whole millisecond as ids count time (no half may
    // come out empty or reversed).
    let mid = chrono::DateTime::from_timestamp_millis((start.0.timestamp_millis() + end.0.timestamp_millis()) / 2)
        .unwrap_or(start.0);
    let qs: Vec<Query> = [(start.0, mid), (mid, end.0 + chrono::Duration::milliseconds(1))]
        .into_iter()
        .filter(|(a, b)| a.timestamp_millis() < b.timestamp_millis())
        .map(|(start, end)| {
            let (lo, hi) = id_range(&DateRange { start, end });
            Query::new(locations_pk(&p.project_id, user), SkRange::Between(lo, hi))
        })
        .collect();
    let intervals = trip.active_intervals(end);
    let mut locs: Vec<T> = query_as_ranges(store, Table::Locations, &qs).await?;
    locs.retain(|l| intervals.iter().any(|(a, b)| *a <= at(l) && at(l) <= *b));
    Ok(locs)
}

/// Resolve a tracking token to its trip (None when unknown or the trip is deleted).
pub async fn by_token(store: &dyn Store, token: &str) -> Result<Option<Trip>, ApiError> {
    if token.len() != 32 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let Some(r) = get_as::<TrackingRef>(store, Table::Main, &tracking_pk(token), "-").await? else { return Ok(None) };
    let Some(mut trip) = get_as::<Trip>(store, Table::Main, &trips_pk(&r.project_id, r.api), &r.trip_id).await? else {
        return Ok(None);
    };
    let p =
        Project { project_id: r.project_id, account_id: trip.account_id.clone(), kind: crate::auth::KeyKind::Secret };
    load_events(store, &p, &mut trip).await?;
    Ok(Some(trip))
}

/// Everything a summary reports, computed from the trip's locations now.
pub struct Summary {
    pub trip: Trip,
    pub route: route::Route,
    pub distance_m: f64,
    pub duration_s: i64,
    /// The moment "now" meant (the end of a trip under way).
    pub computed_at: Timestamp,
}

pub async fn summary(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Summary, ApiError> {
    let trip = get(store, p, api, trip_id).await?;
    let now = Timestamp::now();
    let end = trip.ended_at.unwrap_or(now);
    let locs = trip_fixes(store, p, &trip, now).await?;
    let mut route = route::analyse_owned(locs, &trip.pause_intervals(end));
    let duration_s = trip.started_at.map(|s| route::active_seconds(s, end, &trip.pause_intervals(end))).unwrap_or(0);
    // Fixes may have expired (retention): the figures stored at the end were taken from all of
    // them. (A trip under way has none stored yet and is measured from what remains.)
    let mut distance_m = route.distance_m;
    if let (Some(d), Some(start)) = (trip.distance_m, trip.started_at)
        && crate::domain::retention::may_have_expired(store, &p.project_id, start).await?
    {
        distance_m = d;
        route.elevation_gain_m = trip.elevation_gain_m;
    }
    Ok(Summary { distance_m, duration_s, route, trip, computed_at: now })
}
