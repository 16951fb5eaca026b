//! `/v1/api/user/`: create (SDK), list or get, update (SDK), delete.

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use shared::auth::{SdkKey, SecretKey};
use shared::domain::users::{self, CreateUser, UpdateUser, UsersPage, created_json, user_json};
use shared::http::route;
use shared::pipeline::erasure;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

const PATH: &str = "/v1/api/user/";

pub fn router() -> Router<AppState> {
    route(Router::new(), PATH, post(create).get(list).put(update).delete(delete))
}

async fn create(
    SdkKey(p): SdkKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<CreateUser>,
) -> Result<Envelope<Value>, ApiError> {
    let user = users::create(s.store.as_ref(), &p, body).await?;
    Ok(Envelope::created(shared::envelope::SUCCESS, created_json(&user)))
}

/// Parameters that may not be combined with `user_id`.
const LIST_FILTERS: [&str; 5] = ["start_date", "end_date", "page_number", "metadata", "timezone_offset"];

async fn list(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Response, ApiError> {
    q.only(&["user_id", "timezone_offset", "start_date", "end_date", "page_number", "metadata"])?;
    if let Some(id) = q.opt("user_id") {
        if let Some(other) = LIST_FILTERS.iter().find(|f| q.has(f)) {
            return Err(ApiError::field("user_id", format!("use it alone; it cannot be combined with {other}")));
        }
        let user = users::require_listed(s.store.as_ref(), &p, "user_id", id).await?;
        let page = UsersPage {
            account_id: &p.account_id,
            next_page: None,
            pages: 1,
            prev_page: None,
            users: vec![users::view_json(&user, None)?],
        };
        return Ok(Envelope::ok(shared::envelope::SUCCESS, page).into_response());
    }
    let tz = q.timezone()?;
    let range = q.date_range(tz)?;
    let filter = q.metadata_filter()?;
    let (list, info) = users::list(s.store.as_ref(), &p, range, filter.as_ref(), q.page_number()?).await?;
    let users: Vec<_> = list.iter().map(|u| users::view_json(u, tz)).collect::<Result<_, _>>()?;
    let bytes = users.iter().map(|u| u.get().len()).sum();
    let page = UsersPage {
        account_id: &p.account_id,
        next_page: info.next_page,
        pages: info.pages,
        prev_page: info.prev_page,
        users,
    };
    Ok(Envelope::ok(shared::envelope::SUCCESS, page).into_response_sized(bytes))
}

async fn update(
    SdkKey(p): SdkKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<UpdateUser>,
) -> Result<Envelope<Value>, ApiError> {
    let user = users::update(s.store.as_ref(), &p, body).await?;
    Ok(Envelope::ok("User updated", user_json(&user, None)))
}

/// Erase the user (see `shared::pipeline::erasure`): 200 when done within the request's budget,
/// else 202 while the sweep (or a repeated DELETE) finishes; every read is a 404 already.
async fn delete(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    let deadline = std::time::Instant::now() + erasure::REQUEST_BUDGET;
    let e = erasure::erase(s.store.as_ref(), &p, q.required("user_id")?, deadline).await?;
    let data = json!({"user_id": e.user_id, "is_deleted": true, "erased": e.complete, "items_erased": e.items});
    Ok(if e.complete {
        Envelope::ok("User deleted", data)
    } else {
        Envelope { code: 202, msg: "User deleted; erasure of their data continues".into(), data }
    })
}
