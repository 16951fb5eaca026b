//! Trip shapes: v1/v3 (`trip_tracking_url`, origins/destinations, flags) and v2 (name, stops,
//! `trip_state`, totals), and the summary.

use serde_json::{Value, json};

use super::eta::{self, Eta};
use super::render::SummaryBody;
use super::view::{EventView, TripV1View, tracking_url};
use super::{Summary, Trip, TripEvent, Waypoint, WaypointKind};
use crate::domain::locations::location_json;
use crate::domain::users::User;
use crate::geometry::GeoPoint;
use crate::stats::round2;

fn ts(t: Option<crate::time::Timestamp>) -> Value {
    t.map(|t| Value::String(t.format(None))).unwrap_or(Value::Null)
}

pub fn event_json(e: &TripEvent) -> Value {
    to_value(EventView::from(e))
}

/// The v1/v3 Trip, with Waymark's `eta` (see [`super::eta`]): [`TripV1View`] as a value.
pub fn trip_v1_json(t: &Trip, tracking_base: &str, eta: Option<&Eta>) -> Value {
    to_value(TripV1View::new(t, tracking_base, eta))
}

/// A view as a value. Views have string keys only: the conversion cannot fail.
fn to_value(v: impl serde::Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn stop_json(w: &Waypoint) -> Value {
    json!({
        "id": w.id, "name": w.name, "description": w.description,
        "metadata": w.metadata.clone().unwrap_or_default(), "address": w.address,
        "geometry_radius": w.radius_m, "geometry": GeoPoint::from(w.coordinates),
        "created_at": w.created_at.format(None), "updated_at": w.updated_at.format(None),
        "arrived_at": ts(w.reached_at), "departed_at": ts(w.left_at),
    })
}

/// The user as v2 expands it. Users have no name field; `metadata.name` is used when it is text.
/// Both texts are strings, empty when unset, as Roam's v2 answers show them.
pub fn user_v2_json(u: Option<&User>) -> Value {
    match u {
        None => Value::Null,
        Some(u) => json!({
            "id": u.id,
            "name": u.metadata.as_ref().and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default(),
            "description": u.description.as_deref().unwrap_or_default(),
            "metadata": u.metadata.clone().unwrap_or_default(),
        }),
    }
}

/// The v2 Trip, with `trip_tracking_url` as v1/v3 trips and Waymark's `eta`.
pub fn trip_v2_json(t: &Trip, user: Option<&User>, tracking_base: &str, eta: Option<&Eta>) -> Value {
    let loc = |l: &Option<crate::domain::locations::Location>| {
        l.as_ref().map(|l| location_json(l, None)).unwrap_or_else(|| json!({}))
    };
    json!({
        "id": t.id,
        "name": t.name,
        "description": t.description,
        "trip_state": t.state.as_str(),
        "total_distance": round2(t.distance_m.unwrap_or(0.0)),
        "total_duration": t.duration_s.unwrap_or(0),
        "total_elevation_gain": round2(t.elevation_gain_m.unwrap_or(0.0)),
        "metadata": t.metadata.clone().unwrap_or_default(),
        "start_location": loc(&t.start_location),
        "end_location": loc(&t.end_location),
        "user": user_v2_json(user),
        "started_at": ts(t.started_at),
        "ended_at": ts(t.ended_at),
        "created_at": t.created_at.format(None),
        "updated_at": t.updated_at.format(None),
        "events": t.events.iter().map(event_json).collect::<Vec<_>>(),
        "stops": t.waypoints(WaypointKind::Stop).map(stop_json).collect::<Vec<_>>(),
        "trip_tracking_url": tracking_url(tracking_base, t),
        "eta": eta::json_of(eta),
    })
}

/// The summary as a JSON value (v2 nests it in its envelope); see [`SummaryBody`].
pub fn summary_json(s: Summary, detailed: bool) -> Value {
    // Only string keys: the conversion cannot fail.
    serde_json::to_value(SummaryBody { summary: s, detailed }).unwrap_or(Value::Null)
}
