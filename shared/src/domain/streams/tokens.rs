//! Stream tokens: what a browser shows instead of the secret key (`EventSource` cannot set
//! headers). The secret key mints one for one filter; it opens streams of that filter only, of
//! its project only, until it expires or is revoked (docs/streams.md).
//!
//! A token is stored as its hash (`STOKEN#<sha256>`, what a stream reads to authenticate) with
//! the project, the filter and its expiry as the item's TTL, so an expired token is gone for
//! every read on both stores. The project's index (`<project>#STK`, sort key the token id, same
//! TTL) lets the secret key revoke it by id: revoking deletes both.
//!
//! A token minted by a key names it (its hash) and holds only while that key does: revoking the
//! key, or signing out of the console session that minted it, ends the token too (read through
//! the key cache: at once on `waymark serve`, within `keys::KEY_CACHE_SECONDS` on AWS), and a
//! session's token never outlives the session.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Filter;
use crate::error::ApiError;
use crate::expiry::TTL_ATTRIBUTE;
use crate::project::{KeyKind, Project};
use crate::store::{Cond, Store, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;

/// A token's lifetime when the request names none (seconds).
pub const DEFAULT_TTL_SECONDS: i64 = 15 * 60;
/// The longest lifetime a token may be given (seconds).
pub const MAX_TTL_SECONDS: i64 = 24 * 3600;
/// What every stream token starts with.
pub const PREFIX: &str = "wm_st_";

const SK: &str = "-";

/// What `STOKEN#<hash>` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TokenRecord {
    project_id: String,
    account_id: String,
    token_id: String,
    filter: Filter,
    expires_at_time: Timestamp,
    /// The hash of the key (or console session) that minted it; none for a tracking page's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minted_by: Option<String>,
}

/// What the project's index holds of a token.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IndexEntry {
    hash: String,
}

fn token_pk(hash: &str) -> String {
    ["STOKEN#", hash].concat()
}

fn index_pk(project_id: &str) -> String {
    [project_id, "#STK"].concat()
}

/// A token's lifetime from the request's `ttl_seconds` (default [`DEFAULT_TTL_SECONDS`]).
pub fn parse_ttl(v: Option<&Value>) -> Result<i64, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(DEFAULT_TTL_SECONDS),
        Some(v) => match v.as_i64() {
            Some(s) if (1..=MAX_TTL_SECONDS).contains(&s) => Ok(s),
            _ => Err(ApiError::field(
                "ttl_seconds",
                format!("must be a whole number of seconds from 1 to {MAX_TTL_SECONDS}"),
            )),
        },
    }
}

/// A minted token: the secret (shown once) and what the answer says of it.
pub struct Minted {
    pub token: String,
    pub json: Value,
}

/// Mint a token of project `p` for `filter` (already checked against the project by the
/// caller), valid for `ttl_seconds`, or until the key `minted_by` (the request's `Api-Key`, when a
/// key minted it) stops authenticating, whichever is first.
pub async fn mint(
    store: &dyn Store,
    p: &Project,
    filter: Filter,
    ttl_seconds: i64,
    minted_by: Option<&str>,
) -> Result<Minted, ApiError> {
    let token = [PREFIX, &crate::ids::random_hex(24)].concat();
    let hash = crate::domain::keys::hash_secret(&token);
    let token_id = crate::ids::random_hex(12);
    // In whole seconds, as the store's TTL: at least `ttl_seconds`, less than one more.
    let mut expires_s = Timestamp::now().0.timestamp() + ttl_seconds + 1;
    let minted_by = minted_by.map(crate::domain::keys::hash_secret);
    if let Some(parent) = &minted_by {
        let Some(key) = crate::domain::keys::live_record(store, parent).await? else {
            return Err(ApiError::unauthorized("Api-Key: not a valid API key"));
        };
        // A console session's token ends with the session.
        expires_s = key.expires_at.map_or(expires_s, |e| e.min(expires_s));
    }
    let expires = Timestamp(chrono::DateTime::from_timestamp(expires_s, 0).unwrap_or_default());
    let record = TokenRecord {
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        token_id: token_id.clone(),
        filter: filter.clone(),
        expires_at_time: expires,
        minted_by,
    };
    let ttl = json!(expires_s);
    let mut item = to_item(&token_pk(&hash), SK, &record)?;
    item.insert(TTL_ATTRIBUTE.into(), ttl.clone());
    let mut entry = to_item(&index_pk(&p.project_id), &token_id, &IndexEntry { hash })?;
    entry.insert(TTL_ATTRIBUTE.into(), ttl);
    store
        .transact(vec![
            WriteOp::Put { table: Table::Main, item, cond: Cond::NotExists },
            WriteOp::Put { table: Table::Main, item: entry, cond: Cond::NotExists },
        ])
        .await?;
    let json = json!({
        "token": token, "token_id": token_id, "expires_at": expires.format(None),
        "filter": filter_json(&filter),
    });
    Ok(Minted { token, json })
}

