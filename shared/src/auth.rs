//! Keys and tokens. A project has a secret API key (`Api-Key` header, everything), a publishable
//! SDK key (shipped inside apps: only ingest and user create/update) and a v2 access token
//! (`Authorization: Bearer`). Only their SHA-256 hashes are stored.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, V2Error};
use crate::state::AppState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    Secret,
    Publishable,
    Access,
}

impl KeyKind {
    /// The visible prefix of a generated key, so a leaked key says what it is.
    pub fn prefix(self) -> &'static str {
        match self {
            KeyKind::Secret => "wm_sk_",
            KeyKind::Publishable => "wm_pk_",
            KeyKind::Access => "wm_at_",
        }
    }
}

/// The project a request acts for, resolved from its key. Every storage key is built from
/// `project_id` taken from here, never from request input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Project {
    pub project_id: String,
    pub account_id: String,
    pub kind: KeyKind,
}

pub fn hash_secret(secret: &str) -> String {
    // Into a buffer, then one string: `hex::encode` collects its digits a char at a time (a
    // tenth of a key check).
    let mut digits = [0u8; 64];
    let _ = hex::encode_to_slice(Sha256::digest(secret.as_bytes()), &mut digits);
    String::from_utf8_lossy(&digits).into_owned()
}

pub fn key_pk(hash: &str) -> String {
    ["KEY#", hash].concat()
}
pub const KEY_SK: &str = "KEY";

/// A new random key of `kind`: its prefix and 128 random bits.
pub fn generate_key(kind: KeyKind) -> String {
    format!("{}{}", kind.prefix(), crate::ids::random_hex(16))
}

async fn resolve(state: &AppState, secret: &str) -> Result<Option<Project>, ApiError> {
    // Longer than any key we issue or accept: refuse before hashing attacker-sized input.
    if secret.is_empty() || secret.len() > 256 {
        return Ok(None);
    }
    crate::domain::keys::authenticate(state.store.as_ref(), secret).await
}

fn header<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

async fn api_key(parts: &Parts, state: &AppState) -> Result<Project, ApiError> {
    let key = header(parts, "api-key").ok_or_else(|| ApiError::unauthorized("Api-Key: header is required"))?;
    match resolve(state, key).await? {
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
        let p = api_key(parts, state).await?;
        if p.kind == KeyKind::Publishable {
            return Err(ApiError::forbidden(
                "Api-Key: this is the publishable SDK key; it may only ingest locations and create or update users. Use the secret API key",
            ));
        }
        Ok(Self(p))
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
        match resolve(state, token).await? {
            Some(p) if matches!(p.kind, KeyKind::Access | KeyKind::Secret) => Ok(Self(p)),
            _ => Err(ApiError::unauthorized("Authorization: not a valid access token or secret API key").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_stored_as_its_sha256_in_lowercase_hex() {
        // FIPS 180-2's example.
        assert_eq!(hash_secret("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(key_pk(&hash_secret("")), "KEY#e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
