//! A project's keys: several of each kind, listed without the key itself, created (shown once)
//! and revoked. A key is stored as its hash (`KEY#<sha256>`, what every request reads to
//! authenticate) and listed in the project's key index (`<project>#KEYS`, `K#<key_id>`, derived
//! from the hash). A revoked key's item becomes a tombstone: it never authenticates again, and
//! the same key cannot be registered again. Console sessions, keys the secret key mints for a
//! browser tab, are in [`sessions`].

pub mod sessions;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::project::{KeyKind, Project};
use crate::store::{Cond, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, from_json, to_item};
use crate::time::Timestamp;
use crate::ttl_cache::TtlCache;

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

/// `last_used_at` is written at most this often per key (seconds): one write an hour, not one per
/// request.
pub const LAST_USED_GRANULARITY_SECONDS: i64 = 3600;
/// Longest label.
pub const MAX_LABEL_CHARS: usize = 200;
/// Most keys a project holds.
pub const MAX_KEYS: usize = 100;

/// What `KEY#<hash>` holds: the project a key acts for and what the index needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyRecord {
    pub project_id: String,
    pub account_id: String,
    pub kind: KeyKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
    /// Whether the project's key index lists it (false again once revoked).
    #[serde(default)]
    pub listed: bool,
    /// Set when revoked: the key authenticates nothing any more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// A console session's end (Unix seconds; the item's TTL): it authenticates nothing after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl KeyRecord {
    fn project(&self) -> Project {
        Project { project_id: self.project_id.clone(), account_id: self.account_id.clone(), kind: self.kind }
    }
}

/// An entry of the project's key index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyEntry {
    pub key_id: String,
    pub kind: KeyKind,
    pub label: String,
    pub created_at: Timestamp,
    /// The key's prefix and last four characters, so people can tell keys apart.
    pub hint: String,
    hash: String,
}

fn index_pk(project_id: &str) -> String {
    [project_id, "#KEYS"].concat()
}
fn entry_sk(key_id: &str) -> String {
    format!("K#{key_id}")
}

/// The public id of the key with hash `hash`.
pub fn key_id(hash: &str) -> String {
    hex::encode(&Sha256::digest(format!("key-id#{hash}").as_bytes())[..12])
}

fn hint(secret: &str) -> String {
    let tail: String = secret.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    let prefix = [KeyKind::Secret, KeyKind::Publishable, KeyKind::Access]
        .iter()
        .map(|k| k.prefix())
        .find(|p| secret.starts_with(p))
        .unwrap_or("");
    format!("{prefix}…{tail}")
}

fn kind_name(kind: KeyKind) -> &'static str {
    match kind {
        KeyKind::Secret => "secret",
        KeyKind::Publishable => "publishable",
        KeyKind::Access => "access",
    }
}

impl KeyEntry {
    pub fn json(&self, last_used_at: Option<Timestamp>) -> Value {
        json!({
            "key_id": self.key_id, "kind": kind_name(self.kind), "label": self.label,
            "hint": self.hint,
            "created_at": self.created_at.format(None),
            "last_used_at": last_used_at.map(|t| t.format(None)),
        })
    }
}

/// The writes that register `secret` for the project: its key item (only where no item is,
/// revoked ones included) and its index entry.
pub fn register_ops(p: &Project, secret: &str, label: &str, now: Timestamp) -> Result<Vec<WriteOp>, StoreError> {
    let hash = hash_secret(secret);
    let record = KeyRecord {
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        kind: p.kind,
        last_used_at: None,
        listed: true,
        revoked_at: None,
        expires_at: None,
    };
    let entry = KeyEntry {
        key_id: key_id(&hash),
        kind: p.kind,
        label: label.to_owned(),
        created_at: now,
        hint: hint(secret),
        hash: hash.clone(),
    };
    Ok(vec![
        WriteOp::Put { table: Table::Main, item: to_item(&key_pk(&hash), KEY_SK, &record)?, cond: Cond::NotExists },
        WriteOp::Put {
            table: Table::Main,
            item: to_item(&index_pk(&p.project_id), &entry_sk(&entry.key_id), &entry)?,
            cond: Cond::None,
        },
    ])
}

/// How long this instance trusts a key it read (seconds): a key revoked on another instance (a
/// Lambda function other than the one that revoked it) is refused within this time. A revoke
/// forgets the key on its own instance at once, so `waymark serve`, the only writer of its store,
/// refuses it immediately. Without the cache every request read `KEY#<hash>`: one partition read
/// by all of a project's traffic (3,000 reads a second at most).
pub const KEY_CACHE_SECONDS: u64 = 10;
/// Most keys remembered; past it the cache starts over.
const KEY_CACHE_ENTRIES: usize = 10_000;

