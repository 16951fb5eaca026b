//! `/v1/api/project/settings/`: the authenticated project's settings (Waymark's own). Secret API
//! key only; the project is the key's, so a key reads and changes its own project's settings only.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Map, Value};
use shared::auth::SecretKey;
use shared::domain::settings::{self, SettingsUpdate};
use shared::http::route;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

pub fn router() -> Router<AppState> {
    route(Router::new(), "/v1/api/project/settings/", get(read).put(update))
}

async fn read(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&[])?;
    let current = settings::get(s.store.as_ref(), &p.project_id).await?;
    Ok(Envelope::ok("Project settings", current.to_json()))
}

async fn update(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Envelope<Value>, ApiError> {
    let up = SettingsUpdate::parse(&body)?;
    let current = settings::update(s.store.as_ref(), &p, up).await?;
    Ok(Envelope::ok("Project settings updated", current.to_json()))
}
