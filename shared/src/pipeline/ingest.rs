//! Ingest of a batch of locations: a batch mark, then the locations put-if-absent, then the
//! events processor's pass ([`super::processor`]). Locations are stored before anything is
//! derived from them, so a failure at any step leaves what a re-send or the next pass completes.
//! On the embedded store the mark and fixes commit unsynced and the answer waits until they are
//! durable ([`crate::store::Unsynced`]), usually by the pass's synced commit: one sync a request.
//! See docs/events.md.

use serde_json::{Value, json};

use super::{marks, processor};
use crate::domain::locations::{self, Location};
use crate::error::ApiError;
use crate::project::Project;
use crate::time::Timestamp;

pub struct Outcome {
    pub received: usize,
    pub stored: usize,
    pub rejected: Vec<Value>,
    /// Whether derived work (events, trips, stays) was done before answering.
    pub processed: bool,
    /// Whether webhook messages wait for the delivery worker.
    pub queued: bool,
}

impl Outcome {
    pub fn json(&self, user_id: &str) -> Value {
        json!({
            "user_id": user_id, "received": self.received, "stored": self.stored,
            "duplicates": self.received - self.stored - self.rejected.len(),
            "rejected": self.rejected, "processed": self.processed,
        })
    }
}

/// Store a validated batch for an existing user and process it. `user`: the record as the
/// request's check read it (eventually consistent), which the batch's own pass starts from.
pub async fn ingest(
    store: &dyn crate::store::Store,
    p: &Project,
    user_id: &str,
    user: Option<crate::domain::users::User>,
    batch: Vec<Location>,
) -> Result<Outcome, ApiError> {
    let received = batch.len();
    let limit = locations::latest_acceptable();
    let mut rejected = Vec::new();
    let mut accepted = Vec::with_capacity(batch.len());
    for (i, l) in batch.into_iter().enumerate() {
        if l.recorded_at > limit {
            rejected.push(json!({
                "index": i, "field": format!("locations[{i}].recorded_at"),
                "recorded_at": l.recorded_at.format(None),
                "reason": format!(
                    "more than {} seconds after the server's clock ({}); check the device's clock",
                    locations::FUTURE_TOLERANCE_SECONDS,
                    Timestamp::now().format(None)
                ),
            }));
        } else {
            accepted.push(l);
        }
    }
    if accepted.is_empty() {
        return Err(ApiError::field(
            "locations[0].recorded_at",
            format!(
                "every location is recorded more than {} seconds after the server's clock; nothing was stored",
                locations::FUTURE_TOLERANCE_SECONDS
            ),
        ));
    }
    let prepared = locations::prepare(p, user_id, accepted);
    let pending = marks::mark_batch(store, p, user_id, &prepared).await?;
    let (stored, fixes) = locations::store_unsynced(store, p, user_id, prepared).await?;
    // The pass takes the batch's mark as stored and removes it: no write says "stored" unless the
    // pass could not derive the whole batch (then the mark is rewritten and the pass runs again).
    let own = marks::own_mark(pending.as_ref(), &stored);
    let first = match own {
        Some(ref o) => Some(processor::process_own(store, p, user_id, Some(o), user).await),
        None => None,
    };
    let (mark, outcome) = match first {
        Some(Ok(r)) if r.own_cleared => (crate::store::Unsynced::default(), Ok(r)),
        first => {
            let mark = marks::batch_stored(store, pending, &stored).await?;
            let outcome = match first {
                // Failed: left to the sweep, as below.
                Some(Err(e)) => Err(e),
                Some(Ok(r)) => processor::process_user(store, p, user_id)
                    .await
                    .map(|s| processor::Processed { queued: s.queued || r.queued, ..s }),
                None => processor::process_user(store, p, user_id).await,
            };
            (mark, outcome)
        }
    };
    let (processed, queued) = match outcome {
        Ok(r) => (true, r.queued),
        Err(e) => {
            tracing::warn!(user_id, kind = ?e.kind, error = %e.msg, "locations stored; derived work left to the sweep");
            (false, false)
        }
    };
    // Durable before the answer says stored: the pass's synced commit covered the fixes and the
    // mark, or this syncs them.
    fixes.and(mark).durable().await?;
    Ok(Outcome { received, stored: stored.len(), rejected, processed, queued })
}
