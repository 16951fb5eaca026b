//! Opaque ids: 24 lowercase hex characters, time-ordered. The first 12 are the creation time in
//! milliseconds, so creation order is string order and a date range is a key range.

use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rand::RngCore;

use crate::time::DateRange;

const LOW_MASK: u64 = (1 << 48) - 1;

static LAST: Mutex<(u64, u64)> = Mutex::new((0, 0));

/// A new id for something created now. Ids made in one process are strictly increasing even
/// within one millisecond or if the clock steps back; across processes they order by time.
pub fn new_id() -> String {
    let now = Utc::now().timestamp_millis().max(0) as u64;
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let (ms, low) = if now > last.0 {
        // Leave headroom below 2^48 so increments within this millisecond cannot overflow.
        (now, rand::rng().next_u64() & (LOW_MASK >> 1))
    } else if last.1 < LOW_MASK {
        (last.0, last.1 + 1)
    } else {
        (last.0 + 1, 0)
    };
    *last = (ms, low);
    format!("{ms:012x}{low:012x}")
}

/// An id whose time part is `t` and whose low part is given (used for content-derived ids).
pub fn id_at(t: DateTime<Utc>, low: u64) -> String {
    format!("{:012x}{:012x}", t.timestamp_millis().max(0) as u64, low & LOW_MASK)
}

/// The time part of an id (None for a string that is not one).
pub fn time_of(id: &str) -> Option<DateTime<Utc>> {
    let ms = i64::from_str_radix(id.get(..12).filter(|_| is_id(id))?, 16).ok()?;
    DateTime::from_timestamp_millis(ms)
}

pub fn is_id(s: &str) -> bool {
    s.len() == 24 && is_hex(s)
}

/// Lowercase hex digits only, as ids are written.
pub fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The first and last possible ids: every id, and no other sort key of a partition of ids (the
/// lists' count items sort after them).
pub fn all_ids() -> (String, String) {
    (FIRST_ID.to_owned(), LAST_ID.to_owned())
}

/// The first and the last possible id.
pub const FIRST_ID: &str = "000000000000000000000000";
pub const LAST_ID: &str = "ffffffffffffffffffffffff";

/// The inclusive sort-key range of ids created inside `r`.
pub fn id_range(r: &DateRange) -> (String, String) {
    let lo = r.start.timestamp_millis().max(0) as u64;
    let hi = (r.end.timestamp_millis().max(1) as u64) - 1;
    (format!("{lo:012x}000000000000"), format!("{hi:012x}ffffffffffff"))
}

/// A random secret of `bytes` bytes, hex-encoded.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Which of `shards` partitions `key` falls in (stable across processes and releases: stored
/// keys depend on it).
pub fn shard(key: &str, shards: u32) -> u32 {
    use sha2::Digest;
    let d = sha2::Sha256::digest(key.as_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]]) % shards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_and_increase() {
        let ids: Vec<String> = (0..1000).map(|_| new_id()).collect();
        assert!(ids.iter().all(|i| is_id(i)));
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(is_id(FIRST_ID) && is_id(LAST_ID));
        assert!(ids.iter().all(|i| FIRST_ID < i.as_str() && i.as_str() < LAST_ID));
    }
}