/// Keys read by this instance, by (store, hash). The store is part of the key so that stores
/// side by side in one process (tests) never share an answer.
static KEYS: TtlCache<(usize, String), KeyRecord> =
    TtlCache::new(std::time::Duration::from_secs(KEY_CACHE_SECONDS), KEY_CACHE_ENTRIES);

fn cache_key(store: &dyn Store, hash: &str) -> (usize, String) {
    (std::ptr::from_ref(store).cast::<()>() as usize, hash.to_owned())
}

/// The project a key acts for, or None for an unknown or revoked key: from this instance's
/// cache when read in the last [`KEY_CACHE_SECONDS`]. Keeps `last_used_at` (hourly).
pub async fn authenticate(store: &dyn Store, secret: &str) -> Result<Option<Project>, ApiError> {
    let hash = hash_secret(secret);
    let pk = key_pk(&hash);
    let Some(mut record) = live_record(store, &hash).await? else { return Ok(None) };
    let now_s = crate::store::epoch_now();
    // Whole seconds on both sides: past the granularity by one, so never sooner than it. A console
    // session (it expires) keeps no `last_used_at`: its write, conditioned on `listed`, would fail
    // every time its cache entry lapsed, a wasted write unit on its key every 10 s.
    let stale = record.expires_at.is_none()
        && record.last_used_at.is_none_or(|t| now_s - t.0.timestamp() > LAST_USED_GRANULARITY_SECONDS);
    if stale {
        record.last_used_at = Some(Timestamp::now());
        KEYS.put(cache_key(store, &hash), record.clone());
        // Never over a revocation made meanwhile (a tombstone is not `listed`).
        match store.put(Table::Main, to_item(&pk, KEY_SK, &record)?, Cond::Equals("listed", true.into())).await {
            Ok(()) | Err(StoreError::ConditionFailed) => {}
            Err(e) => tracing::warn!(error = %e, "could not note a key's last use"),
        }
    }
    Ok(Some(record.project()))
}

/// The record of the key with this hash while it authenticates (not revoked, not expired), as
/// [`authenticate`] reads it: from this instance's cache when read in the last
/// [`KEY_CACHE_SECONDS`]. What a stream token asks of the key that minted it.
pub async fn live_record(store: &dyn Store, hash: &str) -> Result<Option<KeyRecord>, ApiError> {
    let record = match KEYS.get(&cache_key(store, hash)) {
        Some(r) => r,
        None => {
            // Unknown keys are not remembered: a key just created elsewhere works at once.
            let Some(doc) = store.get_doc(Table::Main, &key_pk(hash), KEY_SK).await? else { return Ok(None) };
            let record: KeyRecord = from_json(&doc)?;
            KEYS.put(cache_key(store, hash), record.clone());
            record
        }
    };
    let now_s = crate::store::epoch_now();
    let live = record.revoked_at.is_none() && record.expires_at.is_none_or(|e| e > now_s);
    Ok(live.then_some(record))
}

/// Forget the key with this hash, for every store of this process (revoked or signed out).
fn forget(hash: &str) {
    KEYS.forget(|(_, h)| h == hash);
}

async fn entries(store: &dyn Store, project_id: &str) -> Result<Vec<KeyEntry>, ApiError> {
    let q = Query::new(index_pk(project_id), SkRange::Prefix("K#".into()));
    let items = store.query(Table::Main, &q).await?.items;
    Ok(items.into_iter().map(from_item).collect::<Result<_, _>>()?)
}

/// Every listed key of the project with its `last_used_at`, oldest first.
pub async fn list(store: &dyn Store, project_id: &str) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    let mut all = entries(store, project_id).await?;
    all.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.key_id.cmp(&b.key_id)));
    for e in all {
        let record = store.get(Table::Main, &key_pk(&e.hash), KEY_SK).await?.map(from_item::<KeyRecord>).transpose()?;
        out.push(e.json(record.and_then(|r| r.last_used_at)));
    }
    Ok(out)
}

/// Parse a key kind as the API and the command take it.
pub fn parse_kind(field: &str, s: &str) -> Result<KeyKind, ApiError> {
    match s {
        "secret" => Ok(KeyKind::Secret),
        "publishable" => Ok(KeyKind::Publishable),
        "access" => Ok(KeyKind::Access),
        other => Err(ApiError::field(field, format!("must be secret, publishable or access, not '{other}'"))),
    }
}

