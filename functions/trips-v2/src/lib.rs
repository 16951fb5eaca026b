//! Trips, v2: `/v2/trips` with Bearer access tokens and the `{code, message, description, trip}`
//! envelope; plus Waymark's `/v2/trips/{id}/controls` and `/v2/trips/{id}/summary`.

use axum::Router;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use shared::auth::Bearer;
use shared::domain::trips::eta;
use shared::domain::trips::json::{summary_json, trip_v2_json};
use shared::domain::trips::{self, Action, Api, NewTrip, Trip, TripState, TripUpdate, WaypointInput, WaypointKind};
use shared::domain::users;
use shared::geometry::GeoPoint;
use shared::http::route;
use shared::project::Project;
use shared::time::Timestamp;
use shared::{ApiError, AppState, V2Envelope, V2Error, V2Json, V2Params};

/// Stop radius bounds (meters) and default.
pub const STOP_RADIUS: std::ops::RangeInclusive<u32> = 10..=10_000;

/// The `{id}` of a v2 path; a segment that is not valid text is a 400 in the v2 envelope.
struct TripId(String);

impl<S: Send + Sync> FromRequestParts<S> for TripId {
    type Rejection = V2Error;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, V2Error> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(id)| TripId(id))
            .map_err(|e| ApiError::field("id", e.body_text()).into())
    }
}

pub fn router() -> Router<AppState> {
    let r = route(Router::new(), "/v2/trips/", post(create).get(list));
    let r = route(r, "/v2/trips/{id}/", get(read).put(update).delete(delete));
    let r = route(r, "/v2/trips/{id}/summary/", get(summary));
    shared::http::compress_long(route(r, "/v2/trips/{id}/controls/", post(controls)))
}

#[derive(Debug, Deserialize)]
struct StopBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    geometry_radius: Option<u32>,
    geometry: GeoPoint,
}

#[derive(Debug, Deserialize)]
struct TripBody {
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    stops: Option<Vec<StopBody>>,
}

fn stops(list: Vec<StopBody>) -> Result<Vec<WaypointInput>, ApiError> {
    list.into_iter()
        .enumerate()
        .map(|(i, s)| {
            if let Some(r) = s.geometry_radius.filter(|r| !STOP_RADIUS.contains(r)) {
                return Err(ApiError::field(
                    &format!("stops[{i}].geometry_radius"),
                    format!("{r} is outside {}..={} meters", STOP_RADIUS.start(), STOP_RADIUS.end()),
                ));
            }
            Ok(WaypointInput {
                kind: WaypointKind::Stop,
                coordinates: s.geometry.coordinates,
                radius_m: s.geometry_radius,
                name: s.name,
                description: s.description,
                metadata: s.metadata,
                address: s.address,
            })
        })
        .collect()
}

async fn render(s: &AppState, p: &Project, t: &Trip) -> Result<Value, ApiError> {
    let user = match &t.user_id {
        Some(u) => users::get(s.store.as_ref(), p, u).await?,
        None => None,
    };
    let eta = eta::for_trip(s.store.as_ref(), p, t, Timestamp::now()).await?;
    Ok(trip_v2_json(t, user.as_ref(), &s.config.tracking_base_url, eta.as_ref()))
}

async fn create(
    Bearer(p): Bearer,
    State(s): State<AppState>,
    V2Json(b): V2Json<TripBody>,
) -> Result<V2Envelope, V2Error> {
    let input = NewTrip {
        user_id: b.user_id,
        name: b.name,
        description: b.description,
        metadata: b.metadata,
        waypoints: stops(b.stops.unwrap_or_default())?,
    };
    let mut trip = trips::create(s.store.as_ref(), &p, Api::V2, input).await?;
    s.wake.notify_one();
    // As in v1/v3: the creation event is recorded, the response shows `events` empty.
    trip.events.clear();
    Ok(V2Envelope::new(201, "trip_created", "Trip created").with("trip", render(&s, &p, &trip).await?))
}

async fn read(Bearer(p): Bearer, State(s): State<AppState>, TripId(id): TripId) -> Result<V2Envelope, V2Error> {
    let trip = trips::get(s.store.as_ref(), &p, Api::V2, &id).await?;
    let t = render(&s, &p, &trip).await?;
    // Roam names the object `trips` here (with `has_more`); `trip` as everywhere else is kept.
    Ok(V2Envelope::new(200, "trip_object", "The trip of the requested id")
        .with("trip", t.clone())
        .with("trips", t)
        .with("has_more", json!(false)))
}

