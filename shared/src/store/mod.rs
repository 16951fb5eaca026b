//! Storage at the level of a DynamoDB table: items addressed by a string partition key `pk` and a
//! string sort key `sk`. Two implementations share every line of domain logic: [`DynamoStore`] in
//! production and [`EmbeddedStore`] (redb, file or memory) for `waymark serve` and tests. Items
//! are JSON (typed records through [`to_item`] / [`from_item`]; DynamoDB values only in `dynamo/`).
//! An item whose [`TTL_ATTRIBUTE`] has passed is gone for every read on both backends, before
//! either deletes it; only queries marked [`Query::with_expired`] (the sweeper, erasure) see it,
//! and conditions of writes still do, as DynamoDB's. See docs/endpoints.md, "Retention".

mod doc;
mod dynamo;
mod embedded;
pub mod tables;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use doc::{Doc, rendered};
pub use dynamo::DynamoStore;
pub use embedded::EmbeddedStore;
pub use tables::{TABLES, Table, TableDef, TableNames};

pub type Item = Map<String, Value>;

/// The numeric attribute (epoch seconds) after which an item is expired: reads skip items past it
/// (see the module's documentation).
pub use crate::expiry::TTL_ATTRIBUTE;

/// Whether `item` has expired at `now` (epoch seconds). A TTL attribute that is not a number is
/// ignored, as DynamoDB ignores it.
pub fn is_expired(item: &Item, now: i64) -> bool {
    item.get(TTL_ATTRIBUTE).and_then(Value::as_f64).is_some_and(|t| t <= now as f64)
}

/// Now, in epoch seconds, as expiry is compared.
pub(crate) fn epoch_now() -> i64 {
    // Seconds straight from the clock: through `chrono::Utc::now` every read built a calendar
    // date too (in a profile of a list made afresh, a third of a kept point read's time).
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(before) => -(before.duration().as_secs_f64().ceil() as i64),
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A condition of a put, delete or transaction did not hold.
    #[error("condition failed")]
    ConditionFailed,
    #[error("storage backend: {0}")]
    Backend(String),
    #[error("stored item cannot be read: {0}")]
    Corrupt(String),
    /// The item would exceed [`MAX_ITEM_BYTES`].
    #[error("item too large: {0} bytes")]
    TooLarge(usize),
    /// Throttled, or failing with errors that may pass (a 500, a timeout, a dropped connection),
    /// through the whole retry budget (`dynamo::retry`): the caller may try again later.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A transaction kept meeting concurrent transactions on its items through the retry budget.
    #[error("contended: {0}")]
    Contended(String),
}

/// A store failure as the caller sees it: a record too large is their input's fault; anything
/// else is ours.
impl From<StoreError> for crate::error::ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::TooLarge(n) => Self::new(
                crate::error::Kind::TooLarge,
                format!(
                    "body: the record would take {n} bytes, more than the {MAX_ITEM_BYTES} a record may hold; send less text, metadata or fewer items"
                ),
            ),
            StoreError::Unavailable(cause) => {
                tracing::warn!(%cause, "store unavailable through the retry budget");
                Self::new(
                    crate::error::Kind::Unavailable,
                    "the service is busy or briefly unavailable; try again after the Retry-After seconds",
                )
            }
            StoreError::Contended(cause) => {
                tracing::warn!(%cause, "transaction contended through the retry budget");
                Self::conflict("the record kept changing under concurrent writes; read it again and retry")
            }
            other => Self::internal(other),
        }
    }
}

/// Largest item written, as JSON: below DynamoDB's 400 KB item limit with room for attribute
/// overhead, and enforced for the embedded store too so both backends accept the same data.
pub const MAX_ITEM_BYTES: usize = 350_000;

/// A condition on the item currently at the written key.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    None,
    /// No item at the key.
    NotExists,
    /// An item at the key.
    Exists,
    /// An item at the key whose attribute equals the value (e.g. an optimistic `version`).
    Equals(&'static str, Value),
}

