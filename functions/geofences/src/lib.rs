//! Geofences, v1 and v3: `/v{1,3}/api/geofence/` (create, update, list, delete one or many),
//! the v1 metadata-filter list at `GET /v1/api/geofence` (no trailing slash), and the geofence
//! events list `GET /v1/api/event/`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::geofences::view::{GeofenceView, view_json};
use shared::domain::geofences::{
    self, CreateGeofence, GeometryType, ListFilter, UpdateGeofence, events, geofence_json,
};
use shared::extract::parse_json_object;
use shared::http::route;
use shared::store::from_jsons;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ver {
    V1,
    V3,
}

impl Ver {
    /// The key of a fence's id: v1 answers `geofence_id` as Roam does, v3 `id`.
    fn id_key(self) -> &'static str {
        match self {
            Ver::V1 => "geofence_id",
            Ver::V3 => "id",
        }
    }
}

pub fn router() -> Router<AppState> {
    let common = |v: Ver| -> MethodRouter<AppState> {
        post(move |k, s, b| create(v, k, s, b)).put(move |k, s, b| update(v, k, s, b)).delete(delete)
    };
    Router::new()
        .route("/v1/api/geofence/", common(Ver::V1).get(|k, s, q| list(Ver::V1, k, s, q)))
        .route("/v1/api/geofence", common(Ver::V1).get(list_by_metadata))
        .merge(route(Router::new(), "/v3/api/geofence/", common(Ver::V3).get(|k, s, q| list(Ver::V3, k, s, q))))
        .merge(route(Router::new(), "/v1/api/event/", get(list_events)))
}

async fn create(
    ver: Ver,
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<CreateGeofence>,
) -> Result<Envelope<Value>, ApiError> {
    let g = geofences::create(s.store.as_ref(), &p, body).await?;
    let data = if g.scoped { geofences::scoped_created_json(&g) } else { geofence_json(&g, ver.id_key()) };
    Ok(Envelope::created("Geofence created successfully.", with_window(ver, &g, data)))
}

/// v3 answers a create and an update with the active window as `enable_at` / `disable_at` too
/// (Roam's v3 create page shows them), each a UTC time or null; v1 answers as before.
fn with_window(ver: Ver, g: &geofences::Geofence, mut data: Value) -> Value {
    if ver == Ver::V3 {
        data["enable_at"] = json!(g.active_from.map(|t| t.format(None)));
        data["disable_at"] = json!(g.active_until.map(|t| t.format(None)));
    }
    data
}

fn id_text(v: &Value) -> Result<String, ApiError> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(ApiError::field("geofence_id", "must be a geofence id")),
    }
}

async fn update(
    ver: Ver,
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<UpdateGeofence>,
) -> Result<Envelope<Value>, ApiError> {
    let id = id_text(&body.geofence_id)?;
    let g = geofences::update(s.store.as_ref(), &p, &id, body).await?;
    Ok(Envelope::ok(shared::envelope::SUCCESS, with_window(ver, &g, geofence_json(&g, ver.id_key()))))
}

/// Delete one (`geofence_id` in the query, or a string in the body) or many (an array of up to
/// 200 in the body).
async fn delete(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Envelope<Value>, ApiError> {
    let store = s.store.as_ref();
    let body = body.map_err(shared::extract::body_rejection)?;
    if let Some(id) = q.opt("geofence_id") {
        geofences::delete(store, &p, id).await?;
        return Ok(Envelope::ok("Geofence deleted", json!({})));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::field("geofence_id", "is required (in the query, or in a JSON body)"));
    }
    let json_body = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if !json_body {
        return Err(ApiError::field("Content-Type", "the body must be sent as application/json"));
    }
    #[derive(Deserialize)]
    struct DeleteBody {
        geofence_id: Value,
    }
    let b: DeleteBody = parse_json_object(&body)?;
    match &b.geofence_id {
        Value::Array(ids) => {
            let ids = ids.iter().map(id_text).collect::<Result<Vec<_>, _>>()?;
            let n = geofences::delete_many(store, &p, &ids).await?;
            Ok(Envelope::ok(format!("{n} geofence(s) deleted"), json!({})))
        }
        other => {
            geofences::delete(store, &p, &id_text(other)?).await?;
            Ok(Envelope::ok("Geofence deleted", json!({})))
        }
    }
}

/// A page of the list, fields sorted; fences as [`GeofenceView`]s or as `view_json` renders them.
#[derive(Serialize)]
struct FencesPage<'a, G> {
    account_id: &'a str,
    geofences: Vec<G>,
    next_page: Option<usize>,
    pages: usize,
    prev_page: Option<usize>,
    project_id: &'a str,
}

fn envelope_list<G: Serialize>(
    p: &shared::project::Project,
    info: shared::paging::PageInfo,
    geofences: Vec<G>,
) -> Response {
    let page = FencesPage {
        account_id: &p.account_id,
        geofences,
        next_page: info.next_page,
        pages: info.pages,
        prev_page: info.prev_page,
        project_id: &p.project_id,
    };
    Envelope::ok(shared::envelope::SUCCESS, page).into_response()
}

