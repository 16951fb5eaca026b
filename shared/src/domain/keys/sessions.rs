//! Console sessions: what the console keeps in a browser tab instead of the secret key. The
//! secret key mints a session (`wm_cs_…`), a key of its own that acts as that secret key until it
//! expires, is signed out, or the key that minted it is revoked (docs/console.md).
//!
//! A session is a key item (`KEY#<sha256>`, what every request reads) with its expiry as the
//! item's TTL, so an expired session is gone for every read on both stores, and the cache of
//! [`super::authenticate`] checks the expiry too. It is not listed with the project's keys: the
//! project's session index (`<project>#CS`, sort key `<minting key id>#<session id>`, same TTL)
//! is what revoking the minting key reads to end its sessions.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{KEY_SK, KeyRecord, hash_secret, key_id, key_pk};
use crate::error::ApiError;
use crate::project::{KeyKind, Project};
use crate::store::{Cond, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;

/// What every console session starts with.
pub const PREFIX: &str = "wm_cs_";
/// A session's lifetime when the request names none (seconds): a working day.
pub const DEFAULT_TTL_SECONDS: i64 = 8 * 3600;
/// The longest lifetime a session may be given (seconds).
pub const MAX_TTL_SECONDS: i64 = 24 * 3600;
/// Most sessions one key may have alive at once; past it the oldest must expire or sign out.
pub const MAX_PER_KEY: usize = 50;

fn index_pk(project_id: &str) -> String {
    [project_id, "#CS"].concat()
}

/// What the project's session index holds of a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IndexEntry {
    hash: String,
    expires_at: i64,
}

/// A session's lifetime from the request's `ttl_seconds` (default [`DEFAULT_TTL_SECONDS`]).
pub fn parse_ttl(v: Option<&Value>) -> Result<i64, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(DEFAULT_TTL_SECONDS),
        Some(v) => v.as_i64().filter(|s| (60..=MAX_TTL_SECONDS).contains(s)).ok_or_else(|| {
            ApiError::field("ttl_seconds", format!("must be a whole number of seconds from 60 to {MAX_TTL_SECONDS}"))
        }),
    }
}

/// Mint a session for the secret key `key` of project `p`, valid for `ttl_seconds`. A session
/// cannot mint another (403): a stolen one must not outlive itself.
pub async fn mint(store: &dyn Store, p: &Project, key: &str, ttl_seconds: i64) -> Result<Value, ApiError> {
    if p.kind != KeyKind::Secret {
        return Err(ApiError::forbidden(
            "Api-Key: a console session is opened with the project's secret API key, not the publishable SDK key",
        ));
    }
    if key.starts_with(PREFIX) {
        return Err(ApiError::forbidden("Api-Key: a console session cannot open another; sign in with the secret key"));
    }
    let parent = key_id(&hash_secret(key));
    let alive = store
        .query(Table::Main, &Query::new(index_pk(&p.project_id), SkRange::Prefix(format!("{parent}#"))))
        .await?
        .items
        .len();
    if alive >= MAX_PER_KEY {
        return Err(ApiError::conflict(format!(
            "Api-Key: this key has {MAX_PER_KEY} console sessions open; sign out of some or wait for them to expire"
        )));
    }
    let token = [PREFIX, &crate::ids::random_hex(24)].concat();
    let hash = hash_secret(&token);
    let session_id = key_id(&hash);
    // Whole seconds, as the store's TTL: at least `ttl_seconds`, less than one more.
    let expires_s = Timestamp::now().0.timestamp() + ttl_seconds + 1;
    let expires = Timestamp(chrono::DateTime::from_timestamp(expires_s, 0).unwrap_or_default());
    let record = KeyRecord {
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        kind: KeyKind::Secret,
        last_used_at: None,
        listed: false,
        revoked_at: None,
        expires_at: Some(expires_s),
    };
    let entry = IndexEntry { hash: hash.clone(), expires_at: expires_s };
    store
        .transact(vec![
            WriteOp::Put { table: Table::Main, item: to_item(&key_pk(&hash), KEY_SK, &record)?, cond: Cond::NotExists },
            WriteOp::Put {
                table: Table::Main,
                item: to_item(&index_pk(&p.project_id), &format!("{parent}#{session_id}"), &entry)?,
                cond: Cond::NotExists,
            },
        ])
        .await?;
    Ok(json!({"token": token, "session_id": session_id, "expires_at": expires.format(None)}))
}

/// Sign out: the session `token` (of project `p`) authenticates nothing from now on (at once on
/// this instance; within [`super::KEY_CACHE_SECONDS`] on others). 400 for a key that is no session.
pub async fn sign_out(store: &dyn Store, p: &Project, token: &str) -> Result<Value, ApiError> {
    if !token.starts_with(PREFIX) {
        return Err(ApiError::field("Api-Key", "is not a console session: send the session's token to sign out"));
    }
    let hash = hash_secret(token);
    end(store, p, &hash).await?;
    Ok(json!({"session_id": key_id(&hash), "signed_out": true}))
}

/// End the project's session `session_id` (the secret key signs a tab out). 404 when the
/// project has no such live session.
pub async fn revoke(store: &dyn Store, p: &Project, session_id: &str) -> Result<Value, ApiError> {
    let entries = store.query(Table::Main, &Query::new(index_pk(&p.project_id), SkRange::All)).await?.items;
    let suffix = format!("#{session_id}");
    let Some(item) = entries.into_iter().find(|i| sk_of(i).ends_with(&suffix)) else {
        return Err(ApiError::not_found(format!("session_id: no live console session '{session_id}' in this project")));
    };
    let entry: IndexEntry = from_item(item)?;
    end(store, p, &entry.hash).await?;
    Ok(json!({"session_id": session_id, "signed_out": true}))
}

/// End the session with this hash: its key item deleted (nothing of it is worth keeping) and
/// its index entry with it, wherever that is.
async fn end(store: &dyn Store, p: &Project, hash: &str) -> Result<(), ApiError> {
    let session_id = key_id(hash);
    let entries = store.query(Table::Main, &Query::new(index_pk(&p.project_id), SkRange::All)).await?.items;
    let mut ops = vec![WriteOp::Delete { table: Table::Main, pk: key_pk(hash), sk: KEY_SK.into(), cond: Cond::None }];
    for item in entries {
        let sk = sk_of(&item);
        if sk.ends_with(&format!("#{session_id}")) {
            ops.push(WriteOp::Delete { table: Table::Main, pk: index_pk(&p.project_id), sk, cond: Cond::None });
        }
    }
    store.transact(ops).await?;
    super::forget(hash);
    Ok(())
}

/// End every session the key with hash `parent_hash` minted (the key was revoked).
pub(super) async fn end_minted_by(store: &dyn Store, project_id: &str, parent_hash: &str) -> Result<(), StoreError> {
    let q = Query::new(index_pk(project_id), SkRange::Prefix(format!("{}#", key_id(parent_hash))));
    for item in store.query(Table::Main, &q).await?.items {
        let sk = sk_of(&item);
        let entry: IndexEntry = from_item(item)?;
        store
            .transact(vec![
                WriteOp::Delete { table: Table::Main, pk: key_pk(&entry.hash), sk: KEY_SK.into(), cond: Cond::None },
                WriteOp::Delete { table: Table::Main, pk: index_pk(project_id), sk, cond: Cond::None },
            ])
            .await?;
        super::forget(&entry.hash);
    }
    Ok(())
}

fn sk_of(item: &crate::store::Item) -> String {
    item.get("sk").and_then(Value::as_str).unwrap_or_default().to_owned()
}
