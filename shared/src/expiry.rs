//! Retention as arithmetic: when an item recorded at a time expires with a project's
//! `retention_days`, and the attribute that says so (DynamoDB TTL is enabled on it in both
//! tables; reads skip items past it). The setting is read in `domain::settings`; the sweep that
//! deletes what TTL does not is in `pipeline::retention`.

use serde_json::{Map, Value, json};

use crate::time::Timestamp;

/// The numeric attribute (epoch seconds) after which an item is expired.
pub const TTL_ATTRIBUTE: &str = "expires_at";

/// Put the TTL attribute on an item recorded at `at`, when the project keeps things `days`.
pub fn stamp(item: &mut Map<String, Value>, at: Timestamp, days: Option<u32>) {
    if let Some(d) = days {
        item.insert(TTL_ATTRIBUTE.into(), json!(at.0.timestamp() + i64::from(d) * 86_400));
    }
}

/// The TTL of a copy keyed by a time-ordered id (webhook messages, trip events' user index):
/// the id's time plus the retention.
pub fn expiry_of(id: &str, days: Option<u32>) -> Option<i64> {
    Some(crate::ids::time_of(id)?.timestamp() + i64::from(days?) * 86_400)
}

/// The oldest time kept now with `days` of retention: what was recorded before it has expired.
pub fn cutoff(days: u32, now: Timestamp) -> Timestamp {
    Timestamp(now.0 - chrono::Duration::days(i64::from(days)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_adds_the_expiry_only_with_retention() {
        let at = Timestamp(chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap());
        let mut item = Map::new();
        stamp(&mut item, at, None);
        assert!(item.get(TTL_ATTRIBUTE).is_none());
        stamp(&mut item, at, Some(2));
        assert_eq!(item[TTL_ATTRIBUTE], json!(1_700_000_000 + 2 * 86_400));
    }
}
