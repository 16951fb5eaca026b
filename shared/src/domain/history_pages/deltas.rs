//! Writers' own count items: how writers of a list count without writing a shared item.
//!
//! A bucket used to be one item every writer read and rewrote (conditional on its nonce) twice a
//! write: to register and to add its count. Different users' processing passes add to the same
//! lists (the project's event list, a fence's, a webhook endpoint's log), so at city density
//! their passes collided on it, retried, and after [`TRIES`] failed ("condition failed"). Now a
//! writer writes only items of its own, `~<bucket>+<writer>` (a *delta*): put when it registers
//! (pending), rewritten when it finishes with what it stored. No read, no condition another
//! writer can break. A bucket's count is its base item (`~<bucket>`) plus its finished deltas;
//! a *fold* moves finished deltas into the base (one transaction: the base conditional on its
//! nonce, the deltas deleted), done by writers now and then and by readers that find many, best
//! effort: a fold that loses a race is simply not done.

use super::*;

/// A writer folds each bucket it finished in with this odds (1 in N): deltas stay few without a
/// read per write.
const FOLD_ONE_IN: u32 = 8;

tokio::task_local! {
    /// Within [`with_fold_odds`]: the odds in place of [`FOLD_ONE_IN`] (0: never).
    static FOLD_ODDS: u32;
}

/// Runs `f` with writers folding 1 in `one_in` of the buckets they finish (0: never, 1: always),
/// in place of 1 in [`FOLD_ONE_IN`] at random: what the capacity tests count is then not left to
/// chance (a fold is a query and a transaction: 3 units more, in any phase, 1 time in 8).
pub async fn with_fold_odds<F: std::future::Future>(one_in: u32, f: F) -> F::Output {
    FOLD_ODDS.scope(one_in, f).await
}
/// A reader folds a bucket holding at least this many finished deltas.
pub(super) const READ_FOLD_AT: usize = 16;

/// A writer's count item in one bucket.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Delta {
    /// When the writer registered (epoch ms).
    pub(super) at: i64,
    /// Finished: `n` and `exp` say what it stored, when `valid`.
    #[serde(default)]
    pub(super) done: bool,
    /// Whether `n` is exact: false when the writer does not know what it stored, when its
    /// partition was not counted yet, or for a deleter (the bucket is recounted).
    #[serde(default)]
    pub(super) valid: bool,
    #[serde(default)]
    pub(super) n: Cells,
    #[serde(default)]
    pub(super) exp: BTreeMap<String, i64>,
    #[serde(default, skip_serializing)]
    pub(super) sk: String,
}

impl Delta {
    /// A writer still storing (registered less than [`DEAD_AFTER_MS`] ago).
    pub(super) fn live(&self, now_ms: i64) -> bool {
        !self.done && now_ms - self.at < DEAD_AFTER_MS
    }
}

pub(super) fn delta_sk(bucket: &str, writer: &str) -> String {
    format!("~{bucket}+{writer}")
}

/// The sort-key range of the items (base and deltas) of buckets `first..=last`.
pub(super) fn buckets_range(first: &str, last: &str) -> SkRange {
    SkRange::Between(bucket_sk(first), format!("~{last}~"))
}

/// One bucket's stored items.
#[derive(Debug, Default)]
pub(super) struct Group {
    pub(super) bucket: String,
    pub(super) base: Option<Bucket>,
    pub(super) deltas: Vec<Delta>,
    /// Deltas the base lists as folded that are still stored (their deletes did not happen
    /// yet): not counted, deleted again by the next fold.
    pub(super) stale: Vec<String>,
}

impl Group {
    /// Its exact counts and TTLs, or `None` when they are not known (a writer storing or dead,
    /// a deleter, an invalid base): the bucket is then counted from its entries.
    pub(super) fn exact(&self) -> Option<(Cells, BTreeMap<String, i64>)> {
        let (mut n, mut exp) = match &self.base {
            Some(b) if !b.valid => return None,
            Some(b) => (b.n.clone(), b.exp.clone()),
            None => Default::default(),
        };
        for d in &self.deltas {
            if !d.done || !d.valid {
                return None;
            }
            n.merge(&d.n);
            merge_exp(&mut exp, &d.exp);
        }
        Some((n, exp))
    }

    /// Whether a writer is storing.
    pub(super) fn live(&self, now_ms: i64) -> bool {
        self.deltas.iter().any(|d| d.live(now_ms))
    }

    /// What a recount's write-back must find unchanged: the base's nonce and each delta's state.
    pub(super) fn fingerprint(&self) -> (Option<String>, Vec<(String, bool)>) {
        (self.base.as_ref().map(|b| b.nonce.clone()), self.deltas.iter().map(|d| (d.sk.clone(), d.done)).collect())
    }

