//! `/v1/api/group/`: create a group (with its first members, Waymark's addition);
//! `/v1/api/group/user/`: add users to a group (PUT as described, POST as the sample sends).

use axum::Router;
use axum::extract::State;
use axum::routing::{post, put};
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::groups::{self, AddUsers, NewGroup};
use shared::http::route;
use shared::{ApiError, ApiJson, AppState, Envelope};

const PATH: &str = "/v1/api/group/user/";
const CREATE_PATH: &str = "/v1/api/group/";

pub fn router() -> Router<AppState> {
    let r = route(Router::new(), CREATE_PATH, post(create));
    route(r, PATH, put(add_users).post(add_users))
}

/// Roam's create-group answer (`group_id`, `project_id`, `description`, timestamps) and the
/// members (`users`).
async fn create(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<NewGroup>,
) -> Result<Envelope<Value>, ApiError> {
    let (g, users) = groups::create(s.store.as_ref(), &p, body).await?;
    Ok(Envelope::created(
        shared::envelope::SUCCESS,
        json!({
            "group_id": g.group_id, "project_id": g.project_id, "description": g.description,
            "users": users, "created_at": g.created_at.format(None), "updated_at": g.updated_at.format(None),
        }),
    ))
}

async fn add_users(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<AddUsers>,
) -> Result<Envelope<String>, ApiError> {
    let group = body.group_id.clone();
    let n = groups::add_users(s.store.as_ref(), &p, body).await?;
    Ok(Envelope::created(shared::envelope::SUCCESS, format!("{n} user(s) added to group {group}")))
}