/// `limit`: page size, 1 to 100, default 10.
const MAX_LIMIT: usize = 100;

async fn list(Bearer(p): Bearer, State(s): State<AppState>, V2Params(q): V2Params) -> Result<V2Envelope, V2Error> {
    let limit =
        match q.opt("limit") {
            None => 10,
            Some(l) => l.parse::<usize>().ok().filter(|n| (1..=MAX_LIMIT).contains(n)).ok_or_else(|| {
                ApiError::field("limit", format!("'{l}' is not a whole number from 1 to {MAX_LIMIT}"))
            })?,
        };
    let (after, before) = (q.opt("starting_after"), q.opt("ending_before"));
    if after.is_some() && before.is_some() {
        return Err(ApiError::field("ending_before", "cannot be combined with starting_after").into());
    }
    let state = q.opt("trip_state").map(|v| TripState::parse("trip_state", v)).transpose()?;
    let (list, has_more) = trips::list_v2(s.store.as_ref(), &p, q.opt("user_id"), state, after, before, limit).await?;
    let mut rendered = Vec::with_capacity(list.len());
    for t in &list {
        rendered.push(render(&s, &p, t).await?);
    }
    Ok(V2Envelope::new(200, "trip_list_success", format!("{} trip(s) for the filters given", rendered.len()))
        .with("trips", json!(rendered))
        .with("has_more", json!(has_more)))
}

async fn update(
    Bearer(p): Bearer,
    State(s): State<AppState>,
    TripId(id): TripId,
    V2Json(b): V2Json<TripBody>,
) -> Result<V2Envelope, V2Error> {
    let replace = match b.stops {
        Some(list) => vec![(WaypointKind::Stop, stops(list)?)],
        None => Vec::new(),
    };
    let up = TripUpdate { user_id: b.user_id, name: b.name, description: b.description, metadata: b.metadata, replace };
    let trip = trips::update(s.store.as_ref(), &p, Api::V2, &id, up).await?;
    s.wake.notify_one();
    Ok(V2Envelope::new(200, "trip_updated", "Trip updated").with("trip", render(&s, &p, &trip).await?))
}

async fn delete(Bearer(p): Bearer, State(s): State<AppState>, TripId(id): TripId) -> Result<V2Envelope, V2Error> {
    let trip = trips::delete(s.store.as_ref(), &p, Api::V2, &id).await?;
    s.wake.notify_one();
    Ok(V2Envelope::new(200, "trip_deleted", "Trip deleted").with("trip", json!({"id": trip.id, "is_deleted": true})))
}

async fn summary(Bearer(p): Bearer, State(s): State<AppState>, TripId(id): TripId) -> Result<V2Envelope, V2Error> {
    let sum = trips::summary(s.store.as_ref(), &p, Api::V2, &id).await?;
    Ok(V2Envelope::new(200, "trip_summary", "Trip summary").with("summary", summary_json(sum, true)))
}

#[derive(Debug, Deserialize)]
struct ControlBody {
    action: String,
    #[serde(default)]
    started_at: Option<Timestamp>,
    #[serde(default)]
    paused_at: Option<Timestamp>,
    #[serde(default)]
    resumed_at: Option<Timestamp>,
    #[serde(default)]
    ended_at: Option<Timestamp>,
}

async fn controls(
    Bearer(p): Bearer,
    State(s): State<AppState>,
    TripId(id): TripId,
    V2Json(b): V2Json<ControlBody>,
) -> Result<V2Envelope, V2Error> {
    let action = Action::parse(&b.action)?;
    let at = action.pick([b.started_at, b.paused_at, b.resumed_at, b.ended_at]);
    let trip = shared::pipeline::controls::control(s.store.as_ref(), &p, Api::V2, &id, action, at).await?;
    s.wake.notify_one();
    // As Roam answers each move: 201 with the move's own message.
    let message = match action {
        Action::Start => "trip_started",
        Action::Pause => "trip_paused",
        Action::Resume => "trip_resumed",
        Action::End => "trip_ended",
    };
    Ok(V2Envelope::new(201, message, format!("Trip {}", trip.state.as_str()))
        .with("trip", render(&s, &p, &trip).await?))
}