    /// The condition a write of a new base takes: the base as read.
    pub(super) fn base_cond(&self) -> Cond {
        match &self.base {
            Some(b) => Cond::Equals("nonce", b.nonce.clone().into()),
            None => Cond::NotExists,
        }
    }
}

fn merge_exp(into: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>) {
    for (cell, e) in from {
        let cur = into.entry(cell.clone()).or_insert(*e);
        *cur = (*cur).min(*e);
    }
}

/// Bucket items (stored documents, in key order) grouped by bucket.
pub(super) fn groups(docs: &[Doc]) -> Result<Vec<Group>, StoreError> {
    let mut out: Vec<Group> = Vec::new();
    for doc in docs {
        let sk: &str = &from_json::<Counted>(doc)?.sk;
        let Some(bucket) = sk.get(1..1 + BUCKET_HEX) else { continue };
        if out.last().is_none_or(|g| g.bucket != bucket) {
            out.push(Group { bucket: bucket.to_owned(), ..Group::default() });
        }
        let g = out.last_mut().expect("pushed");
        if sk.len() == 1 + BUCKET_HEX {
            g.base = Some(from_json(doc)?);
        } else if g.base.as_ref().is_some_and(|b| b.folded.iter().any(|f| f == sk)) {
            // The base sorts first (`~<bucket>` before `~<bucket>+…`): its list is known here.
            g.stale.push(sk.to_owned());
        } else {
            g.deltas.push(from_json(doc)?);
        }
    }
    Ok(out)
}

/// One bucket's items.
pub(super) async fn read_group(store: &dyn Store, table: Table, pk: &str, bucket: &str) -> Result<Group, StoreError> {
    let docs = store.query_docs(table, &Query::new(pk, buckets_range(bucket, bucket))).await?;
    Ok(groups(&docs)?.pop().unwrap_or_else(|| Group { bucket: bucket.to_owned(), ..Group::default() }))
}

