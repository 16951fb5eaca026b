//! Ingest of a batch of locations: store them, then derive what they cause through the events
//! processor (see [`super::processor`]).
//!
//! Order of writes, and what a failure at each point leaves:
//! 1. a batch mark (nothing stored yet: the client gets an error and re-sends);
//! 2. the locations, put-if-absent (a re-send stores only what is missing);
//! 3. the processor's pass over everything past the user's watermark. If it fails, the batch is
//!    still stored and the answer says so (`processed: false`); the derived work completes on the
//!    user's next ingest or the next sweep (AWS: the stream-fed processor function).
//!
//! On the embedded store the mark and the locations are committed without a file sync, and the
//! answer waits until they are durable ([`crate::store::Unsynced`]): the pass's synced commit
//! makes them so (redb makes every earlier commit durable with a synced one), so a request syncs
//! once. A crash before that loses only fixes no client was told were stored; the derived state
//! never names a lost fix, since it commits after them.
//!
//! Fixes recorded more than [`locations::FUTURE_TOLERANCE_SECONDS`] after the server's clock are
//! refused (listed in `rejected`), so no absurd timestamp can pin derived state.

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

/// Store a validated batch for an existing user and process it.
pub async fn ingest(
    store: &dyn crate::store::Store,
    p: &Project,
    user_id: &str,
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
    let mark = marks::batch_stored(store, pending, &stored).await?;
    let (processed, queued) = match processor::process_user(store, p, user_id).await {
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