/// A fence as lists show it; with `count`, its `counts: {events, users}`.
async fn render<'a>(
    store: &dyn shared::store::Store,
    p: &shared::project::Project,
    g: &'a geofences::Geofence,
    ver: Ver,
    count: bool,
) -> Result<GeofenceView<'a>, ApiError> {
    let v = GeofenceView::new(g, ver.id_key());
    Ok(if count { v.with_counts(events::counts(store, p, &g.id).await?) } else { v })
}

async fn list(ver: Ver, SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Response, ApiError> {
    let store = s.store.as_ref();
    let known: &[&str] = match ver {
        Ver::V1 => &[
            "page_number",
            "color_code",
            "tag",
            "geometry_type",
            "geofence_id",
            "start_date",
            "end_date",
            "user_id",
            "group_id",
        ],
        Ver::V3 => &["page_number", "start_date", "end_date", "geofence_id", "count", "user_id", "group_id"],
    };
    q.only(known)?;
    let count = ver == Ver::V3 && q.bool("count", false)?;
    if ver == Ver::V3 {
        q.required("start_date")?;
        q.required("end_date")?;
    }
    if let Some(id) = q.opt("geofence_id") {
        let g = geofences::get(store, &p, id).await?;
        let info = shared::paging::PageInfo::new(shared::paging::PageNumber(1), 1);
        return Ok(envelope_list(&p, info, vec![render(store, &p, &g, ver, count).await?]));
    }
    let filter = ListFilter {
        range: q.date_range(None)?,
        user_id: q.opt("user_id").map(str::to_owned),
        group_id: q.opt("group_id").map(str::to_owned),
        color_code: if ver == Ver::V1 { q.opt("color_code").map(str::to_owned) } else { None },
        tag: if ver == Ver::V1 { q.opt("tag").map(str::to_owned) } else { None },
        geometry_type: match (ver, q.opt("geometry_type")) {
            (Ver::V1, Some(t)) => Some(GeometryType::parse("geometry_type", t)?),
            _ => None,
        },
        metadata: None,
    };
    let (docs, info) = geofences::list(store, &p, &filter, q.page_number()?).await?;
    if !count {
        let out = docs.iter().map(|d| view_json(d, ver.id_key())).collect::<Result<Vec<_>, _>>()?;
        return Ok(envelope_list(&p, info, out));
    }
    let list: Vec<geofences::Geofence> = from_jsons(&docs)?;
    let mut out = Vec::with_capacity(list.len());
    for g in &list {
        out.push(render(store, &p, g, ver, count).await?);
    }
    Ok(envelope_list(&p, info, out))
}

async fn list_by_metadata(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
) -> Result<Envelope<Value>, ApiError> {
    q.only(&["start_date", "end_date", "metadata", "page_number", "geofence_id", "user_id", "group_id"])?;
    // `?geofence_id=` on the bare path: that one fence, as on the slash path.
    if let Some(id) = q.opt("geofence_id") {
        let g = geofences::get(s.store.as_ref(), &p, id).await?;
        let data =
            json!({"next_page": null, "pages": 1, "prev_page": null, "geofences": [geofence_json(&g, "geofence_id")]});
        return Ok(Envelope::ok(shared::envelope::SUCCESS, data));
    }
    let filter = ListFilter {
        range: q.date_range(None)?,
        metadata: q.metadata_filter()?,
        user_id: q.opt("user_id").map(str::to_owned),
        group_id: q.opt("group_id").map(str::to_owned),
        ..ListFilter::default()
    };
    let (docs, info) = geofences::list(s.store.as_ref(), &p, &filter, q.page_number()?).await?;
    let list: Vec<geofences::Geofence> = from_jsons(&docs)?;
    let data = json!({
        "next_page": info.next_page, "pages": info.pages, "prev_page": info.prev_page,
        "geofences": list.iter().map(|g| geofence_json(g, "geofence_id")).collect::<Vec<_>>(),
    });
    Ok(Envelope::ok(shared::envelope::SUCCESS, data))
}

/// A page of events, fields sorted.
#[derive(Serialize)]
struct EventsPage {
    events: Vec<Box<serde_json::value::RawValue>>,
    next_page: Option<usize>,
    pages: usize,
    prev_page: Option<usize>,
}

async fn list_events(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Response, ApiError> {
    q.only(&["start_date", "end_date", "user_id", "geofence_id", "page_number"])?;
    q.required("start_date")?;
    q.required("end_date")?;
    let range = q.date_range(None)?.ok_or_else(|| ApiError::field("start_date", "is required"))?;
    let (list, info) =
        events::list(s.store.as_ref(), &p, range, q.opt("user_id"), q.opt("geofence_id"), q.page_number()?).await?;
    let page = EventsPage {
        events: list.iter().map(events::view_json).collect::<Result<_, _>>()?,
        next_page: info.next_page,
        pages: info.pages,
        prev_page: info.prev_page,
    };
    Ok(Envelope::ok(shared::envelope::SUCCESS, page).into_response())
}
