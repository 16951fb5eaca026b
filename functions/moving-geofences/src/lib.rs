//! Moving geofences: `/v3/api/moving-geofence/` create, update, list, delete, and the same at
//! `/v1/api/moving-geofence/` (Roam documents both).

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::geofences::moving::{self, CreateMoving, moving_json};
use shared::domain::geofences::{UpdateGeofence, events};
use shared::http::route;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

pub fn router() -> Router<AppState> {
    let ops = || post(create).put(update).get(list).delete(delete);
    route(route(Router::new(), "/v1/api/moving-geofence/", ops()), "/v3/api/moving-geofence/", ops())
}

async fn create(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<CreateMoving>,
) -> Result<Envelope<Value>, ApiError> {
    let g = moving::create(s.store.as_ref(), &p, body).await?;
    Ok(Envelope::created("Moving geofence created", moving_json(&g)))
}

async fn update(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<UpdateGeofence>,
) -> Result<Envelope<Value>, ApiError> {
    let id = match &b.geofence_id {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err(ApiError::field("geofence_id", "must be a geofence id")),
    };
    let g = moving::update(s.store.as_ref(), &p, &id, b).await?;
    Ok(Envelope::ok(shared::envelope::SUCCESS, moving_json(&g)))
}

async fn list(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    let store = s.store.as_ref();
    q.only(&["start_date", "end_date", "geofence_id", "page_number", "count"])?;
    q.required("start_date")?;
    q.required("end_date")?;
    let count = q.bool("count", false)?;
    let (list, info) = match q.opt("geofence_id") {
        Some(id) => {
            let g = moving::get(store, &p, id).await?;
            (vec![g], shared::paging::PageInfo::new(shared::paging::PageNumber(1), 1))
        }
        None => {
            let range = q.date_range(None)?.ok_or_else(|| ApiError::field("start_date", "is required"))?;
            moving::list(store, &p, range, q.page_number()?).await?
        }
    };
    let mut users: Vec<&String> = list.iter().flat_map(|g| &g.users).collect();
    users.sort();
    users.dedup();
    let mut fences = Vec::with_capacity(list.len());
    for g in &list {
        let mut v = moving_json(g);
        if count {
            v["counts"] = events::counts(store, &p, &g.id).await?;
        }
        fences.push(v);
    }
    let data = json!({
        "next_page": info.next_page, "pages": info.pages, "prev_page": info.prev_page,
        "account_id": p.account_id, "project_id": p.project_id, "users": users, "geofences": fences,
    });
    Ok(Envelope::ok(shared::envelope::SUCCESS, data))
}

async fn delete(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    moving::delete(s.store.as_ref(), &p, q.required("geofence_id")?).await?;
    Ok(Envelope::ok("Moving geofence deleted", json!({})))
}
