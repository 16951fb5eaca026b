//! The embedded store: redb, one redb table per logical table, keys `pk \0 sk`, values JSON.
//! File-backed by default (survives restarts), in memory for tests. redb is synchronous: writes
//! (a commit syncs the file) and reads of unknown size run on tokio's blocking pool; small reads
//! run on the calling task (see [`INLINE_ITEMS`]).

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::{
    Cond, Item, Page, Query, SkRange, Store, StoreError, TABLES, Table, WriteOp, cond_holds, epoch_now, is_expired,
    key_of,
};

type RedbTable = TableDefinition<'static, &'static str, &'static [u8]>;

fn redb_table(t: Table) -> RedbTable {
    TableDefinition::new(t.def().name)
}

/// Reads of at most this many entries run on the calling task. A read of a few cached pages takes
/// microseconds, less than handing it to the blocking pool and waking a thread for it, which was
/// the top cost of a warm `GET /v1/api/user/` (three such hand-offs per request); yet a read this
/// size still holds a runtime worker for well under a millisecond.
const INLINE_ITEMS: usize = 1_000;

/// Separates partition and sort key; below every character our keys use.
const SEP: char = '\0';

fn key(pk: &str, sk: &str) -> String {
    format!("{pk}{SEP}{sk}")
}

#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl EmbeddedStore {
    /// A store persisted in `path` (created if missing).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(backend)?;
        }
        let db = Database::create(path).map_err(backend)?;
        Self::init(db)
    }

    /// A store that lives only as long as this value (tests, `waymark serve --memory`).
    pub fn memory() -> Result<Self, StoreError> {
        let db = Database::builder().create_with_backend(redb::backends::InMemoryBackend::new()).map_err(backend)?;
        Self::init(db)
    }

    fn init(db: Database) -> Result<Self, StoreError> {
        let txn = db.begin_write().map_err(backend)?;
        for d in TABLES {
            txn.open_table(redb_table(d.table)).map_err(backend)?;
        }
        txn.commit().map_err(backend)?;
        Ok(Self { db: Arc::new(db) })
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db)).await.map_err(backend)?
    }
}

fn decode(bytes: &[u8]) -> Result<Item, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn encode(item: &Item) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(item).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Whether a stored value is expired at `now`. Most items carry no TTL attribute: a byte search
/// rules them out without parsing; the others are parsed for that one attribute.
fn expired_value(bytes: &[u8], now: i64) -> bool {
    // The attribute's name as JSON writes it (a test holds it to TTL_ATTRIBUTE), searched with
    // SIMD: a byte-by-byte window compare cost about a microsecond per 700-byte fence copy, on
    // every item a search reads.
    static NEEDLE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"expires_at\""));
    #[derive(serde::Deserialize)]
    struct Ttl {
        #[serde(default)]
        expires_at: Option<serde_json::Value>,
    }
    if NEEDLE.find(bytes).is_none() {
        return false;
    }
    match serde_json::from_slice::<Ttl>(bytes) {
        Ok(Ttl { expires_at: Some(v) }) => v.as_f64().is_some_and(|t| t <= now as f64),
        _ => false,
    }
}

/// The redb key bounds of a query's range, honouring the `after` cursor.
fn bounds(pk: &str, range: &SkRange) -> (Bound<String>, Bound<String>) {
    match range {
        SkRange::All => (Bound::Included(key(pk, "")), Bound::Excluded(format!("{pk}\u{1}"))),
        // char::MAX sorts after every sort-key character we write.
        SkRange::Prefix(p) => (Bound::Included(key(pk, p)), Bound::Included(key(pk, &format!("{p}{}", char::MAX)))),
        SkRange::Between(a, b) => (Bound::Included(key(pk, a)), Bound::Included(key(pk, b))),
    }
}

fn apply_cursor(q: &Query, (lo, hi): (Bound<String>, Bound<String>)) -> (Bound<String>, Bound<String>) {
    match &q.after {
        None => (lo, hi),
        Some(after) if q.descending => (lo, Bound::Excluded(key(&q.pk, after))),
        Some(after) => (Bound::Excluded(key(&q.pk, after)), hi),
    }
}

