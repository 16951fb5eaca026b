//! `/v1/api/keys/`: the authenticated project's keys (Waymark's own). Secret API key only; the
//! project is the key's, so a key lists, creates and revokes its own project's keys only.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::keys;
use shared::http::route;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

pub fn router() -> Router<AppState> {
    route(Router::new(), "/v1/api/keys/", get(list).post(create).delete(revoke))
}

async fn list(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&[])?;
    let all = keys::list(s.store.as_ref(), &p.project_id).await?;
    Ok(Envelope::ok("Keys listed", json!({"keys": all})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKey {
    kind: String,
    label: Option<String>,
}

async fn create(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<NewKey>,
) -> Result<Envelope<Value>, ApiError> {
    let kind = keys::parse_kind("kind", &body.kind)?;
    let label = keys::parse_label(body.label.as_deref())?;
    let (mut entry, secret) = keys::create(s.store.as_ref(), &p.project_id, &p.account_id, kind, &label).await?;
    entry["key"] = secret.into();
    Ok(Envelope::created("Key created; it is shown only now", entry))
}

async fn revoke(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&["key_id"])?;
    let key_id = q.required("key_id")?;
    let entry = keys::revoke(s.store.as_ref(), &p.project_id, key_id).await?;
    Ok(Envelope::ok("Key revoked", entry))
}
