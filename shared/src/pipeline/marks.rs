//! Batch marks: a note per batch, written before its fixes and removed by the pass that derives
//! them, so a sweep finds every user with work left (see `processor` for how passes use them),
//! and the keys of a user's derivation bookkeeping (marks, watermark) that erasure removes too.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::locations::{Location, locations_pk};
use crate::error::ApiError;
use crate::ids::id_at;
use crate::project::Project;
use crate::store::{Cond, SkRange, Store, StoreError, Table, Unsynced, to_item};
use crate::time::Timestamp;

/// Shards of the batch marks.
pub const SHARDS: u32 = 16;
/// A batch marked as being stored for longer than this (seconds) was abandoned by its request.
pub const ABANDONED_SECONDS: i64 = crate::time::REQUEST_LIFETIME_SECONDS;

/// A batch stored (or being stored) whose derived work may not be done yet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchMark {
    pub project_id: String,
    pub account_id: String,
    pub user_id: String,
    /// Oldest fix of the batch (of its fixes new to the log, once known).
    pub since: Timestamp,
    /// Newest fix of the batch, likewise.
    pub until: Timestamp,
    /// Changed on every write, so a pass removes only the marks it saw.
    pub nonce: String,
    /// Whether the whole batch is in the log.
    pub stored: bool,
    /// When the mark was written; a mark not `stored` after [`ABANDONED_SECONDS`] is abandoned.
    pub marked_at: Timestamp,
    /// How many distinct fixes the batch has, so a restart can tell a batch wholly in the log
    /// from one its dead request left in part.
    pub fixes: usize,
    /// The request that stored the batch (`x-request-id`), for a pass that derives it outside
    /// that request (the stream-fed processor on AWS, the sweep) to carry into what it causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl BatchMark {
    /// Whether a pass must stop before this batch's oldest fix: it may still be being stored.
    fn blocks(&self, now: Timestamp) -> bool {
        !self.stored && (now.0 - self.marked_at.0).num_seconds() < ABANDONED_SECONDS
    }

    /// [`Self::blocks`], except for a batch marked before this process became the only writer of
    /// the store (`waymark serve` after a crash): its request died with the process before, so
    /// no more of it comes but by the client's re-send. Wholly in the log, it is derived at once
    /// rather than after the hold. Stored in part (DynamoDB writes a batch in several calls), it
    /// still waits for the re-send or the hold: derived now, the re-sent rest would come late
    /// and fire no geofence events. Whole means as many fixes in the batch's time range as it
    /// has; another batch's fixes in that range could make a part look whole (phones send their
    /// fixes in consecutive batches; then the batch is derived as stored, as after the hold).
    pub(crate) async fn holds(&self, store: &dyn Store, now: Timestamp) -> Result<bool, StoreError> {
        if !self.blocks(now) {
            return Ok(false);
        }
        let Some(owner) = store.sole_writer_since() else { return Ok(true) };
        if self.marked_at >= owner {
            return Ok(true);
        }
        let range = SkRange::Between(id_at(self.since.0, 0), id_at(self.until.0, u64::MAX));
        let pk = locations_pk(&self.project_id, &self.user_id);
        Ok(store.count(Table::Locations, &pk, &range).await? < self.fixes)
    }
}

/// Key of a user's watermark (public for tests that stand for data older than the processor).
pub fn watermark_pk(pid: &str, uid: &str) -> String {
    crate::domain::sequence::pk(pid, uid)
}
pub(crate) fn shard_of(pid: &str, uid: &str) -> u32 {
    crate::ids::shard(&format!("{pid}#{uid}"), SHARDS)
}
pub(crate) fn marks_pk(shard: u32) -> String {
    format!("PENDING#{shard:02}")
}

/// A batch's mark, kept by ingest between storing the batch and saying it is stored.
pub struct PendingBatch {
    pk: String,
    sk: String,
    mark: BatchMark,
    /// Whether no mark of the same batch was there before (else an earlier attempt at it may
    /// have stored fixes and died: its range must stay).
    fresh: bool,
}

/// A stored batch's mark as its own request's pass takes it: stored, over its new fixes, though
/// the store still says `stored: false` (see `processor::process_own`).
#[derive(Debug, Clone)]
pub struct OwnMark {
    sk: String,
    nonce: String,
    pub(crate) since: Timestamp,
    pub(crate) until: Timestamp,
}

