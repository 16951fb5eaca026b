//! Exact `page_number` paging of a user's location history, the geofence event lists, a user's
//! trip events and a webhook endpoint's delivery log, at a cost that does not grow with the page
//! number: each partition carries its own counts, under sort keys from `~` (after every id).
//! Writers count through [`put_new_counted`] (put-if-absent) or [`counting`] (around a
//! transaction), deleters of single entries go through [`deleting`]: a write around them leaves
//! the counts wrong. Different writers never write the same item (see `deltas`).
//! See docs/architecture.md, "Counted pages".

mod cells;
mod deltas;
pub use deltas::with_fold_odds;
pub mod merged;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::paging::{Order, PageInfo, PageNumber};
use serde_json::Value;

use cells::{Cells, cell_end};

use crate::expiry::TTL_ATTRIBUTE;
use crate::store::{
    Cond, Doc, Item, Query, SkRange, Store, StoreError, Table, Unsynced, WriteOp, from_json, key_of, to_item,
};

/// Hex digits of an id that name its bucket, and its cell.
const BUCKET_HEX: usize = 6;
const CELL_HEX: usize = 8;
/// Attempts at a conditional update of a bucket before giving up (contention).
const TRIES: usize = 20;
/// A writer pending longer than this died (ms): no request lives that long (the pipeline's
/// batch marks rely on the same bound).
const DEAD_AFTER_MS: i64 = crate::time::REQUEST_LIFETIME_SECONDS * 1000;

