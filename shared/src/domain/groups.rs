//! Groups of users. Membership is written twice in one transaction so both questions are one
//! Query: who is in a group (`<project>#G#<group>` → user ids) and which groups a user is in
//! (`<project>#UG#<user>` → group ids). A group made by the create operation also has a record
//! (`<project>#GR`, sort key its id) with its description; a group named by the caller when
//! adding users has none (Roam's add-users call creates groups on first use).

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::ids::new_id;
use crate::metadata::check_text;
use crate::project::Project;
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

pub(crate) fn members_pk(project_id: &str, group_id: &str) -> String {
    [project_id, "#G#", group_id].concat()
}
pub(crate) fn groups_of_pk(project_id: &str, user_id: &str) -> String {
    [project_id, "#UG#", user_id].concat()
}

/// Group ids are the customer's own names: 1 to 128 of letters, digits and `-_.:`.
pub fn check_group_id(id: &str) -> Result<(), ApiError> {
    let ok = (1..=128).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok { Ok(()) } else { Err(ApiError::field("group_id", "must be 1 to 128 letters, digits or -_.:")) }
}

/// Create body (Roam documents `description`; `users`, the first members, is Waymark's).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewGroup {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub users: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub group_id: String,
    pub project_id: String,
    pub description: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

fn groups_pk(project_id: &str) -> String {
    [project_id, "#GR"].concat()
}

/// Create a group with a new id, and its first members when given (all must be users of this
/// project; nothing is written otherwise). Returns the group and its members.
pub async fn create(store: &dyn Store, p: &Project, input: NewGroup) -> Result<(Group, Vec<String>), ApiError> {
    check_text("description", &input.description)?;
    let members = match &input.users {
        Some(u) => checked_users(store, p, u).await?,
        None => Vec::new(),
    };
    let now = Timestamp::now();
    let g = Group {
        group_id: new_id(),
        project_id: p.project_id.clone(),
        description: input.description,
        created_at: now,
        updated_at: now,
    };
    // The record first: a group with members always has its record, whatever fails after.
    store.put(Table::Main, to_item(&groups_pk(&p.project_id), &g.group_id, &g)?, Cond::NotExists).await?;
    write_members(store, p, &g.group_id, &members).await?;
    Ok((g, members))
}

/// The ids given (deduplicated, sorted), once every one is a user of this project.
async fn checked_users(store: &dyn Store, p: &Project, users: &[String]) -> Result<Vec<String>, ApiError> {
    if users.is_empty() || users.len() > MAX_USERS_PER_CALL {
        return Err(ApiError::field("users", format!("must hold 1 to {MAX_USERS_PER_CALL} user ids")));
    }
    let mut ids = users.to_vec();
    ids.sort();
    ids.dedup();
    for id in &ids {
        users::check_user_id("users", id)?;
    }
    let found: Vec<bool> = futures::stream::iter(ids.clone())
        .map(|id| async move { users::record(store, p, &id).await.map(|u| u.is_some()) })
        .buffered(16)
        .try_collect()
        .await?;
    let unknown: Vec<&str> = ids.iter().zip(&found).filter(|(_, f)| !**f).map(|(id, _)| id.as_str()).collect();
    if !unknown.is_empty() {
        return Err(ApiError::not_found(format!("users: no such user in this project: {}", unknown.join(", "))));
    }
    Ok(ids)
}

async fn write_members(store: &dyn Store, p: &Project, group_id: &str, ids: &[String]) -> Result<(), ApiError> {
    let now = Timestamp::now();
    for chunk in ids.chunks(MAX_TRANSACT_OPS / 2) {
        let mut ops = Vec::with_capacity(chunk.len() * 2);
        for uid in chunk {
            let m = Membership { group_id: group_id.to_owned(), user_id: uid.clone(), added_at: now };
            let a = to_item(&members_pk(&p.project_id, group_id), uid, &m)?;
            let b = to_item(&groups_of_pk(&p.project_id, uid), group_id, &m)?;
            ops.push(WriteOp::Put { table: Table::Main, item: a, cond: Cond::None });
            ops.push(WriteOp::Put { table: Table::Main, item: b, cond: Cond::None });
        }
        store.transact(ops).await?;
    }
    Ok(())
}

/// Add users (all must be live users of this project) to the group, creating it on first use.
/// Adding a member again changes nothing.
pub async fn add_users(store: &dyn Store, p: &Project, input: AddUsers) -> Result<usize, ApiError> {
    check_group_id(&input.group_id)?;
    let ids = checked_users(store, p, &input.users).await?;
    write_members(store, p, &input.group_id, &ids).await?;
    Ok(ids.len())
}

async fn sort_keys(store: &dyn Store, pk: &str) -> Result<Vec<String>, ApiError> {
    sort_keys_of(store, Query::new(pk, SkRange::All)).await
}

async fn sort_keys_of(store: &dyn Store, q: Query) -> Result<Vec<String>, ApiError> {
    let page = store.query(Table::Main, &q).await?;
    Ok(page.items.iter().filter_map(|i| i.get("sk").and_then(|v| v.as_str()).map(str::to_owned)).collect())
}

/// Whether the group was created or has any member (at most two item reads).
pub async fn exists(store: &dyn Store, p: &Project, group_id: &str) -> Result<bool, ApiError> {
    if store.get(Table::Main, &groups_pk(&p.project_id), group_id).await?.is_some() {
        return Ok(true);
    }
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

/// [`groups_of`] read eventually consistent (half a read unit): what a processing pass reads
/// for a fence's scope on every batch, where a membership changed a moment ago may count a
/// batch later.
pub async fn groups_of_eventually(store: &dyn Store, p: &Project, user_id: &str) -> Result<Vec<String>, ApiError> {
    sort_keys_of(store, Query::new(groups_of_pk(&p.project_id, user_id), SkRange::All).eventual()).await
}
