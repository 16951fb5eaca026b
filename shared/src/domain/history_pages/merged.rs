//! Exact pages of a list spread over shards (partitions named by a hash of the user, so that no
//! partition takes a whole project's writes: docs/architecture.md, "Partitions"). Every shard
//! keeps its own counts; a page adds them cell by cell (cells are named by the id, so they line
//! up across shards), finds the cell that holds the page's first entry, and reads every shard from
//! there, merged in key order. The answer is the one a single partition holding every entry gives.

use serde::Deserialize;

use super::cells;
use crate::paging::{Order, PAGE_SIZE, PageInfo, PageNumber};
use crate::store::{Doc, Query, SkRange, Store, StoreError, Table, from_json};

#[derive(Deserialize)]
struct Sk {
    sk: String,
}

/// The sort key of a stored document.
pub fn sk_of(doc: &Doc) -> Result<String, StoreError> {
    Ok(from_json::<Sk>(doc)?.sk)
}

/// Merge shards' answers (each in `order`) into one list in `order`, by sort key. One answer is
/// already in order: it is not decoded (a location history's page reads one partition).
pub fn merge(mut parts: Vec<Vec<Doc>>, order: Order) -> Result<Vec<Doc>, StoreError> {
    if parts.len() == 1 {
        return Ok(parts.pop().unwrap_or_default());
    }
    let mut keyed: Vec<(String, Doc)> = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for doc in parts.into_iter().flatten() {
        keyed.push((sk_of(&doc)?, doc));
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    if order == Order::NewestFirst {
        keyed.reverse();
    }
    Ok(keyed.into_iter().map(|(_, d)| d).collect())
}

/// `range` of every shard (at most `limit` of each), merged in `order` (at most `limit`).
pub async fn query_all(
    store: &dyn Store,
    table: Table,
    pks: &[String],
    range: &SkRange,
    limit: Option<usize>,
    order: Order,
) -> Result<Vec<Doc>, StoreError> {
    let qs: Vec<Query> = pks
        .iter()
        .map(|pk| {
            let mut q = Query::new(pk, range.clone());
            if order == Order::NewestFirst {
                q = q.descending();
            }
            if let Some(n) = limit {
                q = q.limit(n);
            }
            q
        })
        .collect();
    let parts = store.query_docs_many(table, &qs).await?;
    let mut merged = merge(parts, order)?;
    if let Some(n) = limit {
        merged.truncate(n);
    }
    Ok(merged)
}

/// One page of the union of the shards `pks` (one key: a partition's page, [`super::page`]).
pub async fn page(
    store: &dyn Store,
    table: Table,
    pks: &[String],
    lo: &str,
    hi: &str,
    page: PageNumber,
    order: Order,
) -> Result<(Vec<Doc>, PageInfo), StoreError> {
    // Every shard's counts at once (a few small items each).
    let per_shard = futures::future::try_join_all(pks.iter().map(|pk| cells(store, table, pk, lo, hi))).await?;
    // The union's cells in key order: a cell's bounds are its id prefix (or the range's ends),
    // the same in every shard.
    let mut union: std::collections::BTreeMap<(String, String), usize> = Default::default();
    for (from, to, n) in per_shard.into_iter().flatten() {
        *union.entry((from, to)).or_default() += n;
    }
    let total = union.values().sum();
    let info = PageInfo::new(page, total);
    let offset = page.offset();
    if offset >= total {
        return Ok((Vec::new(), info));
    }
    let first = match order {
        Order::OldestFirst => offset,
        Order::NewestFirst => total - 1 - offset,
    };
    let mut before = 0;
    for ((from, to), n) in union {
        if first >= before + n {
            before += n;
            continue;
        }
        let (range, skip) = match order {
            Order::OldestFirst => (SkRange::Between(from, hi.to_owned()), first - before),
            Order::NewestFirst => (SkRange::Between(lo.to_owned(), to), before + n - 1 - first),
        };
        // Each shard gives at most `skip + PAGE_SIZE` from there: the union's first that many
        // are among them.
        let docs = query_all(store, table, pks, &range, Some(skip + PAGE_SIZE), order).await?;
        return Ok((docs.into_iter().skip(skip).collect(), info));
    }
    Ok((Vec::new(), info))
}
