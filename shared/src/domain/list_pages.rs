//! Exact `page_number` paging of the lists keyed by id (a project's users, geofences, moving
//! geofences, v1/v3 trips) at a cost that does not grow with the page number: counters per id
//! prefix (a tree of fan-out 256 over creation time) in a partition of their own, `<list pk>#N`.
//! Counters are kept by `ADD` in the same transaction as the insert or removal they count
//! ([`count_ops`]), so they never drift; every list is counted from its first insert, so a list
//! without counters is empty. See docs/architecture.md, "Counted pages".

use std::fmt::Write;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::ids::{FIRST_ID, LAST_ID, all_ids};
use crate::paging::{Order, PAGE_SIZE, PageInfo, PageNumber};
use crate::store::{Cond, Doc, Item, Query, SkRange, Store, StoreError, Table, WriteOp, from_json, key_of};

/// Prefix lengths (hex digits of the id) with a counter, root first.
pub(crate) const LEVELS: [usize; 5] = [4, 6, 8, 10, 12];

/// A counter as stored.
#[derive(Deserialize)]
struct Counter {
    sk: String,
    #[serde(default)]
    n: i64,
}

/// The partition of a list's counters.
pub fn counts_pk(list_pk: &str) -> String {
    [list_pk, "#N"].concat()
}

/// `prefix` padded with `c` to `len` characters: the first or last key under a prefix.
fn padded(prefix: &str, c: char, len: usize) -> String {
    let mut s = String::with_capacity(len);
    s.push_str(prefix);
    s.extend(std::iter::repeat_n(c, len.saturating_sub(prefix.len())));
    s
}

/// A counter's sort key: its prefix length as one hex digit, then the prefix (so one level's
/// counters are one key range, and a node's children the range under its prefix).
fn counter_sk(prefix: &str) -> String {
    // Built in a string of its size: `format!` starts short and grows (every list page builds a
    // few of these).
    let mut sk = String::with_capacity(prefix.len() + 2);
    let _ = write!(sk, "{:x}", prefix.len());
    sk.push_str(prefix);
    sk
}

/// The operations that count `id` in (`delta` 1) or out of (`delta` -1) the list at `pk`: part of
/// the transaction that puts or removes the item, whose condition decides whether it happens.
pub fn count_ops(table: Table, pk: &str, id: &str, delta: i64) -> Vec<WriteOp> {
    let cpk = counts_pk(pk);
    LEVELS
        .iter()
        .filter_map(|&l| id.get(..l))
        .map(|prefix| WriteOp::Add { table, pk: cpk.clone(), sk: counter_sk(prefix), attr: "n", delta })
        .collect()
}

/// Put `item` (a new entry of the list at `pk`, sort key its id) only if its key is free, counted.
pub async fn insert(store: &dyn Store, table: Table, item: Item) -> Result<(), StoreError> {
    let (pk, id) = key_of(&item)?;
    let mut ops = vec![WriteOp::Put { table, item, cond: Cond::NotExists }];
    ops.extend(count_ops(table, &pk, &id, 1));
    store.transact(ops).await
}

/// Remove the entry `id` of the list at `pk`, counted out; false when it was already gone (a
/// retried erasure).
pub async fn remove(store: &dyn Store, table: Table, pk: &str, id: &str) -> Result<bool, StoreError> {
    let mut ops = vec![WriteOp::Delete { table, pk: pk.to_owned(), sk: id.to_owned(), cond: Cond::Exists }];
    ops.extend(count_ops(table, pk, id, -1));
    match store.transact(ops).await {
        Ok(()) => Ok(true),
        Err(StoreError::ConditionFailed) => Ok(false),
        Err(e) => Err(e),
    }
}

/// One level's counters under `parent` (all of the root level when `parent` is empty), limited to
/// prefixes in `lo..=hi` when given, in key order: (prefix, count).
async fn children(
    store: &dyn Store,
    table: Table,
    cpk: &str,
    parent: &str,
    level: usize,
    upto: Option<&str>,
) -> Result<Vec<(String, i64)>, StoreError> {
    counters(&store.query_docs(table, &children_query(cpk, parent, level, upto)).await?, level)
}

/// The query of [`children`].
fn children_query(cpk: &str, parent: &str, level: usize, upto: Option<&str>) -> Query {
    let len = LEVELS[level];
    let pad = |c: char| padded(parent, c, len);
    let hi = upto.map(str::to_owned).unwrap_or_else(|| pad('f'));
    Query::new(cpk, SkRange::Between(counter_sk(&pad('0')), counter_sk(&hi)))
}

/// What [`children_query`] read, as (prefix, count).
fn counters(docs: &[Doc], level: usize) -> Result<Vec<(String, i64)>, StoreError> {
    let len = LEVELS[level];
    let mut out = Vec::with_capacity(docs.len());
    // Straight from the stored JSON: a walk reads up to 256 counters a level, every list page
    // the root's.
    for doc in docs {
        let c: Counter = from_json(doc)?;
        // Keys of another length cannot fall in the range (the length leads the key); checked
        // all the same. A counter of an emptied cell reads 0.
        if c.sk.len() == len + 1 && c.n > 0 {
            out.push((c.sk[1..].to_owned(), c.n));
        }
    }
    Ok(out)
}

