//! Capacity units a store's calls consumed, as DynamoDB reports them per call, and with
//! transactions as AWS prices them: DynamoDB Local reports 2 units for a whole transaction of 50
//! puts, so its figure leaves out nearly all of a transaction's cost (benchmarks and tests read
//! both).

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::ConsumedCapacity;

use crate::store::{Item, WriteOp};

/// Shared by a store's clones.
#[derive(Clone, Default)]
pub(super) struct Meter(Arc<Mutex<Units>>);

#[derive(Clone, Copy, Default)]
struct Units {
    /// Every call's units as reported.
    reported: f64,
    /// Transactions' units as reported, and as priced.
    transactions_reported: f64,
    transactions_priced: f64,
}

impl Meter {
    fn units(&self) -> std::sync::MutexGuard<'_, Units> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call's reported units.
    pub(super) fn count<'a>(&self, used: impl IntoIterator<Item = &'a ConsumedCapacity>) {
        self.units().reported += reported(used);
    }

    /// A transaction's reported units, and its price: 2 units a KB of every item it writes,
    /// deletes or checks (sizes estimated from the items' JSON; anything but a put counts 1 KB).
    pub(super) fn count_transaction(&self, ops: &[WriteOp], used: &[ConsumedCapacity]) {
        let kb = |item: &Item| serde_json::to_vec(item).map_or(1, |b| b.len().div_ceil(1024).max(1)) as f64;
        let priced: f64 = ops
            .iter()
            .map(|op| match op {
                WriteOp::Put { item, .. } => 2.0 * kb(item),
                _ => 2.0,
            })
            .sum();
        let units = reported(used);
        let mut u = self.units();
        u.reported += units;
        u.transactions_reported += units;
        u.transactions_priced += priced;
    }

    pub(super) fn consumed(&self) -> f64 {
        self.units().reported
    }

    pub(super) fn priced(&self) -> f64 {
        let u = *self.units();
        u.reported - u.transactions_reported + u.transactions_priced
    }
}

fn reported<'a>(used: impl IntoIterator<Item = &'a ConsumedCapacity>) -> f64 {
    used.into_iter().filter_map(|c| c.capacity_units).sum()
}
