//! Bringing a project's index up to date: fences stored before the coarse (precision 5) copies
//! existed, or before copies had class keys, get them, one fence per transaction; when every
//! fence has its coarse copies the project gets its marker, and wide searches read coarse cells.
//!
//! Safe to run beside live traffic: each fence is rewritten on the condition that its version is
//! the one read (a concurrent update or delete wins, and the fence is read again), and a fence is
//! never out of the index (its old copies go in the transaction that writes the new ones).
//! Resumable: a run skips fences already indexed, so a run cut short is simply run again. Fences
//! created or changed meanwhile by this version are indexed fully already; a process of an older
//! version writing fine copies only after the marker would not be seen, so run it once every
//! process serves this version.

use serde::Serialize;

use super::{Geofence, MAX_CELLS, coarse_indexed_from_start, copy_keys, fences_pk, rewrite_ops};
use crate::error::ApiError;
use crate::store::{Cond, MAX_TRANSACT_OPS, Query, SkRange, Store, StoreError, Table, from_item};

/// What a run did.
#[derive(Debug, Default, Serialize)]
pub struct Reindexed {
    /// Live fences seen.
    pub fences: usize,
    /// Fences whose copies were rewritten.
    pub rewritten: usize,
    /// Fences whose shape needs more cells than one transaction holds (a polygon made when 98
    /// fine cells were allowed): left as they are; the project stays unmarked until they are
    /// made smaller or deleted and created again.
    pub too_large: Vec<String>,
    /// The project now has its coarse-cells marker.
    pub marked: bool,
}

enum Outcome {
    Current,
    Rewritten,
    TooLarge(String),
}

/// Reindex every live fence of the project, then mark it when none was left out.
pub async fn reindex(store: &dyn Store, project_id: &str) -> Result<Reindexed, ApiError> {
    let mut out = Reindexed::default();
    let mut after = None;
    loop {
        let q = Query::new(fences_pk(project_id), SkRange::All).limit(100).after(after.take());
        let page = store.query(Table::Main, &q).await?;
        for item in page.items {
            let g: Geofence = from_item(item)?;
            out.fences += 1;
            match reindex_one(store, g).await? {
                Outcome::Current => {}
                Outcome::Rewritten => out.rewritten += 1,
                Outcome::TooLarge(id) => out.too_large.push(id),
            }
        }
        match page.last_sk {
            Some(sk) => after = Some(sk),
            None => break,
        }
    }
    if out.too_large.is_empty() {
        store.transact(vec![coarse_indexed_from_start(project_id)?]).await?;
        out.marked = true;
    }
    Ok(out)
}

async fn reindex_one(store: &dyn Store, mut g: Geofence) -> Result<Outcome, ApiError> {
    for _ in 0..20 {
        let cells = match g.shape().cells("coordinates") {
            Ok(c) if c.len() <= MAX_CELLS => c,
            _ => return Ok(Outcome::TooLarge(g.id)),
        };
        if g.keyed && g.cells == cells {
            return Ok(Outcome::Current);
        }
        let (before, expected, was_keyed, had_cells) = (copy_keys(&g), g.version, g.keyed, g.cells == cells);
        // The version moves, so an update that read the fence before this write retries on the
        // new copies' keys instead of deleting the old ones only.
        (g.cells, g.keyed, g.version) = (cells, true, expected + 1);
        let mut ops = rewrite_ops(&g, &before, Cond::Equals("version", expected.into()))?;
        if ops.len() > MAX_TRANSACT_OPS && !was_keyed {
            if had_cells {
                return Ok(Outcome::Current); // all its copies, under the bare id: as good as it gets
            }
            // Moving every copy to its class key does not fit: they stay under the bare id.
            g.keyed = false;
            ops = rewrite_ops(&g, &before, Cond::Equals("version", expected.into()))?;
        }
        if ops.len() > MAX_TRANSACT_OPS {
            return Ok(Outcome::TooLarge(g.id));
        }
        match store.transact(ops).await {
            Ok(()) => return Ok(Outcome::Rewritten),
            Err(StoreError::ConditionFailed) => {
                // Changed or deleted meanwhile: read it again.
                match store.get(Table::Main, &fences_pk(&g.project_id), &g.id).await? {
                    Some(item) => g = from_item(item)?,
                    None => return Ok(Outcome::Current),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("geofence_id: the geofence is being changed by other requests; retry"))
}