/// How many entries of the list have ids `<= key` (a 24-digit bound).
async fn rank_le(store: &dyn Store, table: Table, pk: &str, key: &str) -> Result<usize, StoreError> {
    let cpk = counts_pk(pk);
    let mut n = 0i64;
    let mut parent = "";
    for (level, &len) in LEVELS.iter().enumerate() {
        let prefix = &key[..len];
        // Counters before this prefix: whole subtrees below the key.
        for (p, c) in children(store, table, &cpk, parent, level, Some(prefix)).await? {
            if p.as_str() < prefix {
                n += c;
            }
        }
        parent = prefix;
    }
    // Within the key's own millisecond: its items up to the key.
    let cell = SkRange::Between(format!("{parent}{}", "0".repeat(24 - parent.len())), key.to_owned());
    Ok((n.max(0) as usize) + store.count(table, pk, &cell).await?)
}

/// The millisecond cell that holds the entry at position `at` (from 0, ascending) and how many
/// of the cell's entries come before it; with the cell's count. None when the counts hold fewer
/// entries (a concurrent removal).
async fn locate(
    store: &dyn Store,
    table: Table,
    pk: &str,
    mut root: Option<Vec<(String, i64)>>,
    mut at: i64,
) -> Result<Option<(String, i64, i64)>, StoreError> {
    let cpk = counts_pk(pk);
    let mut parent = String::new();
    let mut count = 0;
    for level in 0..LEVELS.len() {
        let mut found = None;
        // The root level, when the caller has read it already (for the total).
        let nodes = match root.take() {
            Some(r) => r,
            None => children(store, table, &cpk, &parent, level, None).await?,
        };
        for (p, c) in nodes {
            if at < c {
                found = Some((p, c));
                break;
            }
            at -= c;
        }
        let Some((p, c)) = found else { return Ok(None) };
        parent = p;
        count = c;
    }
    Ok(Some((parent, at, count)))
}

/// One page of a counted list as stored JSON documents, `keep` being the caller's filter if any:
/// without one, by the counts ([`page`]); a filter cannot be counted ahead, so with one the range
/// is read and filtered.
pub async fn page_where<T: DeserializeOwned>(
    store: &dyn Store,
    table: Table,
    pk: &str,
    range: Option<(String, String)>,
    page_number: PageNumber,
    keep: Option<&(dyn Fn(&T) -> bool + Sync)>,
    order: Order,
) -> Result<(Vec<Doc>, PageInfo), StoreError> {
    let Some(keep) = keep else { return page(store, table, pk, range, page_number, order).await };
    let sk = range.map(|(a, b)| SkRange::Between(a, b)).unwrap_or(SkRange::All);
    list_page_in(store, table, pk, sk, page_number, Some(keep), order).await
}

/// Page `page` of the list at `pk` (sort keys: ids) within the ids `range` (inclusive bounds;
/// the whole list when None), in `order`, with its paging fields: the same answer as counting
/// the range and skipping, at the cost of a walk down the counters and a page; the page as
/// stored JSON documents (the caller decodes them).
pub async fn page(
    store: &dyn Store,
    table: Table,
    pk: &str,
    range: Option<(String, String)>,
    page: PageNumber,
    order: Order,
) -> Result<(Vec<Doc>, PageInfo), StoreError> {
    let cpk = counts_pk(pk);
    if range.is_none() && page.offset() == 0 {
        return first_page(store, table, pk, &cpk, page, order).await;
    }
    let (lo, hi) = range.unwrap_or_else(all_ids);
    // Positions [a, b) of the whole list hold the range.
    let mut root = None;
    let b = if hi == LAST_ID {
        let r = children(store, table, &cpk, "", 0, None).await?;
        let total = total_of(&r);
        root = Some(r);
        total
    } else {
        rank_le(store, table, pk, &hi).await?
    };
    let a = match before(&lo) {
        Some(k) if lo != FIRST_ID => rank_le(store, table, pk, &k).await?,
        _ => 0,
    };
    let total = b.saturating_sub(a);
    let info = PageInfo::new(page, total);
    let offset = page.offset();
    if offset >= total {
        return Ok((Vec::new(), info));
    }
    let take = PAGE_SIZE.min(total - offset);
    if offset == 0 {
        // The first page starts at an end of the range: no walk.
        return Ok((store.query_docs(table, &from_an_end(pk, lo, hi, order).limit(take)).await?, info));
    }
    let at = match order {
        Order::OldestFirst => a + offset,
        Order::NewestFirst => b - 1 - offset,
    };
    let Some((cell, skip, count)) = locate(store, table, pk, root, at as i64).await? else {
        return Ok((Vec::new(), info));
    };
    let pad = |c: char| padded(&cell, c, FIRST_ID.len());
    let (q, skip) = match order {
        Order::OldestFirst => (Query::new(pk, SkRange::Between(pad('0'), hi)), skip),
        // From the cell's end down: the cell's entries after the one at `at` come first.
        Order::NewestFirst => (Query::new(pk, SkRange::Between(lo, pad('f'))).descending(), count - 1 - skip),
    };
    let skip = skip.max(0) as usize;
    let docs = store.query_docs(table, &q.limit(skip + take)).await?;
    Ok((docs.into_iter().skip(skip).collect(), info))
}