/// Which sort keys of a partition to read. Bounds are inclusive; keys compare as UTF-8 bytes,
/// as DynamoDB compares them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SkRange {
    All,
    Prefix(String),
    Between(String, String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Query {
    pub pk: String,
    pub range: SkRange,
    /// At most this many items; None reads the whole range.
    pub limit: Option<usize>,
    /// Start after this sort key (a cursor from a previous page).
    pub after: Option<String>,
    pub descending: bool,
    /// Include items whose TTL has passed (deleting them); reads leave them out.
    pub with_expired: bool,
    /// May miss writes of the last second or so (DynamoDB's eventually consistent read, at half
    /// the read units); the embedded store reads consistently anyway.
    pub eventual: bool,
}

impl Query {
    pub fn new(pk: impl Into<String>, range: SkRange) -> Self {
        Self { pk: pk.into(), range, limit: None, after: None, descending: false, with_expired: false, eventual: false }
    }
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
    pub fn after(mut self, sk: Option<String>) -> Self {
        self.after = sk;
        self
    }
    pub fn descending(mut self) -> Self {
        self.descending = true;
        self
    }
    /// Eventually consistent: for reads where an answer a second old is harmless and the
    /// partition is read by many (a busy geofence cell).
    pub fn eventual(mut self) -> Self {
        self.eventual = true;
        self
    }
    /// See expired items too (the retention sweeper and erasure, which delete them).
    pub fn with_expired(mut self) -> Self {
        self.with_expired = true;
        self
    }
}

#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Item>,
    /// Set when the limit cut the read short: pass it as `after` to continue.
    pub last_sk: Option<String>,
}

#[derive(Debug, Clone)]
pub enum WriteOp {
    Put {
        table: Table,
        item: Item,
        cond: Cond,
    },
    Delete {
        table: Table,
        pk: String,
        sk: String,
        cond: Cond,
    },
    /// Add `delta` to the integer attribute `attr` of the item at the key, made (with only its key
    /// and `attr`) when absent: a counter kept in the same transaction as what it counts. No
    /// read, so concurrent adds never conflict on a condition (DynamoDB's `ADD`).
    Add {
        table: Table,
        pk: String,
        sk: String,
        attr: &'static str,
        delta: i64,
    },
    /// Write nothing, but fail the transaction unless `cond` holds for the item at the key
    /// (DynamoDB's `ConditionCheck`): what a transaction derived from another item relies on.
    Check {
        table: Table,
        pk: String,
        sk: String,
        cond: Cond,
    },
}

/// Queries of one [`Store::query_docs_many`] in flight at once (a 10 km search over fine cells
/// reads several hundred; unbounded, they would all be sent together).
pub const QUERIES_IN_FLIGHT: usize = 32;

/// Most operations in one [`Store::transact`] call (DynamoDB's TransactWriteItems limit).
pub const MAX_TRANSACT_OPS: usize = 100;

/// What [`Store::query_docs_each`] hands each chunk of documents to.
pub type EachChunk<'a> = dyn FnMut(Vec<Vec<u8>>) -> Result<(), StoreError> + Send + 'a;

/// What [`Store::visit_ranges`] hands each stored document to, where it lies in the store.
pub type Visitor<'a> = dyn FnMut(&[u8]) -> Result<(), StoreError> + Send + 'a;

/// What an unsynced write ([`Store::put_unsynced`] and kin) leaves to do before it may be called
/// stored: nothing on DynamoDB, whose writes are durable when they return; on the embedded store,
/// a sync of its file through the write's position, unless a synced commit since has covered it
/// (other requests' unsynced writes after it do not count). Dropping one leaves the write to a
/// later sync: right only for writes a crash may undo.
#[must_use = "an unsynced write is durable only once `durable()` has returned"]
#[derive(Default)]
pub struct Unsynced(Option<embedded::Pending>);

impl Unsynced {
    /// Both writes' syncs as one: a sync makes every commit before it durable, so the later
    /// position covers the earlier.
    pub fn and(self, other: Unsynced) -> Unsynced {
        match (self.0, other.0) {
            (Some(a), Some(b)) => Unsynced(Some(if a.through >= b.through { a } else { b })),
            (a, b) => Unsynced(a.or(b)),
        }
    }

