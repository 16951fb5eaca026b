//! `/v1/api/streams/tokens/`: stream tokens, what a browser opens a stream with instead of the
//! secret key (docs/streams.md, "Stream tokens"): POST mints one for a filter, DELETE
//! `?token_id=` revokes it. Secret key (or a console session) only. Here, beside the keys, so
//! that the HTTP API serves it on AWS as `waymark serve` does.

use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::streams::{Filter, tokens};
use shared::domain::trips::stream_filter::resolve_filter;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewToken {
    user_id: Option<String>,
    group_id: Option<String>,
    trip_id: Option<String>,
    events: Option<String>,
    ttl_seconds: Option<Value>,
}

/// Mint a stream token for one filter, checked against the project as a stream checks it.
pub(crate) async fn mint(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    ApiJson(b): ApiJson<NewToken>,
) -> Result<Envelope<Value>, ApiError> {
    let filter = Filter::parse(b.user_id.as_deref(), b.group_id.as_deref(), b.trip_id.as_deref(), b.events.as_deref())?;
    let ttl = tokens::parse_ttl(b.ttl_seconds.as_ref())?;
    resolve_filter(s.store.as_ref(), &p, &filter).await?;
    // The token holds while the key (or console session) that minted it does.
    let minted = tokens::mint(s.store.as_ref(), &p, filter, ttl, Some(crate::api_key(&headers))).await?;
    Ok(Envelope::created("Stream token created; it is shown only now", minted.json))
}

pub(crate) async fn revoke(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
) -> Result<Envelope<Value>, ApiError> {
    q.only(&["token_id"])?;
    let id = q.required("token_id")?;
    tokens::revoke(s.store.as_ref(), &p, id).await?;
    Ok(Envelope::ok("Stream token revoked", json!({"token_id": id})))
}