/// The first page of the whole list (the one most asked for): the root counters (the total) and
/// the page read at once, one round of reads where it took two.
async fn first_page(
    store: &dyn Store,
    table: Table,
    pk: &str,
    cpk: &str,
    page: PageNumber,
    order: Order,
) -> Result<(Vec<Doc>, PageInfo), StoreError> {
    let (lo, hi) = all_ids();
    let qs = [children_query(cpk, "", 0, None), from_an_end(pk, lo, hi, order).limit(PAGE_SIZE)];
    let [root, mut docs] = <[Vec<Doc>; 2]>::try_from(store.query_docs_many(table, &qs).await?)
        .map_err(|_| StoreError::Backend("a batch of two queries did not give two answers".into()))?;
    let total = total_of(&counters(&root, 0)?);
    // As many as the counts hold (the page read and the counts can differ by a write between).
    docs.truncate(total);
    Ok((docs, PageInfo::new(page, total)))
}

/// The ids `lo..=hi` of the list at `pk` read from the end `order` starts at.
fn from_an_end(pk: &str, lo: String, hi: String, order: Order) -> Query {
    let q = Query::new(pk, SkRange::Between(lo, hi));
    if order == Order::NewestFirst { q.descending() } else { q }
}

/// The entries the root counters count: the whole list.
fn total_of(root: &[(String, i64)]) -> usize {
    root.iter().map(|(_, c)| *c).sum::<i64>().max(0) as usize
}

/// The id just before `id` (None for the first possible one).
fn before(id: &str) -> Option<String> {
    let mut digits: Vec<u8> = id.bytes().collect();
    for d in digits.iter_mut().rev() {
        match *d {
            b'0' => *d = b'f',
            b'a' => {
                *d = b'9';
                return String::from_utf8(digits).ok();
            }
            _ => {
                *d -= 1;
                return String::from_utf8(digits).ok();
            }
        }
    }
    None
}

/// One page of a partition's sort-key range, oldest first, with its paging fields. Without a
/// filter the total comes from a count and only the items up to this page are read; with a
/// filter (metadata, which DynamoDB cannot count for us) the whole range is read and filtered.
pub async fn list_page<T: serde::de::DeserializeOwned>(
    store: &dyn Store,
    table: Table,
    pk: &str,
    range: SkRange,
    page: PageNumber,
    filter: Option<&(dyn Fn(&T) -> bool + Sync)>,
) -> Result<(Vec<T>, PageInfo), StoreError> {
    let (docs, info) = list_page_in(store, table, pk, range, page, filter, Order::OldestFirst).await?;
    Ok((crate::store::from_jsons(&docs)?, info))
}

/// [`list_page`] in the given order, the page as stored JSON documents (`filter` judges them
/// decoded).
pub async fn list_page_in<T: serde::de::DeserializeOwned>(
    store: &dyn Store,
    table: Table,
    pk: &str,
    range: SkRange,
    page: PageNumber,
    filter: Option<&(dyn Fn(&T) -> bool + Sync)>,
    order: Order,
) -> Result<(Vec<Doc>, PageInfo), StoreError> {
    use crate::store::{Query, from_json};
    let mut query = Query::new(pk, range.clone());
    if order == Order::NewestFirst {
        query = query.descending();
    }
    match filter {
        None => {
            let total = store.count(table, pk, &range).await?;
            if page.offset() >= total {
                return Ok((Vec::new(), PageInfo::new(page, total)));
            }
            let docs = store.query_docs(table, &query.limit(page.offset() + crate::paging::PAGE_SIZE)).await?;
            Ok((docs.into_iter().skip(page.offset()).collect(), PageInfo::new(page, total)))
        }
        Some(keep) => {
            let mut kept = Vec::new();
            for doc in store.query_docs(table, &query).await? {
                if keep(&from_json::<T>(&doc)?) {
                    kept.push(doc);
                }
            }
            let info = PageInfo::new(page, kept.len());
            Ok((kept.into_iter().skip(page.offset()).take(crate::paging::PAGE_SIZE).collect(), info))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_before() {
        assert_eq!(before("0192a0").as_deref(), Some("01929f"));
        assert_eq!(before("0190b0").as_deref(), Some("0190af"));
        assert_eq!(before("000"), None);
    }

    #[test]
    fn an_id_is_counted_at_every_level() {
        let ops = count_ops(Table::Main, "p#U", "0192a3b4c5d6e7f801234567", 1);
        let sks: Vec<String> = ops
            .iter()
            .map(|o| match o {
                WriteOp::Add { sk, .. } => sk.clone(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(sks, ["40192", "60192a3", "80192a3b4", "a0192a3b4c5", "c0192a3b4c5d6"]);
    }
}