    /// Wait until the write is durable.
    pub async fn durable(self) -> Result<(), StoreError> {
        match self.0 {
            Some(pending) => pending.durable().await,
            None => Ok(()),
        }
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    async fn get(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Item>, StoreError>;
    async fn put(&self, table: Table, item: Item, cond: Cond) -> Result<(), StoreError>;
    /// A put that a crash may undo until the [`Unsynced`] it returns is made durable, or a later
    /// synced write commits: for bookkeeping that stays right either way (the history's page
    /// counts: see `domain::history_pages`), or for a write the caller makes durable before it
    /// answers (ingest's batch mark). The embedded store commits it without syncing its file,
    /// the sync that bounds its ingest rate; DynamoDB has one kind of put.
    async fn put_unsynced(&self, table: Table, item: Item, cond: Cond) -> Result<Unsynced, StoreError> {
        self.put(table, item, cond).await.map(|()| Unsynced::default())
    }
    /// [`Store::transact`] that a crash may undo, under [`Store::put_unsynced`]'s rule: lists'
    /// page counts registered or finished at once (`history_pages`).
    async fn transact_unsynced(&self, ops: Vec<WriteOp>) -> Result<Unsynced, StoreError> {
        self.transact(ops).await.map(|()| Unsynced::default())
    }
    async fn delete(&self, table: Table, pk: &str, sk: &str, cond: Cond) -> Result<(), StoreError>;
    /// [`Store::delete`] that a crash may undo, under [`Store::put_unsynced`]'s rule: a pass's
    /// batch marks, removed after its commit (a mark brought back by a crash costs a pass that
    /// finds nothing new).
    async fn delete_unsynced(&self, table: Table, pk: &str, sk: &str, cond: Cond) -> Result<Unsynced, StoreError> {
        self.delete(table, pk, sk, cond).await.map(|()| Unsynced::default())
    }
    async fn query(&self, table: Table, q: &Query) -> Result<Page, StoreError>;
    /// One item as a JSON document, for a record decoded straight from it ([`get_as`]). By default
    /// [`Store::get`]'s item, encoded. A document may lack `pk` (the embedded store keeps it in
    /// the key only): records decoded from documents never read it, and conditions never name it.
    async fn get_doc(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Doc>, StoreError> {
        let item = self.get(table, pk, sk).await?;
        item.map(|i| encode_doc(&i)).transpose()
    }
    /// The items of a query (its limit and cursor honoured; without a limit, all of the range) as
    /// JSON documents, each decoded straight into its record ([`from_json`]) without building the
    /// item's tree first: long reads, and lists that decode only the page they return. By default
    /// the items of [`Store::query`], encoded. As with [`Store::get_doc`], `pk` may be absent.
    async fn query_docs(&self, table: Table, q: &Query) -> Result<Vec<Doc>, StoreError> {
        let page = self.query(table, q).await?;
        page.items.iter().map(encode_doc).collect()
    }
    /// [`Store::query_docs`] handed to `each` in chunks, in order, as they are read: the embedded
    /// store reads the next chunk on the blocking pool while the caller decodes this one (a trip
    /// summary's 100,000 fixes: reading and decoding take about as long). An error from `each`
    /// stops the read and is returned. By default one chunk.
    async fn query_docs_each(&self, table: Table, q: &Query, each: &mut EachChunk) -> Result<(), StoreError> {
        each(self.query_docs(table, q).await?.into_iter().map(Doc::into_vec).collect())
    }
    /// Each item of each of `qs` (whole ranges: limits and cursors are not for this) handed to the
    /// visitor of the same index as its stored bytes, in key order: one long read cut into
    /// consecutive ranges (a trip's 100,000 fixes). By default the ranges are read side by side,
    /// [`Store::query_docs_each`] each (DynamoDB: their pages fetched at once rather than one
    /// after another); the embedded store reads them all from one snapshot, each range on a
    /// thread of its own once the reads prove long (read and decoded on two cores at once
    /// without a copy of each).
    async fn visit_ranges(&self, table: Table, qs: &[Query], visitors: &mut [Box<Visitor>]) -> Result<(), StoreError> {
        let reads = qs.iter().zip(visitors.iter_mut()).map(|(q, visit)| async move {
            self.query_docs_each(table, q, &mut |docs| docs.iter().try_for_each(|d| visit(d))).await
        });
        futures::future::try_join_all(reads).await.map(drop)
    }
    /// The documents of several queries ([`Store::query_docs`] each), in the queries' order: reads
    /// that fan out over many small partitions (the geofence index's cells). By default up to
    /// [`QUERIES_IN_FLIGHT`] queries at once (DynamoDB: one Query call each); the embedded store
    /// reads them all in one read transaction, on the calling task when they are small.
    async fn query_docs_many(&self, table: Table, qs: &[Query]) -> Result<Vec<Vec<Doc>>, StoreError> {
        use futures::{StreamExt, TryStreamExt};
        // Owned queries: a stream of borrowed ones is not `Send` for every lifetime, as the
        // trait's boxed future must be.
        let reads = qs.iter().cloned().map(|q| async move { self.query_docs(table, &q).await });
        futures::stream::iter(reads).buffered(QUERIES_IN_FLIGHT).try_collect().await
    }
    /// The documents of the partition's items at these sort keys (None where there is none), in
    /// their order: a page of records named by an index. By default one query of each key
    /// ([`Store::query_docs_many`]); the embedded store gets them in one read transaction.
    async fn get_docs(&self, table: Table, pk: &str, sks: &[String]) -> Result<Vec<Option<Doc>>, StoreError> {
        let qs: Vec<Query> = sks.iter().map(|sk| Query::new(pk, SkRange::Between(sk.clone(), sk.clone()))).collect();
        Ok(self.query_docs_many(table, &qs).await?.into_iter().map(|mut d| d.pop()).collect())
    }
    /// How many items of the partition fall in `range` (expired ones left out).
    async fn count(&self, table: Table, pk: &str, range: &SkRange) -> Result<usize, StoreError>;
    /// All or nothing, at most [`MAX_TRANSACT_OPS`] operations on distinct keys.
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError>;
    /// Put each item unless its key already holds one; returns, per item, whether it was stored.
    /// Not atomic across items; each item is.
    async fn put_new(&self, table: Table, items: Vec<Item>) -> Result<Vec<bool>, StoreError>;
    /// Whether writes are billed by the kilobyte (DynamoDB's write units), so that a little CPU
    /// spent keeping an item under a unit pays (`webhooks::stored_body`). The embedded store
    /// bills nothing.
    fn bills_by_kilobyte(&self) -> bool {
        false
    }
    /// [`Store::put_new`] under [`Store::put_unsynced`]'s rule: the fixes of an ingest, made
    /// durable (usually by its processing pass's synced commit already) before it answers.
    async fn put_new_unsynced(&self, table: Table, items: Vec<Item>) -> Result<(Vec<bool>, Unsynced), StoreError> {
        Ok((self.put_new(table, items).await?, Unsynced::default()))
    }
    /// Since when this process is the only one writing the store, if it is: whatever an older
    /// write left half done (a batch mark still `stored: false`) belongs to a request that died
    /// with the process before, never to one still running. The embedded store holds its file's
    /// lock from its opening on; DynamoDB tables are shared (Lambda functions run side by side)
    /// unless the process says it owns them ([`DynamoStore::sole_writer`]: `waymark serve`).
    fn sole_writer_since(&self) -> Option<crate::time::Timestamp> {
        None
    }
    /// Delete the items at these keys, unconditionally; keys already gone are fine. Not atomic:
    /// for bulk removal (retention, erasure) where each item goes on its own. On DynamoDB a
    /// BatchWriteItem (its own IAM action) of 25 keys at a time, at one write unit a delete.
    async fn delete_many(&self, table: Table, keys: Vec<(String, String)>) -> Result<(), StoreError> {
        for (pk, sk) in keys {
            self.delete(table, &pk, &sk, Cond::None).await?;
        }
        Ok(())
    }
    /// Every item of the table: a Scan on DynamoDB. For tests and debugging only (proving that
    /// an erased user left nothing); no request path calls it, since every list is a Query.
    async fn scan_all(&self, table: Table) -> Result<Vec<Item>, StoreError>;
    /// Create any missing table.
    async fn ensure_tables(&self) -> Result<(), StoreError>;
}

/// A typed record as an item at `pk`/`sk`.
pub fn to_item<T: Serialize>(pk: &str, sk: &str, record: &T) -> Result<Item, StoreError> {
    let mut item = match serde_json::to_value(record).map_err(|e| StoreError::Corrupt(e.to_string()))? {
        Value::Object(m) => m,
        _ => return Err(StoreError::Corrupt("record is not an object".into())),
    };
    item.insert("pk".into(), pk.into());
    item.insert("sk".into(), sk.into());
    let size = serde_json::to_vec(&item).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > MAX_ITEM_BYTES {
        return Err(StoreError::TooLarge(size));
    }
    Ok(item)
}

/// One item as a record, without building the item's tree first (the warm path's reads of the
/// key and the user).
pub async fn get_as<T: DeserializeOwned>(
    store: &dyn Store,
    table: Table,
    pk: &str,
    sk: &str,
) -> Result<Option<T>, StoreError> {
    store.get_doc(table, pk, sk).await?.map(|d| from_json(&d)).transpose()
}

/// The items of a query as records, each decoded straight from its document
/// ([`Store::query_docs`]) rather than through a JSON tree: the warm reads of one trip's events and
/// a user's stays.
pub async fn query_as<T: DeserializeOwned>(store: &dyn Store, table: Table, q: &Query) -> Result<Vec<T>, StoreError> {
    from_jsons(&store.query_docs(table, q).await?)
}

/// Records from documents, in their order. Sized up front: a collect of `Result`s cannot know its
/// length and grows by copying (a summary's 100,000 fixes: megabytes copied and faulted in).
pub fn from_jsons<T: DeserializeOwned>(docs: &[impl AsRef<[u8]>]) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::with_capacity(docs.len());
    for d in docs {
        out.push(from_json(d.as_ref())?);
    }
    Ok(out)
}

/// The records of consecutive ranges of one partition, in order ([`Store::visit_ranges`]).
pub async fn query_as_ranges<T: DeserializeOwned + Send + 'static>(
    store: &dyn Store,
    table: Table,
    qs: &[Query],
) -> Result<Vec<T>, StoreError> {
    let mut parts: Vec<Vec<T>> = qs.iter().map(|_| Vec::new()).collect();
    let mut visitors: Vec<Box<Visitor>> = parts
        .iter_mut()
        .map(|part| {
            Box::new(move |doc: &[u8]| {
                part.push(from_json(doc)?);
                Ok(())
            }) as Box<Visitor>
        })
        .collect();
    store.visit_ranges(table, qs, &mut visitors).await?;
    drop(visitors);
    // The first range's records are the answer's start: only the others are moved after them.
    let rest = parts.iter().skip(1).map(Vec::len).sum();
    let mut parts = parts.into_iter();
    let mut out = parts.next().unwrap_or_default();
    out.reserve_exact(rest);
    parts.for_each(|p| out.extend(p));
    Ok(out)
}

/// An item as a document ([`Store::get_doc`]'s default).
fn encode_doc(item: &Item) -> Result<Doc, StoreError> {
    serde_json::to_vec(item).map(Doc::from).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// A record from a JSON document of [`Store::query_docs`].
pub fn from_json<T: DeserializeOwned>(doc: &[u8]) -> Result<T, StoreError> {
    serde_json::from_str(doc_str(doc)?).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// A stored document as text, checked once as a whole: read from bytes, serde_json checks every
/// string it meets on its own, which made decoding a user a third slower (1.3 against 0.9 µs).
pub(crate) fn doc_str(doc: &[u8]) -> Result<&str, StoreError> {
    std::str::from_utf8(doc).map_err(|e| StoreError::Corrupt(format!("stored document: {e}")))
}

pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_json::from_value(Value::Object(item)).map_err(|e| StoreError::Corrupt(e.to_string()))
}

pub(crate) fn key_of(item: &Item) -> Result<(String, String), StoreError> {
    let s = |k: &str| {
        item.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| StoreError::Corrupt(format!("item without string {k}")))
    };
    Ok((s("pk")?, s("sk")?))
}

/// Whether `cond` holds for the item currently stored (`None` when absent).
pub(crate) fn cond_holds(cond: &Cond, current: Option<&Item>) -> bool {
    match (cond, current) {
        (Cond::None, _) => true,
        (Cond::NotExists, c) => c.is_none(),
        (Cond::Exists, c) => c.is_some(),
        (Cond::Equals(attr, v), Some(item)) => item.get(*attr).is_some_and(|cur| json_eq(cur, v)),
        (Cond::Equals(..), None) => false,
    }
}

/// Numbers compare by value (DynamoDB does; JSON `1` and `1.0` are the same number).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_clock_is_the_calendar_clock_in_whole_seconds() {
        let (before, now, after) = (chrono::Utc::now().timestamp(), epoch_now(), chrono::Utc::now().timestamp());
        assert!(before <= now && now <= after, "{before} {now} {after}");
    }

    #[test]
    fn items_over_the_limit_are_refused_before_any_backend() {
        let big = serde_json::json!({"text": "x".repeat(MAX_ITEM_BYTES)});
        assert!(matches!(to_item("p", "s", &big), Err(StoreError::TooLarge(_))));
        assert!(to_item("p", "s", &serde_json::json!({"text": "x"})).is_ok());
    }
}