/// The sort-key range of every fix of a partition.
pub fn fixes() -> SkRange {
    let (lo, hi) = crate::ids::all_ids();
    SkRange::Between(lo, hi)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Bucket {
    /// Fixes per cell.
    #[serde(default)]
    n: Cells,
    /// Per cell, the earliest TTL (`expires_at`, epoch seconds) of its fixes, when any has one.
    #[serde(default)]
    exp: BTreeMap<String, i64>,
    /// Whether `n` is exact (a deleter's recount may leave it unknown).
    valid: bool,
    nonce: String,
    /// Deltas already merged into `n` whose deletes may not have happened yet: readers skip
    /// them, and the next fold deletes them again and forgets them once they are gone. A fold
    /// writes the base and then deletes its deltas one by one (one write unit each), where one
    /// transaction took twice the units of every item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    folded: Vec<String>,
}

fn bucket_sk(bucket: &str) -> String {
    format!("~{bucket}")
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A fix id's bucket and cell. Ids are ASCII hex; anything shorter falls in bucket "" (none).
fn split(id: &str) -> (&str, &str) {
    match (id.get(..BUCKET_HEX), id.get(BUCKET_HEX..CELL_HEX)) {
        (Some(b), Some(c)) => (b, c),
        _ => ("", ""),
    }
}

/// A fix as far as counting needs it.
#[derive(Deserialize)]
struct Counted {
    sk: String,
    #[serde(default)]
    expires_at: Option<f64>,
}

/// A writer registered in the buckets of the fixes it is about to store (see [`begin`]).
pub struct Writer {
    table: Table,
    pk: String,
    id: String,
    buckets: BTreeSet<String>,
    /// When it registered (epoch ms).
    at: i64,
    /// Whether it knows what it adds (a deleter does not: its deltas say unknown, and the bucket
    /// is recounted).
    counted: bool,
}

/// Register as a writer in the buckets of `ids` (fixes about to be stored in partition `pk`).
pub async fn begin(store: &dyn Store, table: Table, pk: &str, ids: &[&str]) -> Result<Writer, StoreError> {
    begin_at(store, table, pk, ids, now_ms()).await
}

/// [`begin`] as of `at_ms` (tests stand for a writer that died long ago with a past time).
pub async fn begin_at(
    store: &dyn Store,
    table: Table,
    pk: &str,
    ids: &[&str],
    at_ms: i64,
) -> Result<Writer, StoreError> {
    let mut writers = begin_all(store, table, &[(pk, ids.to_vec())], at_ms, true).await?;
    writers.pop().ok_or_else(|| StoreError::Backend("no writer".into()))
}

/// [`begin_at`] in several partitions (`(pk, ids)` each), registered in one write. A deleter
/// (`adds` false) registers only in buckets that exist: a bucket with entries has its item, and
/// an erased user's partition must not get items back.
async fn begin_all(
    store: &dyn Store,
    table: Table,
    parts: &[(&str, Vec<&str>)],
    at_ms: i64,
    adds: bool,
) -> Result<Vec<Writer>, StoreError> {
    let id = crate::ids::random_hex(8);
    let writers: Vec<Writer> = parts
        .iter()
        .map(|(pk, ids)| {
            let buckets: BTreeSet<String> =
                ids.iter().map(|i| split(i).0).filter(|b| !b.is_empty()).map(str::to_owned).collect();
            Writer { table, pk: (*pk).to_owned(), id: id.clone(), buckets, at: at_ms, counted: adds }
        })
        .collect();
    deltas::register(store, table, &writers, adds).await?;
    Ok(writers)
}

/// Done writing: `stored` are the fixes that were new to the log (id and TTL), or `None` when the
/// writer does not know (its store call failed part-way).
pub async fn finish(store: &dyn Store, w: Writer, stored: Option<&[(String, Option<i64>)]>) -> Result<(), StoreError> {
    let stored = stored.map(|s| BTreeMap::from([(w.pk.clone(), s.to_vec())]));
    finish_all(store, vec![w], stored.as_ref()).await
}

/// Per partition, the fixes that were new to it: id and TTL.
type NewByPartition = BTreeMap<String, Vec<(String, Option<i64>)>>;

/// [`finish`] of writers of one [`begin_all`] (their table and id are the same), in one write;
/// `stored` per partition.
async fn finish_all(
    store: &dyn Store,
    writers: Vec<Writer>,
    stored: Option<&NewByPartition>,
) -> Result<(), StoreError> {
    deltas::finish(store, &writers, stored).await
}

/// Put each item (of counted partitions, keyed by id) unless its key holds one, unsynced
/// ([`Store::put_new_unsynced`]), counted: a writer registered in each partition before the put
/// and finished with what was new after it. Returns, per item, whether it was stored, and the
/// put's pending sync (the counts are bookkeeping a crash may undo: see `deltas`).
pub async fn put_new_counted(
    store: &dyn Store,
    table: Table,
    items: Vec<Item>,
) -> Result<(Vec<bool>, Unsynced), StoreError> {
    put_new_counted_with(store, table, items, Vec::new()).await
}

/// [`put_new_counted`] of `items`, with `others` (of lists not counted) put-if-absent in the same
/// store call: a processing pass's events and the rest of its facts, one write instead of two.
/// Returns, per item of `items`, whether it was stored, and the put's pending sync.
pub async fn put_new_counted_with(
    store: &dyn Store,
    table: Table,
    items: Vec<Item>,
    others: Vec<Item>,
) -> Result<(Vec<bool>, Unsynced), StoreError> {
    if items.is_empty() {
        if others.is_empty() {
            return Ok((Vec::new(), Unsynced::default()));
        }
        let (_, unsynced) = store.put_new_unsynced(table, others).await?;
        return Ok((Vec::new(), unsynced));
    }
    let keys: Vec<(String, String)> = items.iter().map(key_of).collect::<Result<_, _>>()?;
    let ttls: Vec<Option<i64>> = items.iter().map(|i| i.get(TTL_ATTRIBUTE).and_then(Value::as_i64)).collect();
    let parts = by_partition(keys.iter().map(|(pk, id)| (pk.as_str(), id.as_str())));
    let writers = begin_all(store, table, &parts, now_ms(), true).await?;
    let counted = items.len();
    let all = if others.is_empty() { items } else { items.into_iter().chain(others).collect() };
    let (stored, unsynced) = match store.put_new_unsynced(table, all).await {
        Ok((mut s, unsynced)) => {
            s.truncate(counted);
            (s, unsynced)
        }
        Err(e) => {
            // Best effort: should this fail too, the writers count as dead within a minute.
            let _ = finish_all(store, writers, None).await;
            return Err(e);
        }
    };
    let mut new = NewByPartition::new();
    for (((pk, sk), ttl), _) in keys.into_iter().zip(ttls).zip(&stored).filter(|(_, s)| **s) {
        new.entry(pk).or_default().push((sk, ttl));
    }
    finish_all(store, writers, Some(&new)).await?;
    Ok((stored, unsynced))
}

/// An entry about to be stored in a counted partition: its key and TTL (`expires_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntry {
    pub pk: String,
    pub id: String,
    pub ttl: Option<i64>,
}

/// Run `write`, which stores `entries` (entries new to their counted partitions, among other
/// items), counted: a writer registered in their buckets before it and finished after it with
/// what it did. When `all_or_nothing` (one transaction), a failed condition means nothing was
/// stored; otherwise, as after any other error, the buckets are left to be recounted. Returns
/// what `write` returns: a finish that fails after it stored is logged, not returned (the writer
/// goes dead within a minute and its buckets are recounted), so a caller never repeats a write
/// that happened.
pub async fn counting<T>(
    store: &dyn Store,
    table: Table,
    entries: &[NewEntry],
    all_or_nothing: bool,
    write: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    if entries.is_empty() {
        return write.await;
    }
    let parts = by_partition(entries.iter().map(|e| (e.pk.as_str(), e.id.as_str())));
    let writers = begin_all(store, table, &parts, now_ms(), true).await?;
    let result = write.await;
    let stored = match &result {
        Ok(_) => {
            let mut new = NewByPartition::new();
            for e in entries {
                new.entry(e.pk.clone()).or_default().push((e.id.clone(), e.ttl));
            }
            Some(new)
        }
        Err(StoreError::ConditionFailed) if all_or_nothing => Some(NewByPartition::new()),
        Err(_) => None,
    };
    if let Err(e) = finish_all(store, writers, stored.as_ref()).await {
        tracing::warn!(error = %e, "counts of a list left to be recounted");
    }
    result
}

/// Entries with these keys (`(pk, id)`, of one or more partitions) are about to be deleted (not
/// whole partitions): registered as a writer in their buckets, so a reader counts those buckets
/// itself until [`Deleting::done`], after which the next reader recounts them. (Marking the
/// buckets alone was not enough: a reader between the mark and the delete recounted and wrote
/// back counts of what was then deleted.)
pub async fn deleting(store: &dyn Store, table: Table, keys: &[(String, String)]) -> Result<Deleting, StoreError> {
    let parts = by_partition(keys.iter().map(|(pk, id)| (pk.as_str(), id.as_str())));
    Ok(Deleting(begin_all(store, table, &parts, now_ms(), false).await?))
}

/// Writers registered by [`deleting`]. Not finished (an error on the way), they count as dead
/// within a minute, with the same effect.
#[must_use = "call done once the entries are deleted"]
pub struct Deleting(Vec<Writer>);

impl Deleting {
    /// The entries are deleted: the buckets are left to be recounted by the next reader.
    pub async fn done(self, store: &dyn Store) -> Result<(), StoreError> {
        finish_all(store, self.0, None).await
    }
}

/// Keys (`(pk, id)`) grouped by partition, as [`begin_all`] takes them.
fn by_partition<'a>(keys: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut partitions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (pk, id) in keys {
        partitions.entry(pk).or_default().push(id);
    }
    partitions.into_iter().collect()
}