impl OwnMark {
    /// Whether the mark read at `sk` is this one (not rewritten since by a re-send).
    pub(crate) fn is(&self, sk: &str, b: &BatchMark) -> bool {
        sk == self.sk && b.nonce == self.nonce
    }
}

/// The mark its request's pass may take as stored: a fresh one, over fixes new to the log (else
/// [`batch_stored`] removes or rewrites it, as before).
pub fn own_mark(pending: Option<&PendingBatch>, new: &[Location]) -> Option<OwnMark> {
    let p = pending.filter(|p| p.fresh)?;
    let since = new.iter().map(|l| l.recorded_at).min()?;
    let until = new.iter().map(|l| l.recorded_at).max()?;
    Some(OwnMark { sk: p.sk.clone(), nonce: p.mark.nonce.clone(), since, until })
}

/// Record that a batch for the user is on its way into the log (before storing it).
pub async fn mark_batch(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    batch: &[Location],
) -> Result<Option<PendingBatch>, ApiError> {
    write_mark(store, p, user_id, batch, false, Timestamp::now()).await
}

/// Record that the whole batch is in the log (after storing it; `new` are its fixes that were
/// not there before), so passes may go past it. A re-sent batch late fixes of which were all
/// stored and processed before would otherwise make the pass recompute ended trips for nothing.
/// Returns the mark's pending sync, which ingest waits for (with its fixes') before it answers.
pub async fn batch_stored(
    store: &dyn Store,
    pending: Option<PendingBatch>,
    new: &[Location],
) -> Result<Unsynced, ApiError> {
    let Some(PendingBatch { pk, sk, mut mark, fresh }) = pending else { return Ok(Unsynced::default()) };
    if fresh {
        let (Some(since), Some(until)) =
            (new.iter().map(|l| l.recorded_at).min(), new.iter().map(|l| l.recorded_at).max())
        else {
            // Nothing new, and no earlier attempt left work: the pass has nothing to redo.
            let cond = Cond::Equals("nonce", mark.nonce.clone().into());
            return match store.delete(Table::Main, &pk, &sk, cond).await {
                Ok(()) | Err(StoreError::ConditionFailed) => Ok(Unsynced::default()),
                Err(e) => Err(e.into()),
            };
        };
        (mark.since, mark.until) = (since, until);
    }
    mark.stored = true;
    mark.nonce = crate::ids::random_hex(8);
    // Unsynced (embedded store): the pass that follows usually commits synced and makes it
    // durable, else ingest syncs it before it answers. Lost in a crash before that, the mark
    // says `stored: false` again: no answer was sent, so the client re-sends the batch, which
    // stores nothing twice and marks it again.
    Ok(store.put_unsynced(Table::Main, to_item(&pk, &sk, &mark)?, Cond::None).await?)
}

/// A mark as written at `marked_at` (tests use a past time to stand for an abandoned request).
pub async fn write_mark(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    batch: &[Location],
    stored: bool,
    marked_at: Timestamp,
) -> Result<Option<PendingBatch>, ApiError> {
    let (Some(since), Some(until)) =
        (batch.iter().map(|l| l.recorded_at).min(), batch.iter().map(|l| l.recorded_at).max())
    else {
        return Ok(None);
    };
    let mut h = Sha256::new();
    for l in batch {
        h.update(l.id.as_bytes());
    }
    let key = hex::encode(&h.finalize()[..8]);
    let mark = BatchMark {
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        user_id: user_id.to_owned(),
        since,
        until,
        nonce: crate::ids::random_hex(8),
        stored,
        marked_at,
        fixes: batch.len(),
        request_id: crate::request_id::current(),
    };
    let (pk, sk) = (marks_pk(shard_of(&p.project_id, user_id)), format!("{}#{user_id}#{key}", p.project_id));
    let item = to_item(&pk, &sk, &mark)?;
    // Unsynced (embedded store): the batch's fixes follow, and ingest makes them durable before
    // it answers, this mark with them (a sync covers every earlier commit); a mark lost in a
    // crash before that marked fixes that were lost too.
    let fresh = match store.put_unsynced(Table::Main, item.clone(), Cond::NotExists).await {
        Ok(_covered_later) => true,
        Err(StoreError::ConditionFailed) => {
            let _covered_later = store.put_unsynced(Table::Main, item, Cond::None).await?;
            false
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Some(PendingBatch { pk, sk, mark, fresh }))
}
