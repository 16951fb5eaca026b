//! The embedded store: redb, one redb table per logical table, keys `pk \0 sk`, values the
//! item's JSON without `pk` (see [`encode`]).
//! File-backed by default (survives restarts), in memory for tests. redb is synchronous: reads of
//! unknown size run on tokio's blocking pool; small reads run on the calling task (see
//! [`INLINE_ITEMS`]), and so do a long read's ranges visited at once ([`Store::visit_ranges`],
//! for a caller that computes on its thread anyway: a trip's summary).
//!
//! Group commit: writes queue and are committed in groups, one write transaction and at most
//! one file sync for all that arrived together (`writer`). A write still returns only once it is
//! durable, unless it is one of the unsynced kinds ([`Store::put_unsynced`]).

mod cache;
mod read;
mod writer;

use read::{bounds, count_range, docs_of, docs_of_many, live, query_page, scan, values_at, visit_ranges};

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use cache::ReadCache;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use writer::{Db, Failed};

use super::{
    Cond, Doc, EachChunk, Item, Page, Query, SkRange, Store, StoreError, TABLES, Table, Unsynced, Visitor, WriteOp,
    cond_holds, doc_str, epoch_now, is_expired, key_of,
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
/// Chunks of [`INLINE_ITEMS`] documents a long [`Store::query_docs_each`] reads ahead of its
/// caller.
const CHUNKS_AHEAD: usize = 4;
/// Entries of its last range a [`Store::visit_ranges`] reads before the ranges before it get a
/// thread each (a thread costs tens of µs; this many entries, milliseconds).
const RANGES_APART_AFTER: usize = 5_000;

/// Separates partition and sort key; below every character our keys use.
const SEP: &str = "\0";

fn key(pk: &str, sk: &str) -> String {
    [pk, SEP, sk].concat()
}

/// The embedded store's part of an [`Unsynced`]: a position of its writer to sync through.
pub(super) struct Pending {
    /// Behind a trait object: a Lambda function's ingest makes its `Unsynced` durable too, and a
    /// direct call linked the writer and with it redb (0.5 MB) into every such binary; the vtable
    /// is made only where an embedded store is.
    db: Arc<dyn Flush>,
    pub(super) through: u64,
}

impl Pending {
    pub(super) async fn durable(self) -> Result<(), StoreError> {
        self.db.flush_through(self.through).await
    }
}

/// [`Db::flush`], called through [`Pending`].
trait Flush: Send + Sync {
    fn flush_through(self: Arc<Self>, through: u64) -> futures::future::BoxFuture<'static, Result<(), StoreError>>;
}

impl Flush for Db {
    fn flush_through(self: Arc<Self>, through: u64) -> futures::future::BoxFuture<'static, Result<(), StoreError>> {
        Box::pin(async move { self.flush(through).await })
    }
}