/// Feed the stored values of a query's range to `f`, in the query's order, until it says stop.
/// Expired values are left out unless the query asks for them.
fn scan(
    db: &Database,
    table: Table,
    q: &Query,
    f: impl FnMut(&[u8]) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(redb_table(table)).map_err(backend)?;
    scan_in(&t, q, epoch_now(), f)
}

/// [`scan`] in an open table.
fn scan_in(
    t: &redb::ReadOnlyTable<&'static str, &'static [u8]>,
    q: &Query,
    now: i64,
    mut f: impl FnMut(&[u8]) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let (lo, hi) = apply_cursor(q, bounds(&q.pk, &q.range));
    let range = t.range::<&str>((lo.as_ref().map(String::as_str), hi.as_ref().map(String::as_str))).map_err(backend)?;
    let mut visit = |e: Result<(redb::AccessGuard<&str>, redb::AccessGuard<&[u8]>), redb::StorageError>| {
        let (_, v) = e.map_err(backend)?;
        if !q.with_expired && expired_value(v.value(), now) {
            return Ok(true);
        }
        f(v.value())
    };
    if q.descending {
        for e in range.rev() {
            if !visit(e)? {
                break;
            }
        }
    } else {
        for e in range {
            if !visit(e)? {
                break;
            }
        }
    }
    Ok(())
}

/// Up to `limit` items of a query, and the cursor to continue when the limit cut it short.
fn query_page(db: &Database, table: Table, q: &Query) -> Result<Page, StoreError> {
    let mut items = Vec::new();
    let limit = q.limit.unwrap_or(usize::MAX);
    let mut more = false;
    scan(db, table, q, |v| {
        if items.len() == limit {
            more = true;
            return Ok(false);
        }
        items.push(decode(v)?);
        Ok(true)
    })?;
    let last_sk = if more { items.last().map(key_of).transpose()?.map(|(_, sk)| sk) } else { None };
    Ok(Page { items, last_sk })
}

/// The documents of each query (their limits honoured) from one read transaction; `None` when
/// they come to more than `cap` entries.
fn docs_of_many(
    db: &Database,
    table: Table,
    qs: &[Query],
    cap: Option<usize>,
) -> Result<Option<Vec<Vec<Vec<u8>>>>, StoreError> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(redb_table(table)).map_err(backend)?;
    let now = epoch_now();
    let (mut out, mut total) = (Vec::with_capacity(qs.len()), 0usize);
    for q in qs {
        let (limit, mut docs) = (q.limit.unwrap_or(usize::MAX), Vec::new());
        scan_in(&t, q, now, |v| {
            docs.push(v.to_vec());
            Ok(docs.len() < limit)
        })?;
        total += docs.len();
        if cap.is_some_and(|c| total > c) {
            return Ok(None);
        }
        out.push(docs);
    }
    Ok(Some(out))
}

/// The unexpired entries between `bounds`; `None` when there are more than `cap`.
fn count_range(
    db: &Database,
    table: Table,
    (lo, hi): &(Bound<String>, Bound<String>),
    cap: Option<usize>,
) -> Result<Option<usize>, StoreError> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(redb_table(table)).map_err(backend)?;
    let r = t.range::<&str>((lo.as_ref().map(String::as_str), hi.as_ref().map(String::as_str))).map_err(backend)?;
    let now = epoch_now();
    let mut n = 0usize;
    for e in r {
        let (_, v) = e.map_err(backend)?;
        if !expired_value(v.value(), now) {
            n += 1;
            if cap.is_some_and(|c| n > c) {
                return Ok(None);
            }
        }
    }
    Ok(Some(n))
}

