//! `/v1/api/group/user/`: add users to a group (PUT as described, POST as the sample sends).

use axum::Router;
use axum::extract::State;
use axum::routing::put;
use shared::auth::SecretKey;
use shared::domain::groups::{self, AddUsers};
use shared::http::route;
use shared::{ApiError, ApiJson, AppState, Envelope};

const PATH: &str = "/v1/api/group/user/";

/// Every operation this function serves: (HTTP method, path with its trailing slash).
pub const ROUTES: &[(&str, &str)] = &[("PUT", PATH), ("POST", PATH)];

pub fn router() -> Router<AppState> {
    route(Router::new(), PATH, put(add_users).post(add_users))
}

async fn add_users(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<AddUsers>,
) -> Result<Envelope<String>, ApiError> {
    let group = body.group_id.clone();
    let n = groups::add_users(s.store.as_ref(), &p, body).await?;
    Ok(Envelope::created("Users added to group", format!("{n} user(s) added to group {group}")))
}