/// The filter as the answer shows it (the query parameters a stream takes).
fn filter_json(f: &Filter) -> Value {
    let mut out = json!({});
    match &f.scope {
        super::Scope::Project => {}
        super::Scope::User(u) => out["user_id"] = json!(u),
        super::Scope::Group(g) => out["group_id"] = json!(g),
        super::Scope::Trip(t) => out["trip_id"] = json!(t),
    }
    out["events"] = f.types.as_ref().map_or(json!("*"), |t| json!(t.join(",")));
    out
}

/// The project (acting as its secret key would for streams) and the filter of a live token;
/// None for an unknown, expired or revoked one.
pub async fn authenticate(store: &dyn Store, token: &str) -> Result<Option<(Project, Filter)>, ApiError> {
    if !token.starts_with(PREFIX) {
        return Ok(None);
    }
    let hash = crate::domain::keys::hash_secret(token);
    let Some(item) = store.get(Table::Main, &token_pk(&hash), SK).await? else { return Ok(None) };
    let r: TokenRecord = from_item(item)?;
    if !minter_holds(store, &r).await? {
        return Ok(None);
    }
    let p = Project { project_id: r.project_id, account_id: r.account_id, kind: KeyKind::Secret };
    Ok(Some((p, r.filter)))
}

/// Revoke the project's token `token_id`: it opens nothing from now on, and streams it opened
/// close at their next message. 404 when the project has no such live token.
pub async fn revoke(store: &dyn Store, p: &Project, token_id: &str) -> Result<(), ApiError> {
    let missing = || ApiError::not_found(format!("token_id: no live stream token '{token_id}' in this project"));
    let Some(item) = store.get(Table::Main, &index_pk(&p.project_id), token_id).await? else { return Err(missing()) };
    let entry: IndexEntry = from_item(item)?;
    store
        .transact(vec![
            WriteOp::Delete { table: Table::Main, pk: token_pk(&entry.hash), sk: SK.into(), cond: Cond::None },
            WriteOp::Delete {
                table: Table::Main,
                pk: index_pk(&p.project_id),
                sk: token_id.to_owned(),
                cond: Cond::Exists,
            },
        ])
        .await
        .map_err(|e| match e {
            crate::store::StoreError::ConditionFailed => missing(),
            e => e.into(),
        })
}

/// Whether the token with this hash (as a connection keeps it) is still live: not expired, not
/// revoked.
pub async fn live_hash(store: &dyn Store, hash: &str) -> Result<bool, ApiError> {
    match store.get(Table::Main, &token_pk(hash), SK).await? {
        Some(item) => minter_holds(store, &from_item(item)?).await,
        None => Ok(false),
    }
}

/// Whether the key that minted the token still authenticates (a token no key minted: yes).
async fn minter_holds(store: &dyn Store, r: &TokenRecord) -> Result<bool, ApiError> {
    match &r.minted_by {
        Some(h) => Ok(crate::domain::keys::live_record(store, h).await?.is_some()),
        None => Ok(true),
    }
}