fn write_op(txn: &redb::WriteTransaction, op: &WriteOp) -> Result<(), StoreError> {
    match op {
        WriteOp::Put { table, item, cond } => {
            let (pk, sk) = key_of(item)?;
            let k = key(&pk, &sk);
            let mut t = txn.open_table(redb_table(*table)).map_err(backend)?;
            let current = t.get(k.as_str()).map_err(backend)?.map(|g| decode(g.value())).transpose()?;
            if !cond_holds(cond, current.as_ref()) {
                return Err(StoreError::ConditionFailed);
            }
            t.insert(k.as_str(), encode(item)?.as_slice()).map_err(backend)?;
        }
        WriteOp::Delete { table, pk, sk, cond } => {
            let k = key(pk, sk);
            let mut t = txn.open_table(redb_table(*table)).map_err(backend)?;
            let current = t.get(k.as_str()).map_err(backend)?.map(|g| decode(g.value())).transpose()?;
            if !cond_holds(cond, current.as_ref()) {
                return Err(StoreError::ConditionFailed);
            }
            t.remove(k.as_str()).map_err(backend)?;
        }
        WriteOp::Add { table, pk, sk, attr, delta } => {
            let k = key(pk, sk);
            let mut t = txn.open_table(redb_table(*table)).map_err(backend)?;
            let current = t.get(k.as_str()).map_err(backend)?.map(|g| decode(g.value())).transpose()?;
            let mut item = current.unwrap_or_else(|| {
                Item::from_iter([("pk".to_owned(), pk.as_str().into()), ("sk".to_owned(), sk.as_str().into())])
            });
            let n = item.get(*attr).and_then(serde_json::Value::as_i64).unwrap_or(0);
            item.insert((*attr).to_owned(), (n + delta).into());
            t.insert(k.as_str(), encode(&item)?.as_slice()).map_err(backend)?;
        }
    }
    Ok(())
}

/// Apply ops in one redb transaction; nothing is written unless every condition holds.
fn write_all(db: &Database, ops: &[WriteOp]) -> Result<(), StoreError> {
    write_all_as(db, ops, Durability::Immediate)
}

