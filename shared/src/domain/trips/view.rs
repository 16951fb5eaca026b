//! The v1/v3 trip as answers carry it, serialised straight from the stored trip: building a JSON
//! tree first (maps of boxed values, then dropped) was about a third of a warm trips list's CPU.
//! Fields are declared in sorted order, as the tree (a sorted map) wrote them, so answers are
//! byte for byte what they were; [`super::json::trip_v1_json`] is this view as a value.

use serde::Serialize;
use serde_json::{Map, Value};

use super::eta::{self, Eta};
use super::{Trip, TripEvent, TripState, Waypoint, WaypointKind};
use crate::geometry::GeoPoint;
use crate::time::Timestamp;

fn skip_none<T>(v: &Option<T>) -> bool {
    v.is_none()
}

/// A trip's tracking page: the tracking base URL and the trip's token.
pub fn tracking_url(base: &str, t: &Trip) -> String {
    format!("{}/{}", base.trim_end_matches('/'), t.tracking_token)
}

/// A trip event: the optional texts only when set.
#[derive(Debug, Serialize)]
pub struct EventView<'a> {
    created_at: String,
    #[serde(skip_serializing_if = "skip_none")]
    event_source: &'a Option<String>,
    event_type: &'a str,
    #[serde(skip_serializing_if = "skip_none")]
    event_version: &'a Option<String>,
    id: &'a str,
    is_deleted: bool,
    trip_id: &'a str,
    #[serde(skip_serializing_if = "skip_none")]
    trip_location_id: &'a Option<String>,
    user_id: &'a Option<String>,
    #[serde(skip_serializing_if = "skip_none")]
    user_location_id: &'a Option<String>,
}

impl<'a> From<&'a TripEvent> for EventView<'a> {
    fn from(e: &'a TripEvent) -> Self {
        Self {
            created_at: e.created_at.format(None),
            event_source: &e.event_source,
            event_type: &e.event_type,
            event_version: &e.event_version,
            id: &e.id,
            is_deleted: e.is_deleted,
            trip_id: &e.trip_id,
            trip_location_id: &e.trip_location_id,
            user_id: &e.user_id,
            user_location_id: &e.user_location_id,
        }
    }
}

/// An origin or destination; `left` for origins only.
#[derive(Debug, Serialize)]
pub struct TripLocationView<'a> {
    coordinates: GeoPoint,
    created_at: String,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    left: Option<bool>,
    loc_type: &'static str,
    reached: bool,
    trip_id: &'a str,
    updated_at: String,
}

impl<'a> TripLocationView<'a> {
    fn new(trip_id: &'a str, w: &'a Waypoint) -> Self {
        let origin = w.kind == WaypointKind::Origin;
        Self {
            coordinates: w.coordinates.into(),
            created_at: w.created_at.format(None),
            id: &w.id,
            left: origin.then_some(w.left_at.is_some()),
            loc_type: if origin { "origin" } else { "destination" },
            reached: w.reached_at.is_some(),
            trip_id,
            updated_at: w.updated_at.format(None),
        }
    }
}

/// The v1/v3 Trip, with Waymark's `eta` (see [`super::eta`]); `distance_covered` and `duration`
/// once ended, `metadata` when set.
#[derive(Debug, Serialize)]
pub struct TripV1View<'a> {
    created_at: String,
    destinations: Vec<TripLocationView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    distance_covered: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration: Option<i64>,
    eta: Value,
    events: Vec<EventView<'a>>,
    id: &'a str,
    is_deleted: bool,
    is_ended: bool,
    is_paused: bool,
    is_started: bool,
    #[serde(skip_serializing_if = "skip_none")]
    metadata: &'a Option<Map<String, Value>>,
    origins: Vec<TripLocationView<'a>>,
    project_id: &'a str,
    trip_ended_at: Option<String>,
    trip_started_at: Option<String>,
    trip_tracking_url: String,
    updated_at: String,
    user_id: &'a Option<String>,
}

fn ts(t: Option<Timestamp>) -> Option<String> {
    t.map(|t| t.format(None))
}

impl<'a> TripV1View<'a> {
    pub fn new(t: &'a Trip, tracking_base: &str, eta: Option<&Eta>) -> Self {
        let locs = |kind| t.waypoints(kind).map(|w| TripLocationView::new(&t.id, w)).collect();
        let ended = t.state == TripState::Ended;
        Self {
            created_at: t.created_at.format(None),
            destinations: locs(WaypointKind::Destination),
            distance_covered: ended.then(|| crate::stats::round2(t.distance_m.unwrap_or(0.0))),
            duration: ended.then(|| t.duration_s.unwrap_or(0)),
            eta: eta::json_of(eta),
            events: t.events.iter().map(EventView::from).collect(),
            id: &t.id,
            is_deleted: t.is_deleted,
            is_ended: ended,
            is_paused: t.state == TripState::Paused,
            is_started: t.state != TripState::Created,
            metadata: &t.metadata,
            origins: locs(WaypointKind::Origin),
            project_id: &t.project_id,
            trip_ended_at: ts(t.ended_at),
            trip_started_at: ts(t.started_at),
            trip_tracking_url: tracking_url(tracking_base, t),
            updated_at: t.updated_at.format(None),
            user_id: &t.user_id,
        }
    }
}

/// A listed trip in the v1/v3 shape, with its ETA `now` when it is under way towards a target
/// (see [`eta::applies`]), read from its fixes.
pub async fn v1_json(
    store: &dyn crate::store::Store,
    p: &crate::project::Project,
    tracking_base: &str,
    t: &super::StoredTrip,
    now: Timestamp,
) -> Result<Box<serde_json::value::RawValue>, crate::error::ApiError> {
    let trip = t.decode()?;
    let eta = if eta::applies(&trip) { eta::for_trip(store, p, &trip, now).await? } else { None };
    Ok(crate::store::rendered("trip v1", &TripV1View::new(&trip, tracking_base, eta.as_ref()))?)
}
