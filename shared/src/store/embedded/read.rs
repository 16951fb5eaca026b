//! Reading the embedded store: key ranges of a partition, pages, counts, live documents.

use super::*;

/// The redb key bounds of a query's range, honouring the `after` cursor.
pub(super) fn bounds(pk: &str, range: &SkRange) -> (Bound<String>, Bound<String>) {
    match range {
        SkRange::All => (Bound::Included(key(pk, "")), Bound::Excluded(format!("{pk}\u{1}"))),
        // char::MAX sorts after every sort-key character we write.
        SkRange::Prefix(p) => (Bound::Included(key(pk, p)), Bound::Included(key(pk, &format!("{p}{}", char::MAX)))),
        SkRange::Between(a, b) => (Bound::Included(key(pk, a)), Bound::Included(key(pk, b))),
    }
}

pub(super) fn apply_cursor(q: &Query, (lo, hi): (Bound<String>, Bound<String>)) -> (Bound<String>, Bound<String>) {
    match &q.after {
        None => (lo, hi),
        Some(after) if q.descending => (lo, Bound::Excluded(key(&q.pk, after))),
        Some(after) => (Bound::Excluded(key(&q.pk, after)), hi),
    }
}

/// Feed the stored values of a query's range to `f`, in the query's order, until it says stop.
/// Expired values are left out unless the query asks for them.
pub(super) fn scan(
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
pub(super) fn scan_in(
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

/// Up to `limit` items of a query, and the cursor to continue when the limit cut it short;
/// `None` when that would be more than `cap` items.
pub(super) fn query_page(
    db: &Database,
    table: Table,
    q: &Query,
    cap: Option<usize>,
) -> Result<Option<Page>, StoreError> {
    let mut items = Vec::new();
    let limit = q.limit.unwrap_or(usize::MAX);
    let (mut more, mut over) = (false, false);
    scan(db, table, q, |v| {
        if items.len() == limit {
            more = true;
            return Ok(false);
        }
        if cap.is_some_and(|c| items.len() == c) {
            over = true;
            return Ok(false);
        }
        items.push(decode(v, &q.pk)?);
        Ok(true)
    })?;
    if over {
        return Ok(None);
    }
    let last_sk = if more { items.last().map(key_of).transpose()?.map(|(_, sk)| sk) } else { None };
    Ok(Some(Page { items, last_sk }))
}

/// The stored values at these redb keys (None where there is none), in one read transaction and
/// on the calling task (a few keys), expired ones included.
pub(super) fn values_at<'a>(
    db: &Database,
    table: Table,
    keys: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(redb_table(table)).map_err(backend)?;
    keys.into_iter().map(|k| Ok(t.get(k).map_err(backend)?.map(|g| g.value().to_vec()))).collect()
}

/// A stored value as reads answer it: none once expired.
pub(super) fn live(doc: Option<Vec<u8>>, now: i64) -> Option<Vec<u8>> {
    doc.filter(|d| !expired_value(d, now))
}

/// The documents of a query (its limit honoured); `None` when they come to more than `cap`.
pub(super) fn docs_of(
    db: &Database,
    table: Table,
    q: &Query,
    cap: Option<usize>,
) -> Result<Option<Vec<Vec<u8>>>, StoreError> {
    let (limit, mut out, mut over) = (q.limit.unwrap_or(usize::MAX), Vec::new(), false);
    scan(db, table, q, |v| {
        if cap.is_some_and(|c| out.len() == c) {
            over = true;
            return Ok(false);
        }
        out.push(v.to_vec());
        Ok(out.len() < limit)
    })?;
    Ok((!over).then_some(out))
}

/// The documents of each query (their limits honoured) from one read transaction; `None` when
/// they come to more than `cap` entries.
pub(super) fn docs_of_many(
    db: &Database,
    table: Table,
    qs: &[&Query],
    cap: Option<usize>,
) -> Result<Option<Vec<Vec<Doc>>>, StoreError> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(redb_table(table)).map_err(backend)?;
    let now = epoch_now();
    let (mut out, mut total) = (Vec::with_capacity(qs.len()), 0usize);
    for q in qs {
        let (limit, mut docs) = (q.limit.unwrap_or(usize::MAX), Vec::new());
        scan_in(&t, q, now, |v| {
            docs.push(Doc::from(v));
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

/// [`Store::visit_ranges`]: the last range read here; once it passes [`RANGES_APART_AFTER`]
/// entries, each range before it on a scoped thread of its own, else here after it.
pub(super) fn visit_ranges(
    db: &Database,
    table: Table,
    qs: &[Query],
    visitors: &mut [Box<Visitor>],
) -> Result<(), StoreError> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(redb_table(table)).map_err(backend)?;
    let now = epoch_now();
    let (Some((last_q, before_qs)), Some((last, before))) = (qs.split_last(), visitors.split_last_mut()) else {
        return Ok(());
    };
    let t = &t;
    let whole = |q: &Query, visit: &mut Box<Visitor>| scan_in(t, q, now, |v| visit(v).map(|()| true));
    std::thread::scope(|s| {
        let (mut waiting, mut helpers, mut n) = (Some(before), Vec::new(), 0usize);
        scan_in(t, last_q, now, |v| {
            n += 1;
            if n == RANGES_APART_AFTER
                && let Some(before) = waiting.take()
            {
                for (q, visit) in before_qs.iter().zip(before) {
                    helpers.push(s.spawn(move || whole(q, visit)));
                }
            }
            last(v).map(|()| true)
        })?;
        if let Some(before) = waiting {
            for (q, visit) in before_qs.iter().zip(before) {
                whole(q, visit)?;
            }
        }
        for h in helpers {
            h.join().map_err(|_| backend("a range's reader panicked"))??;
        }
        Ok(())
    })
}

/// The unexpired entries between `bounds`; `None` when there are more than `cap`.
pub(super) fn count_range(
    db: &Database,
    table: Table,
    (lo, hi): &(Bound<String>, Bound<String>),
    cap: Option<usize>,
) -> Result<Option<usize>, StoreError> {
    let txn = db.begin_read().map_err(backend)?;
    let t = txn.open_table(redb_table(table)).map_err(backend)?;
    let r = t.range::<&str>((lo.as_ref().map(String::as_str), hi.as_ref().map(String::as_str))).map_err(backend)?;
    let now = epoch_now() as f64;
    let mut n = 0usize;
    for e in r {
        let (_, v) = e.map_err(backend)?;
        if ttl_of(v.value()).is_some_and(|t| t <= now) {
            continue;
        }
        n += 1;
        if cap.is_some_and(|c| n > c) {
            return Ok(None);
        }
    }
    Ok(Some(n))
}
