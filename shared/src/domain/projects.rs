//! Projects and their keys, and the default project of `waymark serve`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::keys;
use crate::domain::keys::generate_key;
use crate::error::ApiError;
use crate::ids::new_id;
use crate::project::{KeyKind, Project};
use crate::store::{Cond, Store, StoreError, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProjectRecord {
    pub id: String,
    pub account_id: String,
    pub name: String,
    pub created_at: Timestamp,
}

/// A project with its keys in clear: printed once, at creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedProject {
    pub project_id: String,
    pub account_id: String,
    pub api_key: String,
    pub publishable_key: String,
    pub access_token: String,
}

/// Keys to use instead of generated ones (each None is generated).
#[derive(Debug, Clone, Default)]
pub struct ChosenKeys {
    pub api_key: Option<String>,
    pub publishable_key: Option<String>,
    pub access_token: Option<String>,
}

fn project_pk(id: &str) -> String {
    ["PROJECT#", id].concat()
}
const DEFAULT_PK: &str = "DEFAULT_PROJECT";

/// The account a project belongs to (for work that starts from a stored item, not a key).
pub async fn account_of(store: &dyn Store, project_id: &str) -> Result<String, ApiError> {
    let item = store
        .get(Table::Main, &project_pk(project_id), "PROJECT")
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project_id: no project '{project_id}'")))?;
    Ok(crate::store::from_item::<ProjectRecord>(item)?.account_id)
}

fn pick(chosen: &Option<String>, kind: KeyKind) -> Result<String, ApiError> {
    match chosen {
        Some(k) if k.len() < 16 || k.len() > 256 => {
            Err(ApiError::bad_request(format!("a {kind:?} key must be 16 to 256 characters long")))
        }
        Some(k) => Ok(k.clone()),
        None => Ok(generate_key(kind)),
    }
}

/// Create a project and issue its three keys, all in one transaction.
pub async fn create(store: &dyn Store, name: &str, keys: &ChosenKeys) -> Result<IssuedProject, ApiError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(ApiError::field("name", "must be 1 to 200 characters"));
    }
    let issued = IssuedProject {
        project_id: new_id(),
        account_id: new_id(),
        api_key: pick(&keys.api_key, KeyKind::Secret)?,
        publishable_key: pick(&keys.publishable_key, KeyKind::Publishable)?,
        access_token: pick(&keys.access_token, KeyKind::Access)?,
    };
    let record = ProjectRecord {
        id: issued.project_id.clone(),
        account_id: issued.account_id.clone(),
        name: name.to_owned(),
        created_at: Timestamp::now(),
    };
    let as_kind = |kind| Project { project_id: issued.project_id.clone(), account_id: issued.account_id.clone(), kind };
    let now = record.created_at;
    let mut ops = vec![WriteOp::Put {
        table: Table::Main,
        item: to_item(&project_pk(&record.id), "PROJECT", &record)?,
        cond: Cond::NotExists,
    }];
    ops.extend(keys::register_ops(&as_kind(KeyKind::Secret), &issued.api_key, "issued with the project", now)?);
    ops.extend(keys::register_ops(
        &as_kind(KeyKind::Publishable),
        &issued.publishable_key,
        "issued with the project",
        now,
    )?);
    ops.extend(keys::register_ops(&as_kind(KeyKind::Access), &issued.access_token, "issued with the project", now)?);
    match store.transact(ops).await {
        Ok(()) => Ok(issued),
        Err(StoreError::ConditionFailed) => Err(ApiError::conflict("a chosen key is already in use by a project")),
        Err(e) => Err(e.into()),
    }
}