/// Cell counts of a bucket, by reading its fixes. Written back (as the base, its deltas deleted)
/// when `seen` (the bucket's items as read before counting) has no live writer and they are
/// unchanged after counting: a writer that registered before then may or may not be in the count,
/// one that registers after stores after it and adds its own delta.
async fn recount(
    store: &dyn Store,
    table: Table,
    pk: &str,
    seen: &deltas::Group,
    now_ms: i64,
) -> Result<Cells, StoreError> {
    let bucket = seen.bucket.as_str();
    let range = SkRange::Between(format!("{bucket}{}", "0".repeat(18)), format!("{bucket}{}", "f".repeat(18)));
    let mut b = Bucket { valid: true, ..Bucket::default() };
    for doc in store.query_docs(table, &Query::new(pk, range)).await? {
        let fix: Counted = from_json(&doc)?;
        let cell = split(&fix.sk).1.to_owned();
        if let Some(e) = fix.expires_at.map(|e| e as i64) {
            let cur = b.exp.entry(cell.clone()).or_insert(e);
            *cur = (*cur).min(e);
        }
        if !b.n.add(&cell) {
            return Err(StoreError::Corrupt(format!("{pk}: an entry's key {} is not a hex id", fix.sk)));
        }
    }
    if seen.live(now_ms) || seen.deltas.len() >= crate::store::MAX_TRANSACT_OPS {
        return Ok(b.n);
    }
    if deltas::read_group(store, table, pk, bucket).await?.fingerprint() != seen.fingerprint() {
        return Ok(b.n);
    }
    b.nonce = crate::ids::random_hex(8);
    // Folded deltas still there stay skipped: the count just made holds their entries.
    b.folded = seen.stale.clone();
    let mut ops = vec![WriteOp::Put { table, item: to_item(pk, &bucket_sk(bucket), &b)?, cond: seen.base_cond() }];
    ops.extend(seen.deltas.iter().map(|d| WriteOp::Delete {
        table,
        pk: pk.to_owned(),
        sk: d.sk.clone(),
        cond: Cond::None,
    }));
    match store.transact_unsynced(ops).await.map(drop) {
        Ok(()) | Err(StoreError::ConditionFailed) => {}
        Err(e) => return Err(e),
    }
    Ok(b.n)
}

/// How many fixes of partition `pk` have keys in `lo..=hi` (hex ids): what counting the range
/// gives, at the cost of its bucket items.
pub async fn count(store: &dyn Store, table: Table, pk: &str, lo: &str, hi: &str) -> Result<usize, StoreError> {
    Ok(cells(store, table, pk, lo, hi).await?.iter().map(|c| c.2).sum())
}

