//! Trips, v1 and v3: `/v{1,3}/api/trips/` (create, list/get, update, delete), `summary/`,
//! and Waymark's lifecycle operations `controls/` and `quick/`; the trip events list
//! `/v1/api/event/trips/`.

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use shared::auth::SecretKey;
use shared::domain::trips::render::SummaryBody;
use shared::domain::trips::view::TripV1View;
use shared::domain::trips::view::tracking_url;
use shared::domain::trips::{
    self, Action, Api, ListFilter, NewTrip, Trip, TripType, TripUpdate, WaypointInput, WaypointKind,
};
use shared::domain::trips::{eta, link};
use shared::geometry::LngLat;
use shared::http::route;
use shared::project::Project;
use shared::time::Timestamp;
use shared::{ApiError, ApiJson, AppState, Envelope, GpxFile, Params};

/// A trip's route (the locations of its active time, as the summary's `route`) as a GPX track
/// (Waymark's own).
async fn gpx(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<GpxFile, ApiError> {
    q.only(&["trip_id"])?;
    let sum = trips::summary(s.store.as_ref(), &p, Api::V1, q.required("trip_id")?).await?;
    let points = sum.route.points.iter().map(|r| (&r.location).into());
    let body = shared::domain::export::gpx_track(&format!("trip {}", sum.trip.id), points)?;
    Ok(GpxFile { filename: format!("trip-{}.gpx", sum.trip.id), body })
}

/// Roam's export: `data.download_url`, a link to the trip's GPX that works without the key (the
/// trip's tracking token: see [`link::gpx_url`]). `type` is Roam's format name; only `gpx` exists.
async fn export(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&["trip_id", "type"])?;
    let id = q.required("trip_id")?;
    let ty = q.required("type")?;
    if !ty.eq_ignore_ascii_case("gpx") {
        return Err(ApiError::field("type", format!("'{ty}' is not an export format; the one format is gpx")));
    }
    let url = link::gpx_url(s.store.as_ref(), &p, &s.config.tracking_base_url, id, Timestamp::now()).await?;
    Ok(Envelope::ok(shared::envelope::SUCCESS, json!({"download_url": url})))
}

const EVENTS_PATH: &str = "/v1/api/event/trips/";

/// A user's trip events in a date range, newest first (Roam's "Get Trip Events").
async fn events(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&["user_id", "trip_id", "start_date", "end_date", "page_number"])?;
    let user_id = q.required("user_id")?;
    q.required("start_date")?;
    let range = q.date_range(None)?.ok_or_else(|| ApiError::field("start_date", "is required"))?;
    let page = q.page_number()?;
    let store = s.store.as_ref();
    shared::domain::users::require_ref(store, &p, "user_id", user_id).await?;
    let trip = match q.opt("trip_id") {
        // Events of v2 trips are listed too: the trip may be of either generation.
        Some(t) => Some(match trips::get(store, &p, Api::V2, t).await {
            Ok(trip) => trip,
            Err(_) => trips::get(store, &p, Api::V1, t).await?,
        }),
        None => None,
    };
    let (list, info) = trips::events::list(store, &p, user_id, trip.as_ref(), range, page).await?;
    let events: Vec<Value> = list.iter().map(trips::events::listed_json).collect();
    Ok(Envelope::ok(
        shared::envelope::SUCCESS,
        json!({"next_page": info.next_page, "pages": info.pages, "prev_page": info.prev_page, "events": events}),
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ver {
    V1,
    V3,
}

pub fn router() -> Router<AppState> {
    let mut r = route(Router::new(), EVENTS_PATH, get(events));
    for (ver, base) in [(Ver::V1, "/v1/api/trips/"), (Ver::V3, "/v3/api/trips/")] {
        r = route(r, base, post(create).put(update).get(move |k, s, q| list(ver, k, s, q)).delete(delete));
        r = route(r, &format!("{base}summary/"), get(move |k, s, h, q| summary(ver, k, s, h, q)));
        r = route(r, &format!("{base}gpx/"), get(gpx));
        r = route(r, &format!("{base}export/"), get(export));
        r = route(r, &format!("{base}controls/"), post(controls));
        r = route(r, &format!("{base}quick/"), post(quick));
    }
    shared::http::compress_long(route(r, "/v1/api/trips/revoke-link/", post(revoke_link)))
}

/// Create body (also the quick trip's): every field optional.
#[derive(Debug, Deserialize)]
struct CreateBody {
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    origins: Option<Vec<LngLat>>,
    #[serde(default)]
    destinations: Option<Vec<LngLat>>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// Sent by Roam clients on create (undocumented): true creates the trip started, as `quick/`.
    #[serde(default)]
    is_started: Option<bool>,
}

fn waypoints(kind: WaypointKind, list: Option<Vec<LngLat>>) -> Vec<WaypointInput> {
    list.unwrap_or_default()
        .into_iter()
        .map(|c| WaypointInput {
            kind,
            coordinates: c,
            radius_m: None,
            name: None,
            description: None,
            metadata: None,
            address: None,
        })
        .collect()
}

impl CreateBody {
    fn into_new(self) -> NewTrip {
        let mut w = waypoints(WaypointKind::Origin, self.origins);
        w.extend(waypoints(WaypointKind::Destination, self.destinations));
        NewTrip { user_id: self.user_id, metadata: self.metadata, waypoints: w, ..NewTrip::default() }
    }
}

/// A trip in the v1/v3 shape, with its ETA now (read from its latest fixes while under way).
async fn render<'a>(s: &AppState, p: &Project, t: &'a Trip) -> Result<TripV1View<'a>, ApiError> {
    let eta = eta::for_trip(s.store.as_ref(), p, t, Timestamp::now()).await?;
    Ok(TripV1View::new(t, &s.config.tracking_base_url, eta.as_ref()))
}