/// Check a label: at most [`MAX_LABEL_CHARS`] characters, trimmed.
pub fn parse_label(s: Option<&str>) -> Result<String, ApiError> {
    let s = s.unwrap_or("").trim();
    if s.chars().count() > MAX_LABEL_CHARS {
        return Err(ApiError::field("label", format!("at most {MAX_LABEL_CHARS} characters")));
    }
    Ok(s.to_owned())
}

/// Issue a new key of `kind` for the project; returns its entry (as listed) and the key, which is
/// shown only now.
pub async fn create(
    store: &dyn Store,
    project_id: &str,
    account_id: &str,
    kind: KeyKind,
    label: &str,
) -> Result<(Value, String), ApiError> {
    if entries(store, project_id).await?.len() >= MAX_KEYS {
        return Err(ApiError::conflict(format!("key_id: a project holds at most {MAX_KEYS} keys; revoke some first")));
    }
    let p = Project { project_id: project_id.to_owned(), account_id: account_id.to_owned(), kind };
    let secret = generate_key(kind);
    let now = Timestamp::now();
    store.transact(register_ops(&p, &secret, label, now)?).await?;
    let hash = hash_secret(&secret);
    let entry =
        KeyEntry { key_id: key_id(&hash), kind, label: label.to_owned(), created_at: now, hint: hint(&secret), hash };
    Ok((entry.json(None), secret))
}

/// Revoke the key `key_id` of the project: at once, for good. A project's last secret key cannot
/// be revoked (409): nothing could manage the project any more.
pub async fn revoke(store: &dyn Store, project_id: &str, key_id: &str) -> Result<Value, ApiError> {
    for _ in 0..10 {
        let all = entries(store, project_id).await?;
        let Some(entry) = all.iter().find(|e| e.key_id == key_id) else {
            return Err(ApiError::not_found(format!("key_id: no key '{key_id}' in this project")));
        };
        if entry.kind == KeyKind::Secret && all.iter().filter(|e| e.kind == KeyKind::Secret).count() <= 1 {
            return Err(ApiError::conflict(
                "key_id: this is the project's last secret key; create another before revoking it",
            ));
        }
        let pk = key_pk(&entry.hash);
        let Some(item) = store.get(Table::Main, &pk, KEY_SK).await? else {
            return Err(ApiError::not_found(format!("key_id: no key '{key_id}' in this project")));
        };
        let mut record: KeyRecord = from_item(item)?;
        record.revoked_at = Some(Timestamp::now());
        record.listed = false;
        // The other secret keys counted above must still be there: each is checked unchanged
        // (two revocations at once cannot take the last two).
        let mut ops = vec![
            WriteOp::Put { table: Table::Main, item: to_item(&pk, KEY_SK, &record)?, cond: Cond::Exists },
            WriteOp::Delete { table: Table::Main, pk: index_pk(project_id), sk: entry_sk(key_id), cond: Cond::Exists },
        ];
        if entry.kind == KeyKind::Secret {
            for other in all.iter().filter(|e| e.kind == KeyKind::Secret && e.key_id != key_id).take(1) {
                ops.push(WriteOp::Put {
                    table: Table::Main,
                    item: to_item(&index_pk(project_id), &entry_sk(&other.key_id), other)?,
                    cond: Cond::Exists,
                });
            }
        }
        match store.transact(ops).await {
            Ok(()) => {
                forget(&entry.hash);
                // The console sessions it opened end with it (a failure here is logged: each
                // still ends at its expiry).
                if let Err(e) = sessions::end_minted_by(store, project_id, &entry.hash).await {
                    tracing::warn!(error = %e, "could not end a revoked key's console sessions");
                }
                return Ok(entry.json(record.last_used_at));
            }
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("key_id: the project's keys are being changed by other requests; retry"))
}

/// Whether `secret` is registered for `project` (Some(true)), revoked (Some(false)) or unknown
/// (None); an error when it belongs to another project.
pub async fn registered(store: &dyn Store, project: &Project, secret: &str) -> Result<Option<bool>, ApiError> {
    let item = store.get(Table::Main, &key_pk(&hash_secret(secret)), KEY_SK).await?;
    match item.map(from_item::<KeyRecord>).transpose()? {
        None => Ok(None),
        Some(r) if r.project_id == project.project_id && r.kind == project.kind => Ok(Some(r.revoked_at.is_none())),
        Some(_) => {
            Err(ApiError::conflict(format!("the {:?} key given is already used by another project", project.kind)))
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