/// The cells of `lo..=hi` that hold fixes, in key order: their first and last keys in the range,
/// and how many they hold.
async fn cells(
    store: &dyn Store,
    table: Table,
    pk: &str,
    lo: &str,
    hi: &str,
) -> Result<Vec<(String, String, usize)>, StoreError> {
    let now = now_ms();
    let (first_cell, last_cell) = (split(lo), split(hi));
    // Whether the range's ends cut their cells (else those cells' counts hold as they are).
    let cut_first = lo.get(CELL_HEX..).is_some_and(|r| r.bytes().any(|c| c != b'0'));
    let cut_last = hi.get(CELL_HEX..).is_some_and(|r| r.bytes().any(|c| c != b'f'));
    let q = Query::new(pk, deltas::buckets_range(first_cell.0, last_cell.0));
    // The range's cells that hold entries, in key order: their first and last keys, and count.
    let mut cells: Vec<(String, String, usize)> = Vec::new();
    // Straight from the stored JSON: a page decodes every bucket item of the range.
    for g in deltas::groups(&store.query_docs(table, &q).await?)? {
        let bucket = g.bucket.clone();
        let (counts, exp) = match g.exact() {
            Some(exact) => {
                if g.deltas.len() >= deltas::READ_FOLD_AT {
                    deltas::fold(store, table, pk, &g).await?;
                }
                exact
            }
            // Just counted: exact now, whatever has expired.
            None => (recount(store, table, pk, &g, now).await?, BTreeMap::new()),
        };
        for (cell, n) in counts.held() {
            let place = (bucket.as_str(), cell);
            if place < first_cell || place > last_cell {
                continue;
            }
            let (at_first, at_last) = (place == first_cell, place == last_cell);
            let from = if at_first { lo.to_owned() } else { cell_end(&bucket, cell, '0') };
            let to = if at_last { hi.to_owned() } else { cell_end(&bucket, cell, 'f') };
            let expired = exp.get(cell).is_some_and(|e| e.saturating_mul(1000) <= now);
            let n = if (at_first && cut_first) || (at_last && cut_last) || expired {
                store.count(table, pk, &SkRange::Between(from.clone(), to.clone())).await?
            } else {
                n as usize
            };
            if n > 0 {
                cells.push((from, to, n));
            }
        }
    }
    Ok(cells)
}

/// Page `page` of the fixes of partition `pk` whose keys lie in `lo..=hi` (hex ids), in `order`
/// (newest first: counted from the range's end), with its paging fields: the same answer as
/// counting the range and skipping, at the cost of the range's bucket items, a cell and a page;
/// the page as stored JSON documents.
pub async fn page(
    store: &dyn Store,
    table: Table,
    pk: &str,
    lo: &str,
    hi: &str,
    page: PageNumber,
    order: Order,
) -> Result<(Vec<Doc>, PageInfo), StoreError> {
    // One partition is a list of one shard (`merged` reads it without merging).
    merged::page(store, table, &[pk.to_owned()], lo, hi, page, order).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use cells::{cell_index, cell_name};

    #[test]
    fn cell_counts_are_stored_as_an_array() {
        let mut c = Cells::default();
        for cell in ["03", "03", "00", "ff"] {
            assert!(c.add(cell));
        }
        for bad in ["3", "0g", "FF", "+1", "003", ""] {
            assert!(!c.add(bad), "{bad:?} is not a cell");
        }
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json.as_array().map(Vec::len), Some(256));
        assert_eq!((json[0].clone(), json[3].clone(), json[255].clone()), (1.into(), 2.into(), 1.into()));
        assert_eq!(serde_json::from_value::<Cells>(json).unwrap(), c);
        assert_eq!(c.held().collect::<Vec<_>>(), [("00", 1), ("03", 2), ("ff", 1)]);
        assert!(serde_json::from_value::<Cells>(serde_json::json!({"00": 1})).is_err());
        assert_eq!(serde_json::to_string(&Cells::default()).unwrap(), "[]");
    }

    #[test]
    fn cells_are_named_and_bounded_as_ids_write_them() {
        assert_eq!((cell_name(0), cell_name(0x0a), cell_name(0xb4), cell_name(255)), ("00", "0a", "b4", "ff"));
        assert!((0..256).all(|i| cell_index(cell_name(i)) == Some(i)));
        assert_eq!(cell_end("0192a3", "b4", '0'), "0192a3b40000000000000000");
        assert_eq!(cell_end("0192a3", "b4", 'f'), "0192a3b4ffffffffffffffff");
    }

    #[test]
    fn an_id_splits_into_bucket_and_cell() {
        assert_eq!(split("0192a3b4c5d6e7f801234567"), ("0192a3", "b4"));
        assert_eq!(split("short"), ("", ""));
    }
}