#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Db>,
    cache: Arc<ReadCache>,
    /// When the file was opened (and locked: redb refuses a second opener).
    opened_at: crate::time::Timestamp,
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

    /// What an unsynced write that just returned leaves to sync: every group committed so far
    /// (covering others' writes too costs nothing: one sync covers them all).
    fn pending(&self) -> Unsynced {
        Unsynced(Some(Pending { db: self.db.clone(), through: self.db.written() }))
    }

    fn init(db: Database) -> Result<Self, StoreError> {
        let txn = db.begin_write().map_err(backend)?;
        for d in TABLES {
            txn.open_table(redb_table(d.table)).map_err(backend)?;
        }
        txn.commit().map_err(backend)?;
        Ok(Self { db: Arc::new(Db::new(db)), cache: Arc::default(), opened_at: crate::time::Timestamp::now() })
    }

    /// The documents at these keys of partition `pk` (None where there is none): each kept from
    /// an earlier read (see `cache`; an absent item is not kept: unknown keys are what a
    /// guessing client sends), the others read in one read transaction.
    fn points(&self, table: Table, pk: &str, sks: &[impl AsRef<str>]) -> Result<Vec<Option<Doc>>, StoreError> {
        let now = epoch_now();
        let mut out = Vec::with_capacity(sks.len());
        let mut missing = Vec::new();
        for (i, kept) in self.cache.get_points(table, pk, sks, now).into_iter().enumerate() {
            match kept {
                Ok(doc) => out.push(Some(doc)),
                Err(stamp) => {
                    out.push(None);
                    missing.push((i, stamp));
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let keys: Vec<String> = missing.iter().map(|(i, _)| key(pk, sks[*i].as_ref())).collect();
        let docs = values_at(&self.db, table, keys.iter().map(String::as_str))?;
        for ((i, stamp), doc) in missing.into_iter().zip(docs) {
            let doc = live(doc, now).map(Doc::from);
            if let Some(d) = &doc {
                self.cache.offer_point(table, pk, sks[i].as_ref(), stamp, d);
            }
            out[i] = doc;
        }
        Ok(out)
    }

    /// Put each item unless its key holds one, in one transaction; durable on return or not.
    async fn put_new_as(&self, table: Table, items: Vec<Item>, durable: bool) -> Result<Vec<bool>, StoreError> {
        // Keys and bytes here, so the writer, which applies every request's writes, only writes.
        let entries = Arc::new(items.iter().map(keyed).collect::<Result<Vec<_>, StoreError>>()?);
        let (cache, written) = (self.cache.clone(), entries.clone());
        let mark = move |committing| cache.mark(table, written.iter().map(|(k, _)| k.as_str()), committing);
        self.db
            .write_then(
                durable,
                move |txn| {
                    let mut t = txn.open_table(redb_table(table)).map_err(backend)?;
                    let mut stored = Vec::with_capacity(entries.len());
                    for (k, bytes) in entries.iter() {
                        let exists = t.get(k.as_str()).map_err(backend)?.is_some();
                        if !exists {
                            t.insert(k.as_str(), bytes.as_slice()).map_err(backend)?;
                        }
                        stored.push(!exists);
                    }
                    Ok(stored)
                },
                mark,
            )
            .await
    }

    /// Apply ops in one transaction, durable on return or not; nothing is written unless every
    /// condition holds.
    async fn write_all(&self, ops: Vec<WriteOp>, durable: bool) -> Result<(), StoreError> {
        let ops = Arc::new(ops.into_iter().map(Ready::of).collect::<Result<Vec<_>, _>>()?);
        let (cache, written) = (self.cache.clone(), ops.clone());
        let mark = move |committing| {
            for table in TABLES.iter().map(|d| d.table) {
                cache.mark(table, written.iter().filter(|op| op.table() == table).map(Ready::key), committing);
            }
        };
        self.db.write_then(durable, move |txn| apply_all(txn, &ops), mark).await
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db)).await.map_err(backend)?
    }
}

/// A stored value as the item it was, its partition key (`pk`, which the redb key holds and the
/// value leaves out, see [`encode`]) put back.
fn decode(bytes: &[u8], pk: &str) -> Result<Item, StoreError> {
    let mut item: Item = serde_json::from_str(doc_str(bytes)?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    item.insert("pk".into(), pk.into());
    Ok(item)
}

/// An item's stored value: every attribute but `pk`. The partition key is already in the redb
/// key, and every item of a history repeats it: it was a quarter of a stored fix's bytes, which
/// every long read (a trip's summary, a history's pages) scanned and skipped again. `sk` stays:
/// records decoded from documents read it.
fn encode(item: &Item) -> Result<Vec<u8>, StoreError> {
    struct WithoutPk<'a>(&'a Item);
    impl serde::Serialize for WithoutPk<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().filter(|(k, _)| *k != "pk"))
        }
    }
    serde_json::to_vec(&WithoutPk(item)).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// An item's redb key and stored value.
