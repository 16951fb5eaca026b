//! `/v1/api/location/`: list a user's history (GET) and ingest a batch from the SDK (POST);
//! `/v1/api/location/gpx/`: the history of a time range as a GPX 1.1 track (Waymark's own).

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use serde_json::{Value, json};
use shared::auth::{SdkKey, SecretKey};
use shared::domain::locations::view::view_json;
use shared::domain::locations::{self, IngestBatch};
use shared::domain::users;
use shared::http::route;
use shared::pipeline::ingest;
use shared::{ApiError, ApiJson, AppState, Envelope, GpxFile, Params};

const PATH: &str = "/v1/api/location/";

const GPX_PATH: &str = "/v1/api/location/gpx/";

pub fn router() -> Router<AppState> {
    route(route(Router::new(), PATH, get(list).post(ingest)), GPX_PATH, get(gpx))
}

/// A user's locations over `start_date`..`end_date` (dates or date-times; all when left out) as
/// one GPX track.
async fn gpx(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<GpxFile, ApiError> {
    let store = s.store.as_ref();
    q.only(&["user_id", "start_date", "end_date", "timezone_offset"])?;
    let user = users::require_ref(store, &p, "user_id", q.required("user_id")?).await?;
    let locs = locations::in_range(store, &p, &user.id, q.date_range(q.timezone()?)?).await?;
    let body = shared::domain::export::gpx_track(&format!("user {}", user.id), locs.iter().map(Into::into))?;
    Ok(GpxFile { filename: format!("locations-{}.gpx", user.id), body })
}

async fn list(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Response, ApiError> {
    let store = s.store.as_ref();
    q.only(&["user_id", "timezone_offset", "start_date", "end_date", "page_number", "points_encoded"])?;
    let user = users::require_ref(store, &p, "user_id", q.required("user_id")?).await?;
    let tz = q.timezone()?;
    let range = q.date_range(tz)?;
    let app_id = user.app_id();
    if q.bool("points_encoded", false)? {
        let (count, polyline, time_aware) = locations::encoded(store, &p, &user.id, range).await?;
        let data = json!({
            "next_page": null, "pages": usize::from(count > 0), "prev_page": null,
            "app_id": app_id, "user_id": user.id,
            "count": count, "polyline": polyline, "time_aware_polyline": time_aware,
        });
        return Ok(Envelope::ok(shared::envelope::SUCCESS, data).into_response());
    }
    let (list, info) = locations::list(store, &p, &user.id, range, q.page_number()?).await?;
    let page = LocationsPage {
        app_id,
        locations: list.iter().map(|doc| view_json(doc, tz)).collect::<Result<_, _>>()?,
        next_page: info.next_page,
        pages: info.pages,
        prev_page: info.prev_page,
        user_id: &user.id,
    };
    Ok(Envelope::ok(shared::envelope::SUCCESS, page).into_response())
}

/// A page of a user's history, fields sorted.
#[derive(Serialize)]
struct LocationsPage<'a> {
    app_id: String,
    locations: Vec<Box<serde_json::value::RawValue>>,
    next_page: Option<usize>,
    pages: usize,
    prev_page: Option<usize>,
    user_id: &'a str,
}

async fn ingest(
    SdkKey(p): SdkKey,
    State(s): State<AppState>,
    ApiJson(batch): ApiJson<IngestBatch>,
) -> Result<Envelope<Value>, ApiError> {
    let store = s.store.as_ref();
    locations::validate_batch(&batch)?;
    let user = users::require_for_ingest(store, &p, "user_id", &batch.user_id).await?;
    let user_id = user.id.clone();
    let outcome = ingest::ingest(store, &p, &user_id, Some(user), batch.locations).await?;
    if outcome.queued {
        s.wake.notify_one();
    }
    Ok(Envelope::created("Locations stored", outcome.json(&user_id)))
}
