//! `/v1/api/keys/`: the authenticated project's keys (Waymark's own). Secret API key only; the
//! project is the key's, so a key lists, creates and revokes its own project's keys only.
//!
//! `/v1/api/console/sessions/`: console sessions, keys the secret key opens for a browser tab
//! (`shared::domain::keys::sessions`; docs/console.md): POST signs in, DELETE with the session
//! as `Api-Key` signs it out, DELETE `?session_id=` with the secret key ends one.
//!
//! `/v1/api/streams/tokens/`: stream tokens ([`stream_tokens`]).

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::keys::{self, sessions};
use shared::http::route;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

pub fn router() -> Router<AppState> {
    let r = route(Router::new(), "/v1/api/keys/", get(list).post(create).delete(revoke));
    let r = route(r, "/v1/api/console/sessions/", post(sign_in).delete(sign_out));
    route(r, "/v1/api/streams/tokens/", post(stream_tokens::mint).delete(stream_tokens::revoke))
}

mod stream_tokens;

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

/// A console session may not make or revoke keys: a stolen tab's token must not buy a key that
/// outlives it.
fn not_a_session(headers: &HeaderMap) -> Result<(), ApiError> {
    if api_key(headers).starts_with(sessions::PREFIX) {
        return Err(ApiError::forbidden("Api-Key: a console session cannot create or revoke keys; use the secret key"));
    }
    Ok(())
}

async fn create(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<NewKey>,
) -> Result<Envelope<Value>, ApiError> {
    not_a_session(&headers)?;
    let kind = keys::parse_kind("kind", &body.kind)?;
    let label = keys::parse_label(body.label.as_deref())?;
    let (mut entry, secret) = keys::create(s.store.as_ref(), &p.project_id, &p.account_id, kind, &label).await?;
    entry["key"] = secret.into();
    Ok(Envelope::created("Key created; it is shown only now", entry))
}

async fn revoke(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Params,
) -> Result<Envelope<Value>, ApiError> {
    not_a_session(&headers)?;
    q.only(&["key_id"])?;
    let key_id = q.required("key_id")?;
    let entry = keys::revoke(s.store.as_ref(), &p.project_id, key_id).await?;
    Ok(Envelope::ok("Key revoked", entry))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SignIn {
    ttl_seconds: Option<Value>,
}

fn api_key(headers: &HeaderMap) -> &str {
    headers.get("api-key").and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or("")
}

/// Sign in: the secret key opens a console session (its token shown only now). No body is `{}`.
async fn sign_in(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Envelope<Value>, ApiError> {
    let key = api_key(&headers);
    if key.is_empty() {
        return Err(ApiError::unauthorized("Api-Key: header is required"));
    }
    // Resolved here, not by the extractor, so that the publishable key is told what it is.
    let Some(p) = keys::authenticate(s.store.as_ref(), key).await? else {
        return Err(ApiError::unauthorized("Api-Key: not a valid API key"));
    };
    let b: SignIn = if body.iter().all(u8::is_ascii_whitespace) {
        SignIn::default()
    } else {
        shared::extract::parse_json_object(&body)?
    };
    let ttl = sessions::parse_ttl(b.ttl_seconds.as_ref())?;
    let data = sessions::mint(s.store.as_ref(), &p, key, ttl).await?;
    Ok(Envelope::created("Console session opened; its token is shown only now", data))
}

/// Sign out (the session sent as `Api-Key`), or end the session `session_id` (the secret key).
async fn sign_out(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Params,
) -> Result<Envelope<Value>, ApiError> {
    q.only(&["session_id"])?;
    let data = match q.opt("session_id") {
        Some(id) => sessions::revoke(s.store.as_ref(), &p, id).await?,
        None => sessions::sign_out(s.store.as_ref(), &p, api_key(&headers)).await?,
    };
    Ok(Envelope::ok("Signed out", data))
}