/// Register `secret` as a key of the project; a no-op when it already is. Returns false when the
/// key was revoked (it can never be registered again).
async fn register_key(store: &dyn Store, project: &Project, secret: &str) -> Result<bool, ApiError> {
    match keys::registered(store, project, secret).await? {
        Some(live) => Ok(live),
        None => match store.transact(keys::register_ops(project, secret, "default project", Timestamp::now())?).await {
            Ok(()) => Ok(true),
            // Registered meanwhile (another process starting): as that one says.
            Err(StoreError::ConditionFailed) => Ok(keys::registered(store, project, secret).await?.unwrap_or(false)),
            Err(e) => Err(e.into()),
        },
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct DefaultMarker {
    project_id: String,
    account_id: String,
}

/// The name of the file where `waymark serve` leaves the default project's keys.
pub const DEFAULT_PROJECT_FILE: &str = "default-project.json";

/// Make sure the default project exists and return it with usable keys. Keys come from `chosen`
/// (env), else from the file a previous run left in `data_dir`, else are generated; each is
/// registered for the project (hashes only) and the result written back to the file.
pub async fn ensure_default(
    store: &dyn Store,
    data_dir: Option<&Path>,
    chosen: &ChosenKeys,
) -> Result<IssuedProject, ApiError> {
    let file = data_dir.map(|d| d.join(DEFAULT_PROJECT_FILE));
    let saved: Option<IssuedProject> =
        file.as_ref().and_then(|f| std::fs::read(f).ok()).and_then(|b| serde_json::from_slice(&b).ok());
    let marker = store.get(Table::Main, DEFAULT_PK, "-").await?.map(from_item::<DefaultMarker>).transpose()?;
    let issued = match marker {
        None => {
            let issued = create(store, "default", chosen).await?;
            let m = DefaultMarker { project_id: issued.project_id.clone(), account_id: issued.account_id.clone() };
            match store.put(Table::Main, to_item(DEFAULT_PK, "-", &m)?, Cond::NotExists).await {
                Ok(()) => issued,
                // Another process made the default project first: use that one.
                Err(StoreError::ConditionFailed) => return Box::pin(ensure_default(store, data_dir, chosen)).await,
                Err(e) => return Err(e.into()),
            }
        }
        Some(m) => {
            let saved = saved.filter(|s| s.project_id == m.project_id);
            let choose = |c: &Option<String>, s: Option<&String>, kind| {
                c.clone().or_else(|| s.cloned()).unwrap_or_else(|| generate_key(kind))
            };
            let mut issued = IssuedProject {
                project_id: m.project_id.clone(),
                account_id: m.account_id.clone(),
                api_key: choose(&chosen.api_key, saved.as_ref().map(|s| &s.api_key), KeyKind::Secret),
                publishable_key: choose(
                    &chosen.publishable_key,
                    saved.as_ref().map(|s| &s.publishable_key),
                    KeyKind::Publishable,
                ),
                access_token: choose(&chosen.access_token, saved.as_ref().map(|s| &s.access_token), KeyKind::Access),
            };
            for (secret, from_env, kind, var) in [
                (&mut issued.api_key, chosen.api_key.is_some(), KeyKind::Secret, "WAYMARK_API_KEY"),
                (
                    &mut issued.publishable_key,
                    chosen.publishable_key.is_some(),
                    KeyKind::Publishable,
                    "WAYMARK_PUBLISHABLE_KEY",
                ),
                (&mut issued.access_token, chosen.access_token.is_some(), KeyKind::Access, "WAYMARK_ACCESS_TOKEN"),
            ] {
                let p = Project { project_id: m.project_id.clone(), account_id: m.account_id.clone(), kind };
                if !register_key(store, &p, secret).await? {
                    // A saved key that was revoked is replaced; a chosen one is the operator's to change.
                    if from_env {
                        return Err(ApiError::conflict(format!("{var}: this key was revoked; set another")));
                    }
                    *secret = generate_key(kind);
                    register_key(store, &p, secret).await?;
                }
            }
            issued
        }
    };
    if let Some(f) = file {
        let json = serde_json::to_vec_pretty(&issued).map_err(ApiError::internal)?;
        write_private(&f, &json).map_err(|e| ApiError::internal(format!("writing {}: {e}", f.display())))?;
    }
    Ok(issued)
}

/// Write a file only its owner can read: it holds keys in clear.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)
}
