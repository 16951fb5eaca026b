//! Groups of users. Membership is written twice in one transaction so both questions are one
//! Query: who is in a group (`<project>#G#<group>` → user ids) and which groups a user is in
//! (`<project>#UG#<user>` → group ids).

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use crate::auth::Project;
use crate::error::ApiError;
use crate::store::{Cond, MAX_TRANSACT_OPS, Query, SkRange, Store, Table, WriteOp, to_item};
use crate::time::Timestamp;

use super::users;

/// Most users added in one call.
pub const MAX_USERS_PER_CALL: usize = 1000;

#[derive(Debug, Deserialize)]
pub struct AddUsers {
    pub group_id: String,
    pub users: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Membership {
    group_id: String,
    user_id: String,
    added_at: Timestamp,
}

fn members_pk(project_id: &str, group_id: &str) -> String {
    format!("{project_id}#G#{group_id}")
}
fn groups_of_pk(project_id: &str, user_id: &str) -> String {
    format!("{project_id}#UG#{user_id}")
}

/// Group ids are the customer's own names: 1 to 128 of letters, digits and `-_.:`.
pub fn check_group_id(id: &str) -> Result<(), ApiError> {
    let ok = (1..=128).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok { Ok(()) } else { Err(ApiError::field("group_id", "must be 1 to 128 letters, digits or -_.:")) }
}

/// Add users (all must be live users of this project) to the group, creating it on first use.
/// Adding a member again changes nothing.
pub async fn add_users(store: &dyn Store, p: &Project, input: AddUsers) -> Result<usize, ApiError> {
    check_group_id(&input.group_id)?;
    if input.users.is_empty() || input.users.len() > MAX_USERS_PER_CALL {
        return Err(ApiError::field("users", format!("must hold 1 to {MAX_USERS_PER_CALL} user ids")));
    }
    let mut ids = input.users.clone();
    ids.sort();
    ids.dedup();
    for id in &ids {
        users::check_user_id("users", id)?;
    }
    let found: Vec<bool> = futures::stream::iter(ids.clone())
        .map(|id| async move { users::get(store, p, &id).await.map(|u| u.is_some()) })
        .buffered(16)
        .try_collect()
        .await?;
    let unknown: Vec<&str> = ids.iter().zip(&found).filter(|(_, f)| !**f).map(|(id, _)| id.as_str()).collect();
    if !unknown.is_empty() {
        return Err(ApiError::not_found(format!("users: no such user in this project: {}", unknown.join(", "))));
    }
    let now = Timestamp::now();
    for chunk in ids.chunks(MAX_TRANSACT_OPS / 2) {
        let mut ops = Vec::with_capacity(chunk.len() * 2);
        for uid in chunk {
            let m = Membership { group_id: input.group_id.clone(), user_id: uid.clone(), added_at: now };
            let a = to_item(&members_pk(&p.project_id, &input.group_id), uid, &m)?;
            let b = to_item(&groups_of_pk(&p.project_id, uid), &input.group_id, &m)?;
            ops.push(WriteOp::Put { table: Table::Main, item: a, cond: Cond::None });
            ops.push(WriteOp::Put { table: Table::Main, item: b, cond: Cond::None });
        }
        store.transact(ops).await?;
    }
    Ok(ids.len())
}

async fn sort_keys(store: &dyn Store, pk: &str) -> Result<Vec<String>, ApiError> {
    let page = store.query(Table::Main, &Query::new(pk, SkRange::All)).await?;
    Ok(page.items.iter().filter_map(|i| i.get("sk").and_then(|v| v.as_str()).map(str::to_owned)).collect())
}

/// Whether the group has any member (one item read, not the whole group).
pub async fn exists(store: &dyn Store, p: &Project, group_id: &str) -> Result<bool, ApiError> {
    let q = Query::new(members_pk(&p.project_id, group_id), SkRange::All).limit(1);
    Ok(!store.query(Table::Main, &q).await?.items.is_empty())
}

/// Users in the group, by id.
pub async fn members(store: &dyn Store, p: &Project, group_id: &str) -> Result<Vec<String>, ApiError> {
    sort_keys(store, &members_pk(&p.project_id, group_id)).await
}

/// Groups the user is in, by id.
pub async fn groups_of(store: &dyn Store, p: &Project, user_id: &str) -> Result<Vec<String>, ApiError> {
    sort_keys(store, &groups_of_pk(&p.project_id, user_id)).await
}