/// [`write_all`] with the given durability: `None` commits without syncing the file, and the
/// next synced commit makes it durable (redb's guarantee).
fn write_all_as(db: &Database, ops: &[WriteOp], durability: Durability) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(backend)?;
    txn.set_durability(durability).map_err(backend)?;
    for op in ops {
        if let Err(e) = write_op(&txn, op) {
            txn.abort().map_err(backend)?;
            return Err(e);
        }
    }
    txn.commit().map_err(backend)
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let t = txn.open_table(redb_table(table)).map_err(backend)?;
        let item = t.get(key(pk, sk).as_str()).map_err(backend)?.map(|g| decode(g.value())).transpose()?;
        Ok(item.filter(|i| !is_expired(i, epoch_now())))
    }

    async fn get_doc(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let t = txn.open_table(redb_table(table)).map_err(backend)?;
        let doc = t.get(key(pk, sk).as_str()).map_err(backend)?.map(|g| g.value().to_vec());
        Ok(doc.filter(|d| !expired_value(d, epoch_now())))
    }

    async fn put(&self, table: Table, item: Item, cond: Cond) -> Result<(), StoreError> {
        self.run(move |db| write_all(db, &[WriteOp::Put { table, item, cond }])).await
    }

    async fn put_unsynced(&self, table: Table, item: Item, cond: Cond) -> Result<(), StoreError> {
        self.run(move |db| write_all_as(db, &[WriteOp::Put { table, item, cond }], Durability::None)).await
    }

    async fn delete(&self, table: Table, pk: &str, sk: &str, cond: Cond) -> Result<(), StoreError> {
        let op = WriteOp::Delete { table, pk: pk.to_owned(), sk: sk.to_owned(), cond };
        self.run(move |db| write_all(db, &[op])).await
    }

    async fn query(&self, table: Table, q: &Query) -> Result<Page, StoreError> {
        if q.limit.is_some_and(|n| n <= INLINE_ITEMS) {
            return query_page(&self.db, table, q);
        }
        let q = q.clone();
        self.run(move |db| query_page(db, table, &q)).await
    }

    async fn query_docs(&self, table: Table, q: &Query) -> Result<Vec<Vec<u8>>, StoreError> {
        let page = move |db: &Database, q: &Query| {
            let (limit, mut out) = (q.limit.unwrap_or(usize::MAX), Vec::new());
            scan(db, table, q, |v| {
                out.push(v.to_vec());
                Ok(out.len() < limit)
            })?;
            Ok(out)
        };
        if q.limit.is_some_and(|n| n <= INLINE_ITEMS) {
            return page(&self.db, q);
        }
        let q = q.clone();
        self.run(move |db| page(db, &q)).await
    }

    async fn query_docs_many(&self, table: Table, qs: &[Query]) -> Result<Vec<Vec<Vec<u8>>>, StoreError> {
        // One read transaction for all; on the calling task unless it passes INLINE_ITEMS
        // entries, then again on the blocking pool (as `count` does).
        if let Some(docs) = docs_of_many(&self.db, table, qs, Some(INLINE_ITEMS))? {
            return Ok(docs);
        }
        let qs = qs.to_vec();
        self.run(move |db| Ok(docs_of_many(db, table, &qs, None)?.unwrap_or_default())).await
    }

    async fn count(&self, table: Table, pk: &str, range: &SkRange) -> Result<usize, StoreError> {
        let bounds = bounds(pk, range);
        // Most ranges are short: count here, and only a long one again on the blocking pool.
        if let Some(n) = count_range(&self.db, table, &bounds, Some(INLINE_ITEMS))? {
            return Ok(n);
        }
        self.run(move |db| Ok(count_range(db, table, &bounds, None)?.unwrap_or_default())).await
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.run(move |db| write_all(db, &ops)).await
    }

    async fn put_new(&self, table: Table, items: Vec<Item>) -> Result<Vec<bool>, StoreError> {
        self.run(move |db| {
            let txn = db.begin_write().map_err(backend)?;
            let mut stored = Vec::with_capacity(items.len());
            {
                let mut t = txn.open_table(redb_table(table)).map_err(backend)?;
                for item in &items {
                    let (pk, sk) = key_of(item)?;
                    let k = key(&pk, &sk);
                    let exists = t.get(k.as_str()).map_err(backend)?.is_some();
                    if !exists {
                        t.insert(k.as_str(), encode(item)?.as_slice()).map_err(backend)?;
                    }
                    stored.push(!exists);
                }
            }
            txn.commit().map_err(backend)?;
            Ok(stored)
        })
        .await
    }

    async fn delete_many(&self, table: Table, keys: Vec<(String, String)>) -> Result<(), StoreError> {
        // One redb transaction for the lot: a commit per item would cost a sync each.
        self.run(move |db| {
            let txn = db.begin_write().map_err(backend)?;
            {
                let mut t = txn.open_table(redb_table(table)).map_err(backend)?;
                for (pk, sk) in &keys {
                    t.remove(key(pk, sk).as_str()).map_err(backend)?;
                }
            }
            txn.commit().map_err(backend)
        })
        .await
    }

    async fn scan_all(&self, table: Table) -> Result<Vec<Item>, StoreError> {
        self.run(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let t = txn.open_table(redb_table(table)).map_err(backend)?;
            let mut out = Vec::new();
            for e in t.iter().map_err(backend)? {
                let (_, v) = e.map_err(backend)?;
                out.push(decode(v.value())?);
            }
            Ok(out)
        })
        .await
    }

    async fn ensure_tables(&self) -> Result<(), StoreError> {
        Ok(()) // created when opened
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_read_from_the_ttl_attribute_only() {
        let v = |j: serde_json::Value| serde_json::to_vec(&j).unwrap();
        let attr = super::super::TTL_ATTRIBUTE;
        assert!(expired_value(&v(serde_json::json!({attr: 100})), 100));
        assert!(!expired_value(&v(serde_json::json!({attr: 101})), 100));
        // Not a number, nested, or absent: not an expiry (as DynamoDB's TTL reads it).
        assert!(!expired_value(&v(serde_json::json!({attr: "1"})), 100));
        assert!(!expired_value(&v(serde_json::json!({"secrets": [{attr: 1}]})), 100));
        assert!(!expired_value(&v(serde_json::json!({"pk": "a"})), 100));
    }
}
