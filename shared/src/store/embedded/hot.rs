//! Items read on nearly every request and seldom written, kept in memory: a key's item, which
//! every request's key check read (a fifth to a third of a cheap read's CPU: a read transaction,
//! a table opened, a B-tree walked). See [`Store::get_doc_hot`](crate::store::Store::get_doc_hot).
//!
//! Never stale, because this process is the file's only writer (redb locks it against other
//! processes): every write drops the keys it wrote from here once its group has committed and
//! before it returns; and a read that began before such a write cannot put back what it read,
//! because it marks the key before reading and keeps what it read only if its mark is still
//! there (a write in between removed it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::store::Table;

/// Entries kept per table at most; past it, all are dropped (those in use come back at their
/// next read). A project has at most a few hundred keys.
const MAX_ENTRIES: usize = 4096;

enum Slot {
    /// A read is under way (its ticket): it may hold the document once read.
    Reading(u64),
    Held(Vec<u8>),
}

/// One map per table (the tables have distinct key spaces).
#[derive(Default)]
pub(super) struct Hot {
    slots: [Mutex<HashMap<String, Slot>>; 2],
    tickets: AtomicU64,
}

/// What [`Hot::get_or_mark`] found.
pub(super) enum Found {
    Held(Vec<u8>),
    /// Not held: read it, then [`Hot::offer`] it with this ticket.
    Read(u64),
}

impl Hot {
    fn table(&self, table: Table) -> MutexGuard<'_, HashMap<String, Slot>> {
        let i = match table {
            Table::Main => 0,
            Table::Locations => 1,
        };
        self.slots[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The document held for `key`, or a ticket to read it (the key marked as being read).
    pub fn get_or_mark(&self, table: Table, key: &str) -> Found {
        let mut slots = self.table(table);
        if let Some(Slot::Held(doc)) = slots.get(key) {
            return Found::Held(doc.clone());
        }
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        if slots.len() >= MAX_ENTRIES && !slots.contains_key(key) {
            slots.clear();
        }
        // Over another read's mark too: that read then keeps nothing, which is only a miss.
        slots.insert(key.to_owned(), Slot::Reading(ticket));
        Found::Read(ticket)
    }

    /// What the read of `ticket` found: held if no write of the key came between (an absent item
    /// is not held: unknown keys are what a guessing client sends).
    pub fn offer(&self, table: Table, key: &str, ticket: u64, doc: Option<&[u8]>) {
        let mut slots = self.table(table);
        if matches!(slots.get(key), Some(Slot::Reading(t)) if *t == ticket) {
            match doc {
                Some(d) => slots.insert(key.to_owned(), Slot::Held(d.to_vec())),
                None => slots.remove(key),
            };
        }
    }

    /// Drop `keys` of `table`: they were just written.
    pub fn forget<'a>(&self, table: Table, keys: impl IntoIterator<Item = &'a str>) {
        let mut slots = self.table(table);
        if slots.is_empty() {
            return;
        }
        for k in keys {
            slots.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_overtaken_by_a_write_keeps_nothing() {
        let hot = Hot::default();
        let Found::Read(t) = hot.get_or_mark(Table::Main, "k") else { panic!("nothing held yet") };
        // A write commits while the read is under way: what the read found may be the old value.
        hot.forget(Table::Main, ["k"]);
        hot.offer(Table::Main, "k", t, Some(b"old"));
        assert!(matches!(hot.get_or_mark(Table::Main, "k"), Found::Read(_)));
    }

    #[test]
    fn a_read_keeps_what_it_found_until_a_write_of_the_key() {
        let hot = Hot::default();
        let Found::Read(t) = hot.get_or_mark(Table::Main, "k") else { panic!("nothing held yet") };
        hot.offer(Table::Main, "k", t, Some(b"v1"));
        assert!(matches!(hot.get_or_mark(Table::Main, "k"), Found::Held(d) if d == b"v1"));
        // Other keys and the other table leave it held.
        hot.forget(Table::Main, ["j"]);
        hot.forget(Table::Locations, ["k"]);
        assert!(matches!(hot.get_or_mark(Table::Main, "k"), Found::Held(_)));
        hot.forget(Table::Main, ["k"]);
        assert!(matches!(hot.get_or_mark(Table::Main, "k"), Found::Read(_)));
    }

    #[test]
    fn of_two_reads_at_once_the_later_keeps_and_an_absent_item_is_not_held() {
        let hot = Hot::default();
        let Found::Read(first) = hot.get_or_mark(Table::Main, "k") else { panic!("nothing held yet") };
        let Found::Read(second) = hot.get_or_mark(Table::Main, "k") else { panic!("nothing held yet") };
        hot.offer(Table::Main, "k", first, Some(b"a"));
        hot.offer(Table::Main, "k", second, Some(b"b"));
        assert!(matches!(hot.get_or_mark(Table::Main, "k"), Found::Held(d) if d == b"b"));
        let Found::Read(t) = hot.get_or_mark(Table::Main, "unknown") else { panic!("nothing held yet") };
        hot.offer(Table::Main, "unknown", t, None);
        assert!(!hot.table(Table::Main).contains_key("unknown"));
    }

    #[test]
    fn the_map_is_bounded() {
        let hot = Hot::default();
        for i in 0..MAX_ENTRIES + 10 {
            let k = format!("k{i}");
            if let Found::Read(t) = hot.get_or_mark(Table::Main, &k) {
                hot.offer(Table::Main, &k, t, Some(b"x"));
            }
        }
        assert!(hot.table(Table::Main).len() <= MAX_ENTRIES);
    }
}