/// Register writer `id` in its buckets: a pending delta in each. A deleter (`adds` false)
/// registers only in buckets that hold an item, checked in the same transaction (a partition
/// being erased must not get items back).
pub(super) async fn register(
    store: &dyn Store,
    table: Table,
    writers: &[Writer],
    adds: bool,
) -> Result<(), StoreError> {
    let pending_item =
        |w: &Writer, b: &str| to_item(&w.pk, &delta_sk(b, &w.id), &Delta { at: w.at, ..Delta::default() });
    let pending = |w: &Writer, b: &str| pending_item(w, b).map(|item| WriteOp::Put { table, item, cond: Cond::None });
    if adds {
        // Items of its own under a fresh writer id: put-if-absent stores them all, and needs no
        // transaction (on DynamoDB one write unit an item where a transaction takes two).
        let items: Vec<Item> =
            writers.iter().flat_map(|w| w.buckets.iter().map(move |b| pending_item(w, b))).collect::<Result<_, _>>()?;
        if !items.is_empty() {
            store.put_new_unsynced(table, items).await.map(drop)?;
        }
        return Ok(());
    }
    for w in writers {
        for b in &w.buckets {
            for _ in 0..TRIES {
                let g = read_group(store, table, &w.pk, b).await?;
                let held = g.base.as_ref().map(|_| bucket_sk(b)).or_else(|| g.deltas.first().map(|d| d.sk.clone()));
                let Some(held) = held else { break };
                let check = WriteOp::Check { table, pk: w.pk.clone(), sk: held, cond: Cond::Exists };
                match store.transact_unsynced(vec![check, pending(w, b)?]).await.map(drop) {
                    Ok(()) => break,
                    // A fold removed the delta checked: read again.
                    Err(StoreError::ConditionFailed) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(())
}

/// Rewrite the writers' deltas as finished, with what each stored (`stored`, per partition, or
/// `None` when unknown), then fold now and then.
pub(super) async fn finish(
    store: &dyn Store,
    writers: &[Writer],
    stored: Option<&NewByPartition>,
) -> Result<(), StoreError> {
    let mut ops = Vec::new();
    for w in writers {
        for b in &w.buckets {
            let mut d = Delta { at: w.at, done: true, valid: stored.is_some() && w.counted, ..Delta::default() };
            for (fix, exp) in stored.and_then(|s| s.get(&w.pk)).into_iter().flatten().filter(|(f, _)| split(f).0 == b) {
                let cell = split(fix).1;
                // Not a cell (ids are hex): counted when the bucket is recounted, which says so.
                if !d.n.add(cell) {
                    d.valid = false;
                }
                if let Some(e) = *exp {
                    merge_exp(&mut d.exp, &BTreeMap::from([(cell.to_owned(), e)]));
                }
            }
            ops.push((w.table, to_item(&w.pk, &delta_sk(b, &w.id), &d)?));
        }
    }
    // Each delta on its own (no transaction: on DynamoDB one write unit a delta, not two), all at
    // once (the embedded store commits them together). Exists: a delta gone was counted by a
    // recount that took its writer for dead, and stays gone.
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(ops)
        .map(|(table, item)| async move {
            match store.put_unsynced(table, item, Cond::Exists).await.map(drop) {
                Ok(()) | Err(StoreError::ConditionFailed) => Ok(()),
                Err(e) => Err(e),
            }
        })
        .buffer_unordered(crate::store::MAX_TRANSACT_OPS)
        .try_collect::<()>()
        .await?;
    if stored.is_some() {
        // The buckets chosen, read in one call and folded in one transaction (a pass with events
        // at a dozen fences folded them one by one: two round trips each, one after another).
        let chosen: Vec<(&Writer, &String)> = writers
            .iter()
            .flat_map(|w| w.buckets.iter().map(move |b| (w, b)))
            .filter(|_| {
                let odds = FOLD_ODDS.try_with(|o| *o).unwrap_or(FOLD_ONE_IN);
                odds != 0 && rand::random_range(0..odds) == 0
            })
            .collect();
        if chosen.is_empty() {
            return Ok(());
        }
        let qs: Vec<Query> = chosen.iter().map(|(w, b)| Query::new(&w.pk, buckets_range(b, b))).collect();
        // Writers of one call share their table.
        let table = chosen[0].0.table;
        let mut folds = Vec::new();
        for (docs, (w, b)) in store.query_docs_many(table, &qs).await?.into_iter().zip(&chosen) {
            let g = groups(&docs)?.pop().unwrap_or_else(|| Group { bucket: (*b).clone(), ..Group::default() });
            folds.extend(fold_of(table, &w.pk, &g)?);
        }
        futures::stream::iter(folds)
            .map(|f| run_fold(store, f))
            .buffer_unordered(crate::store::MAX_TRANSACT_OPS)
            .try_collect::<()>()
            .await?;
    }
    Ok(())
}

/// Most deltas one fold takes: the base lists them until the next fold, so they bound its size.
const FOLD_AT_MOST: usize = 16;

/// A fold's writes: the new base (conditional on the base as read), then the deletes of the
/// deltas it lists as folded.
struct Fold {
    table: Table,
    base: Item,
    cond: Cond,
    pk: String,
    deletes: Vec<String>,
}

/// Write the base, then delete its folded deltas, best effort: a fold that loses a race to
/// another write of the base does nothing, and a delete not done is done by the next fold (the
/// base lists the delta, so no reader counts it twice meanwhile).
async fn run_fold(store: &dyn Store, f: Fold) -> Result<(), StoreError> {
    match store.put_unsynced(f.table, f.base, f.cond).await.map(drop) {
        Ok(()) => {}
        Err(StoreError::ConditionFailed) => return Ok(()),
        Err(e) => return Err(e),
    }
    let deletes = f.deletes.iter().map(|sk| store.delete_unsynced(f.table, &f.pk, sk, Cond::None));
    for done in futures::future::join_all(deletes).await {
        if let Err(e) = done {
            tracing::debug!(error = %e, "a folded delta left for the next fold");
        }
    }
    Ok(())
}

/// Move a bucket's finished deltas into its base, best effort (see [`run_fold`]).
pub(super) async fn fold(store: &dyn Store, table: Table, pk: &str, g: &Group) -> Result<(), StoreError> {
    match fold_of(table, pk, g)? {
        Some(f) => run_fold(store, f).await,
        None => Ok(()),
    }
}

/// The fold of `g`: its finished deltas merged into its base, which lists them (and the stale
/// ones still there) as folded; none when there is nothing to fold.
fn fold_of(table: Table, pk: &str, g: &Group) -> Result<Option<Fold>, StoreError> {
    if g.base.as_ref().is_some_and(|b| !b.valid) {
        return Ok(None);
    }
    let folded: Vec<&Delta> = g.deltas.iter().filter(|d| d.done && d.valid).take(FOLD_AT_MOST).collect();
    if folded.is_empty() {
        return Ok(None);
    }
    let mut base = g.base.clone().unwrap_or(Bucket { valid: true, ..Bucket::default() });
    for d in &folded {
        base.n.merge(&d.n);
        merge_exp(&mut base.exp, &d.exp);
    }
    base.nonce = crate::ids::random_hex(8);
    // What the base listed and is gone now is forgotten; what is still there is deleted again.
    base.folded = g.stale.iter().cloned().chain(folded.iter().map(|d| d.sk.clone())).collect();
    let base_item = to_item(pk, &bucket_sk(&g.bucket), &base)?;
    Ok(Some(Fold { table, base: base_item, cond: g.base_cond(), pk: pk.to_owned(), deletes: base.folded }))
}
