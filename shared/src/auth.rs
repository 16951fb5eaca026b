//! Who is asking, at the HTTP edge: the extractors that resolve a request's key or token to the
//! [`Project`] it acts for (see `domain::keys` for the keys themselves).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::http_error::V2Error;
use crate::project::{KeyKind, Project};
use crate::state::AppState;
use crate::store::Store;

async fn resolve(store: &dyn Store, secret: &str) -> Result<Option<Project>, ApiError> {
    // Longer than any key we issue or accept: refuse before hashing attacker-sized input.
    if secret.is_empty() || secret.len() > 256 {
        return Ok(None);
    }
    crate::domain::keys::authenticate(store, secret).await
}

fn header<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

fn api_key_header(parts: &Parts) -> Result<&str, ApiError> {
    header(parts, "api-key").ok_or_else(|| ApiError::unauthorized("Api-Key: header is required"))
}

async fn api_key(parts: &Parts, state: &AppState) -> Result<Project, ApiError> {
    match resolve(state.store.as_ref(), api_key_header(parts)?).await? {
        Some(p) if p.kind != KeyKind::Access => Ok(p),
        _ => Err(ApiError::unauthorized("Api-Key: not a valid API key")),
    }
}

/// The secret API key: every v1/v3 operation.
#[derive(Debug, Clone)]
pub struct SecretKey(pub Project);

impl FromRequestParts<AppState> for SecretKey {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        secret_project(state.store.as_ref(), api_key_header(parts)?).await.map(Self)
    }
}

/// The project of a secret API key, as [`SecretKey`] extracts it: for callers without a
/// request's parts (the WebSocket function's handshake).
pub async fn secret_project(store: &dyn Store, key: &str) -> Result<Project, ApiError> {
    match resolve(store, key).await? {
        Some(p) if p.kind == KeyKind::Secret => Ok(p),
        Some(p) if p.kind == KeyKind::Publishable => Err(ApiError::forbidden(
            "Api-Key: this is the publishable SDK key; it may only ingest locations and create or update users. Use the secret API key",
        )),
        _ => Err(ApiError::unauthorized("Api-Key: not a valid API key")),
    }
}

/// The secret key or the publishable SDK key: the operations an app performs itself.
#[derive(Debug, Clone)]
pub struct SdkKey(pub Project);

impl FromRequestParts<AppState> for SdkKey {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        api_key(parts, state).await.map(Self)
    }
}

/// `Authorization: Bearer <access token>`: the v2 trip API. The secret API key is taken too, as
/// Roam's v2 documents `Bearer <API-KEY>`.
#[derive(Debug, Clone)]
pub struct Bearer(pub Project);

impl FromRequestParts<AppState> for Bearer {
    type Rejection = V2Error;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, V2Error> {
        let value = header(parts, "authorization")
            .ok_or_else(|| ApiError::unauthorized("Authorization: header 'Bearer <access token>' is required"))?;
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .ok_or_else(|| ApiError::unauthorized("Authorization: must be 'Bearer <access token>'"))?;
        match resolve(state.store.as_ref(), token).await? {
            Some(p) if matches!(p.kind, KeyKind::Access | KeyKind::Secret) => Ok(Self(p)),
            _ => Err(ApiError::unauthorized("Authorization: not a valid access token or secret API key").into()),
        }
    }
}