/// A page of the v1 list, fields sorted.
#[derive(Serialize)]
struct TripsPage {
    next_page: Option<usize>,
    pages: usize,
    prev_page: Option<usize>,
    trips: Vec<Box<serde_json::value::RawValue>>,
}

async fn create(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<Envelope<Value>, ApiError> {
    if body.is_started == Some(true) {
        let trip = shared::pipeline::controls::quick(s.store.as_ref(), &p, Api::V1, body.into_new()).await?;
        s.wake.notify_one();
        return Ok(Envelope::created(shared::envelope::SUCCESS, json!([render(&s, &p, &trip).await?])));
    }
    let mut trip = trips::create(s.store.as_ref(), &p, Api::V1, body.into_new()).await?;
    // Trip events may have queued messages: the delivery worker naps until woken.
    s.wake.notify_one();
    // The creation event is recorded; the response shows the trip as created, events empty.
    trip.events.clear();
    Ok(Envelope::created(shared::envelope::SUCCESS, json!([render(&s, &p, &trip).await?])))
}

async fn list(ver: Ver, SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Response, ApiError> {
    let store = s.store.as_ref();
    q.only(&["trip_id", "user_id", "start_date", "end_date", "page_number", "metadata", "trip_type"])?;
    let trip_type = q.opt("trip_type").map(TripType::parse).transpose()?.flatten();
    if let Some(id) = q.opt("trip_id") {
        let trip = trips::get(store, &p, Api::V1, id).await?;
        // With `trip_type` too: the trip if it is of that type, else none.
        let mut one = Vec::new();
        if trip_type.is_none_or(|k| k.matches(&trip)) {
            one.push(render(&s, &p, &trip).await?);
        }
        return Ok(Envelope::ok(shared::envelope::SUCCESS, one).into_response());
    }
    if ver == Ver::V3 {
        q.required("start_date")?;
        q.required("end_date")?;
    }
    let filter = ListFilter {
        user_id: q.opt("user_id").map(str::to_owned),
        range: q.date_range(None)?,
        metadata: q.metadata_filter()?,
        trip_type,
    };
    let (list, info) = trips::list_v1(store, &p, &filter, q.page_number()?).await?;
    let now = Timestamp::now();
    let mut rendered = Vec::with_capacity(list.len());
    for t in &list {
        rendered.push(trips::view::v1_json(store, &p, &s.config.tracking_base_url, t, now).await?);
    }
    Ok(match ver {
        Ver::V3 => Envelope::ok(shared::envelope::SUCCESS, rendered).into_response(),
        Ver::V1 => {
            let page =
                TripsPage { next_page: info.next_page, pages: info.pages, prev_page: info.prev_page, trips: rendered };
            Envelope::ok(shared::envelope::SUCCESS, page).into_response()
        }
    })
}

#[derive(Debug, Deserialize)]
struct UpdateBody {
    trip_id: String,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    origins: Option<Vec<LngLat>>,
    #[serde(default)]
    destinations: Option<Vec<LngLat>>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

async fn update(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<UpdateBody>,
) -> Result<Envelope<Value>, ApiError> {
    let mut replace = Vec::new();
    if b.origins.is_some() {
        replace.push((WaypointKind::Origin, waypoints(WaypointKind::Origin, b.origins)));
    }
    if b.destinations.is_some() {
        replace.push((WaypointKind::Destination, waypoints(WaypointKind::Destination, b.destinations)));
    }
    let up = TripUpdate { user_id: b.user_id, metadata: b.metadata, replace, ..TripUpdate::default() };
    let trip = trips::update(s.store.as_ref(), &p, Api::V1, &b.trip_id, up).await?;
    s.wake.notify_one();
    Ok(Envelope::created(shared::envelope::SUCCESS, json!([render(&s, &p, &trip).await?])))
}

async fn delete(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&["trip_id"])?;
    trips::delete(s.store.as_ref(), &p, Api::V1, q.required("trip_id")?).await?;
    s.wake.notify_one();
    Ok(Envelope::ok("Trip deleted successfully", Value::Null))
}

/// A long summary (over 1 MB) is sent in pieces as they are written, gzipped on every core when
/// the client accepts it (`shared::streamed`); a short one whole. The figures are computed before
/// either: an error is still an error answer.
async fn summary(
    ver: Ver,
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    q: Params,
) -> Result<Response, ApiError> {
    q.only(&["trip_id"])?;
    let sum = trips::summary(s.store.as_ref(), &p, Api::V1, q.required("trip_id")?).await?;
    let body = SummaryBody { summary: sum, detailed: ver == Ver::V1 };
    if body.long() {
        let pieces = body.in_pieces(shared::domain::trips::render::PIECE_POINTS).map_err(ApiError::internal)?;
        return Ok(shared::streamed::answer(std::sync::Arc::new(pieces), shared::streamed::accepts_gzip(&headers)));
    }
    Ok(shared::envelope::json_written(axum::http::StatusCode::OK, body.to_json()))
}

/// A lifecycle move: `action` and, optionally, the time of the move in its own field.
#[derive(Debug, Deserialize)]
struct ControlBody {
    trip_id: String,
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
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<ControlBody>,
) -> Result<Envelope<Value>, ApiError> {
    let action = Action::parse(&b.action)?;
    let at = action.pick([b.started_at, b.paused_at, b.resumed_at, b.ended_at]);
    let trip = shared::pipeline::controls::control(s.store.as_ref(), &p, Api::V1, &b.trip_id, action, at).await?;
    s.wake.notify_one();
    Ok(Envelope::ok(shared::envelope::SUCCESS, json!([render(&s, &p, &trip).await?])))
}

async fn quick(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<Envelope<Value>, ApiError> {
    let trip = shared::pipeline::controls::quick(s.store.as_ref(), &p, Api::V1, body.into_new()).await?;
    s.wake.notify_one();
    Ok(Envelope::created("Trip created and started", json!([render(&s, &p, &trip).await?])))
}

#[derive(Debug, Deserialize)]
struct RevokeBody {
    trip_id: String,
}

/// A new tracking link for a trip of any version (v1/v3 or v2); the old link is a 404 at once.
async fn revoke_link(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<RevokeBody>,
) -> Result<Envelope<Value>, ApiError> {
    let trip = link::revoke(s.store.as_ref(), &p, &b.trip_id).await?;
    let url = tracking_url(&s.config.tracking_base_url, &trip);
    Ok(Envelope::ok(
        "Tracking link revoked; a new one is issued",
        json!({"trip_id": trip.id, "trip_tracking_url": url}),
    ))
}