fn keyed(item: &Item) -> Result<(String, Vec<u8>), StoreError> {
    let (pk, sk) = key_of(item)?;
    Ok((key(&pk, &sk), encode(item)?))
}

/// Whether a stored value is expired at `now`. Most items carry no TTL attribute: a byte search
/// rules them out; the others are walked to the attribute (see [`ttl_of`]).
fn expired_value(bytes: &[u8], now: i64) -> bool {
    ttl_of(bytes).is_some_and(|t| t <= now as f64)
}

/// The attribute's name as JSON writes it (a test holds it to TTL_ATTRIBUTE).
const TTL_KEY: &[u8] = b"\"expires_at\"";

/// The numeric top-level TTL attribute of a stored JSON object (None when absent or not a
/// number, as DynamoDB ignores it). Found by walking the bytes, strings skipped with memchr and
/// nesting counted, rather than by parsing the document: every value a query reads is checked,
/// and parsing an event's whole document for it was a fifth of an events list's CPU.
fn ttl_of(bytes: &[u8]) -> Option<f64> {
    // memchr's SIMD searcher, built once, rules out most values (no TTL at all) without the walk.
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(TTL_KEY));
    let first = FINDER.find(bytes)?;
    let (mut depth, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // A key at the top level: the only string at depth 1 followed by a colon.
                if depth == 1 && i >= first && bytes[i..].starts_with(TTL_KEY) {
                    let rest = bytes[i + TTL_KEY.len()..].trim_ascii_start();
                    if let Some(value) = rest.strip_prefix(b":") {
                        let value = value.trim_ascii_start();
                        let end = value.iter().position(|b| matches!(b, b',' | b'}') || b.is_ascii_whitespace());
                        return std::str::from_utf8(&value[..end.unwrap_or(value.len())]).ok()?.parse().ok();
                    }
                }
                // Past the string's closing quote, escapes skipped.
                i += 1;
                loop {
                    let j = i + memchr::memchr2(b'"', b'\\', &bytes[i..])?;
                    if bytes[j] == b'\\' {
                        i = j + 2;
                    } else {
                        i = j;
                        break;
                    }
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// One top-level attribute of a stored value, the others skipped without building them.
fn attribute(bytes: &[u8], name: &str) -> Result<Option<serde_json::Value>, StoreError> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Seek<'a>(&'a str);
    impl<'de> Visitor<'de> for Seek<'_> {
        type Value = Option<serde_json::Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(k) = m.next_key::<String>()? {
                if k == self.0 {
                    found = Some(m.next_value()?);
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    impl<'de> DeserializeSeed<'de> for Seek<'_> {
        type Value = Option<serde_json::Value>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }
    Seek(name)
        .deserialize(&mut serde_json::Deserializer::from_slice(bytes))
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Whether `cond` holds for the value stored at `k`: read only as far as the condition needs
/// (nothing for `Cond::None`, presence for `Exists`/`NotExists`, one attribute for `Equals`).
fn holds(t: &redb::Table<&'static str, &'static [u8]>, k: &str, cond: &Cond) -> Result<bool, StoreError> {
    Ok(match cond {
        Cond::None => true,
        Cond::NotExists => t.get(k).map_err(backend)?.is_none(),
        Cond::Exists => t.get(k).map_err(backend)?.is_some(),
        Cond::Equals(attr, _) => {
            let current = match t.get(k).map_err(backend)? {
                Some(g) => Some(
                    attribute(g.value(), attr)?.map(|v| Item::from_iter([((*attr).to_owned(), v)])).unwrap_or_default(),
                ),
                None => None,
            };
            cond_holds(cond, current.as_ref())
        }
    })
}

/// A write op ready for the writer: its redb key and, for a put, its bytes (encoded on the
/// caller's task).
enum Ready {
    Put { table: Table, key: String, bytes: Vec<u8>, cond: Cond },
    Delete { table: Table, key: String, cond: Cond },
    Add { table: Table, key: String, pk: String, sk: String, attr: &'static str, delta: i64 },
    Check { table: Table, key: String, cond: Cond },
}

impl Ready {
    fn table(&self) -> Table {
        match self {
            Ready::Put { table, .. }
            | Ready::Delete { table, .. }
            | Ready::Add { table, .. }
            | Ready::Check { table, .. } => *table,
        }
    }

    fn key(&self) -> &str {
        match self {
            Ready::Put { key, .. } | Ready::Delete { key, .. } | Ready::Add { key, .. } | Ready::Check { key, .. } => {
                key
            }
        }
    }

    fn of(op: WriteOp) -> Result<Self, StoreError> {
        Ok(match op {
            WriteOp::Put { table, item, cond } => {
                let (key, bytes) = keyed(&item)?;
                Ready::Put { table, key, bytes, cond }
            }
            WriteOp::Delete { table, pk, sk, cond } => Ready::Delete { table, key: key(&pk, &sk), cond },
            WriteOp::Add { table, pk, sk, attr, delta } => {
                Ready::Add { table, key: key(&pk, &sk), pk, sk, attr, delta }
            }
            WriteOp::Check { table, pk, sk, cond } => Ready::Check { table, key: key(&pk, &sk), cond },
        })
    }
}

/// Apply ops in `txn`, all or none. Everything that can fail but the writes themselves (the
/// conditions, an added counter's read) comes first, each against the state before these ops
/// (they are on distinct keys, as DynamoDB's transactions require): a write that fails there
/// leaves the transaction as it was, and the other writes of its group stand.
fn apply_all(txn: &redb::WriteTransaction, ops: &[Ready]) -> Result<(), Failed> {
    let before = |e: StoreError| Failed::Before(e);
    let holding = |table: Table, key: &str, cond: &Cond| -> Result<(), Failed> {
        let t = txn.open_table(redb_table(table)).map_err(backend).map_err(before)?;
        if holds(&t, key, cond).map_err(before)? { Ok(()) } else { Err(before(StoreError::ConditionFailed)) }
    };
    // Per op: where, and the bytes to put (none: delete).
    type Change<'a> = (Table, &'a str, Option<std::borrow::Cow<'a, [u8]>>);
    let mut changes: Vec<Change> = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            Ready::Put { table, key, bytes, cond } => {
                holding(*table, key, cond)?;
                changes.push((*table, key, Some(std::borrow::Cow::Borrowed(bytes))));
            }
            Ready::Delete { table, key, cond } => {
                holding(*table, key, cond)?;
                changes.push((*table, key, None));
            }
            Ready::Check { table, key, cond } => holding(*table, key, cond)?,
            Ready::Add { table, key, pk, sk, attr, delta } => {
                let t = txn.open_table(redb_table(*table)).map_err(backend).map_err(before)?;
                let current =
                    t.get(key.as_str()).map_err(backend).and_then(|g| g.map(|g| decode(g.value(), pk)).transpose());
                let mut item = current.map_err(before)?.unwrap_or_else(|| {
                    Item::from_iter([("pk".to_owned(), pk.as_str().into()), ("sk".to_owned(), sk.as_str().into())])
                });
                let n = item.get(*attr).and_then(serde_json::Value::as_i64).unwrap_or(0);
                item.insert((*attr).to_owned(), (n + delta).into());
                changes.push((*table, key, Some(std::borrow::Cow::Owned(encode(&item).map_err(before)?))));
            }
        }
    }
    for (table, key, bytes) in changes {
        let mut t = txn.open_table(redb_table(table)).map_err(backend)?;
        match bytes {
            Some(b) => t.insert(key, &*b).map(drop),
            None => t.remove(key).map(drop),
        }
        .map_err(backend)?;
    }
    Ok(())
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let t = txn.open_table(redb_table(table)).map_err(backend)?;
        let item = t.get(key(pk, sk).as_str()).map_err(backend)?.map(|g| decode(g.value(), pk)).transpose()?;
        Ok(item.filter(|i| !is_expired(i, epoch_now())))
    }

    async fn get_doc(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Doc>, StoreError> {
        Ok(self.points(table, pk, &[sk])?.pop().flatten())
    }

    async fn get_docs(&self, table: Table, pk: &str, sks: &[String]) -> Result<Vec<Option<Doc>>, StoreError> {
        self.points(table, pk, sks)
    }

    async fn put(&self, table: Table, item: Item, cond: Cond) -> Result<(), StoreError> {
        self.write_all(vec![WriteOp::Put { table, item, cond }], true).await
    }

    async fn put_unsynced(&self, table: Table, item: Item, cond: Cond) -> Result<Unsynced, StoreError> {
        self.write_all(vec![WriteOp::Put { table, item, cond }], false).await?;
        Ok(self.pending())
    }

    async fn transact_unsynced(&self, ops: Vec<WriteOp>) -> Result<Unsynced, StoreError> {
        self.write_all(ops, false).await?;
        Ok(self.pending())
    }

    async fn delete(&self, table: Table, pk: &str, sk: &str, cond: Cond) -> Result<(), StoreError> {
        self.write_all(vec![WriteOp::Delete { table, pk: pk.to_owned(), sk: sk.to_owned(), cond }], true).await
    }

    async fn delete_unsynced(&self, table: Table, pk: &str, sk: &str, cond: Cond) -> Result<Unsynced, StoreError> {
        self.write_all(vec![WriteOp::Delete { table, pk: pk.to_owned(), sk: sk.to_owned(), cond }], false).await?;
        Ok(self.pending())
    }

    async fn query(&self, table: Table, q: &Query) -> Result<Page, StoreError> {
        // Here unless it passes INLINE_ITEMS entries (most reads without a limit are short, such
        // as a list's counters), then again on the blocking pool.
        let page = match query_page(&self.db, table, q, Some(INLINE_ITEMS))? {
            Some(page) => page,
            None => {
                let q = q.clone();
                self.run(move |db| Ok(query_page(db, table, &q, None)?.unwrap_or_default())).await?
            }
        };
        Ok(page)
    }

    async fn query_docs(&self, table: Table, q: &Query) -> Result<Vec<Doc>, StoreError> {
        Ok(self.query_docs_many(table, std::slice::from_ref(q)).await?.pop().unwrap_or_default())
    }

    async fn query_docs_each(&self, table: Table, q: &Query, each: &mut EachChunk) -> Result<(), StoreError> {
        if let Some(docs) = docs_of(&self.db, table, q, Some(INLINE_ITEMS))? {
            return each(docs);
        }
        // A long read: chunks come over a short queue from the blocking pool, read there while
        // this task decodes the one before.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Vec<u8>>>(CHUNKS_AHEAD);
        let (db, q) = (self.db.clone(), q.clone());
        let reader = tokio::task::spawn_blocking(move || {
            let (limit, mut n) = (q.limit.unwrap_or(usize::MAX), 0usize);
            let mut chunk = Vec::with_capacity(INLINE_ITEMS);
            scan(&db, table, &q, |v| {
                chunk.push(v.to_vec());
                n += 1;
                if chunk.len() == INLINE_ITEMS {
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(INLINE_ITEMS));
                    // The receiver is gone when `each` failed: stop reading.
                    if tx.blocking_send(full).is_err() {
                        return Ok(false);
                    }
                }
                Ok(n < limit)
            })?;
            if !chunk.is_empty() {
                let _ = tx.blocking_send(chunk);
            }
            Ok::<_, StoreError>(())
        });
        let mut failed = None;
        while let Some(chunk) = rx.recv().await {
            if let Err(e) = each(chunk) {
                failed = Some(e);
                break;
            }
        }
        drop(rx);
        let read = reader.await.map_err(backend)?;
        match failed {
            Some(e) => Err(e),
            None => read,
        }
    }

    async fn visit_ranges(&self, table: Table, qs: &[Query], visitors: &mut [Box<Visitor>]) -> Result<(), StoreError> {
        // On the caller's thread: the ranges' own threads do the long part.
        visit_ranges(&self.db, table, qs, visitors)
    }

    async fn query_docs_many(&self, table: Table, qs: &[Query]) -> Result<Vec<Vec<Doc>>, StoreError> {
        // Those kept from earlier reads (see `cache`) as they are; the others read in one read
        // transaction, on the calling task unless they pass INLINE_ITEMS entries, then again on
        // the blocking pool (as `count` does).
        let now = epoch_now();
        let mut out = Vec::with_capacity(qs.len());
        let mut missing = Vec::new();
        for (i, kept) in self.cache.get_each(table, qs, now).into_iter().enumerate() {
            match kept {
                Ok(docs) => out.push(docs),
                Err(stamp) => {
                    out.push(Vec::new());
                    missing.push((i, stamp));
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let unread: Vec<&Query> = missing.iter().map(|(i, _)| &qs[*i]).collect();
        let Some(read) = docs_of_many(&self.db, table, &unread, Some(INLINE_ITEMS))? else {
            // A long read: all of them again on the blocking pool, none kept.
            let qs = qs.to_vec();
            return self
                .run(move |db| Ok(docs_of_many(db, table, &qs.iter().collect::<Vec<_>>(), None)?.unwrap_or_default()))
                .await;
        };
        for ((i, stamp), docs) in missing.into_iter().zip(read) {
            self.cache.offer(table, &qs[i], stamp, &docs);
            out[i] = docs;
        }
        Ok(out)
    }

    async fn count(&self, table: Table, pk: &str, range: &SkRange) -> Result<usize, StoreError> {
        let bounds = bounds(pk, range);
        // Most ranges are short: count here, and only a long one again on the blocking pool.
        match count_range(&self.db, table, &bounds, Some(INLINE_ITEMS))? {
            Some(n) => Ok(n),
            None => self.run(move |db| Ok(count_range(db, table, &bounds, None)?.unwrap_or_default())).await,
        }
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.write_all(ops, true).await
    }

    async fn put_new(&self, table: Table, items: Vec<Item>) -> Result<Vec<bool>, StoreError> {
        self.put_new_as(table, items, true).await
    }

    async fn put_new_unsynced(&self, table: Table, items: Vec<Item>) -> Result<(Vec<bool>, Unsynced), StoreError> {
        let stored = self.put_new_as(table, items, false).await?;
        Ok((stored, self.pending()))
    }

    fn sole_writer_since(&self) -> Option<crate::time::Timestamp> {
        Some(self.opened_at)
    }

    async fn delete_many(&self, table: Table, keys: Vec<(String, String)>) -> Result<(), StoreError> {
        // One transaction for the lot.
        let keys: Arc<Vec<String>> = Arc::new(keys.iter().map(|(pk, sk)| key(pk, sk)).collect());
        let (cache, written) = (self.cache.clone(), keys.clone());
        let mark = move |committing| cache.mark(table, written.iter().map(String::as_str), committing);
        self.db
            .write_then(
                true,
                move |txn| {
                    let mut t = txn.open_table(redb_table(table)).map_err(backend)?;
                    for k in keys.iter() {
                        t.remove(k.as_str()).map_err(backend)?;
                    }
                    Ok(())
                },
                mark,
            )
            .await
    }

    async fn scan_all(&self, table: Table) -> Result<Vec<Item>, StoreError> {
        self.run(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let t = txn.open_table(redb_table(table)).map_err(backend)?;
            let mut out = Vec::new();
            for e in t.iter().map_err(backend)? {
                let (k, v) = e.map_err(backend)?;
                let pk = k.value().split(SEP).next().unwrap_or_default();
                out.push(decode(v.value(), pk)?);
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
mod tests;
