//! Answers of small queries kept in memory until their partition is written: a warm list reads
//! the same few partitions on every request (a page of users and the list's counts, a page of
//! trips' events, a search's index cells), each a read transaction and a B-tree walk (about a
//! fifth of such a list's CPU once its records' JSON is kept, see `crate::rendered`).
//!
//! Point reads are kept the same way, as the query of their one key: every request's key check,
//! the markers lists read on every page, the records a page of trips names.
//!
//! Never stale: this process is the file's only writer (redb locks it against others), and
//! every write, once its group has committed and before it returns, marks the partitions it wrote
//! as written at the next position of a counter ([`Answers::forget`]). An answer is kept with the
//! position its partition had when the read began, and served only while the partition still has
//! it: a read overtaken by a write keeps nothing useful (its position is old), and a write after
//! an answer was kept retires it. Positions are kept per partition hash (two partitions sharing
//! one only retire each other's answers more often). Items that expire do so at a known time:
//! an answer is served only before its earliest item's expiry.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use foldhash::fast::RandomState;

use crate::store::{Query, Table};

/// Bytes of documents kept per table at most; past it, all answers are dropped (those in use
/// come back at their next read).
const MAX_BYTES: usize = 8 << 20;
/// Partitions whose last write position is remembered per table; past it, all are forgotten at
/// once and count as written now (answers and reads under way then are retired).
const MAX_WRITTEN: usize = 1 << 16;
/// Answers larger than this are not kept: long reads are rarely read again unchanged.
pub(super) const MAX_ANSWER_BYTES: usize = 256 << 10;

struct Answer {
    /// The partition's position when the read began.
    at: u64,
    /// The earliest expiry (epoch seconds) of the answer's items.
    expires: Option<f64>,
    docs: Arc<[Vec<u8>]>,
    bytes: usize,
}

#[derive(Default)]
struct Table1 {
    /// Position of the last write of each partition (by hash); absent: `floor`.
    written: HashMap<u64, u64>,
    floor: u64,
    next: u64,
    answers: HashMap<Query, Answer, RandomState>,
    bytes: usize,
}

impl Table1 {
    fn position(&self, part: u64) -> u64 {
        self.written.get(&part).copied().unwrap_or(self.floor)
    }
}

/// One map per table (the tables have distinct key spaces).
#[derive(Default)]
pub(super) struct Answers {
    tables: [Mutex<Table1>; 2],
    hasher: RandomState,
}

/// What [`Answers::get`] found when nothing was kept: the partition's position, for
/// [`Answers::offer`].
pub(super) struct Stamp(u64);

impl Answers {
    fn table(&self, table: Table) -> MutexGuard<'_, Table1> {
        let i = match table {
            Table::Main => 0,
            Table::Locations => 1,
        };
        self.tables[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn part(&self, pk: &str) -> u64 {
        self.hasher.hash_one(pk)
    }

    /// For each query, the documents kept for it at `now` (epoch seconds), or the stamp to offer
    /// them with once read; under one taking of the table's lock (a page of trips asks for a few
    /// dozen).
    pub fn get_each(&self, table: Table, qs: &[Query], now: i64) -> Vec<Result<Vec<Vec<u8>>, Stamp>> {
        let parts: Vec<u64> = qs.iter().map(|q| self.part(&q.pk)).collect();
        let t = self.table(table);
        let answer = |(q, part): (&Query, u64)| {
            let at = t.position(part);
            match t.answers.get(q) {
                Some(a) if a.at == at && a.expires.is_none_or(|e| (now as f64) < e) => Ok(a.docs.to_vec()),
                _ => Err(Stamp(at)),
            }
        };
        qs.iter().zip(parts).map(answer).collect()
    }

    /// What the read of `q` begun at `stamp` found: kept unless a write of its partition came
    /// since, or it is larger than [`MAX_ANSWER_BYTES`]; until its earliest item's expiry.
    pub fn offer(&self, table: Table, q: &Query, stamp: Stamp, docs: &[Vec<u8>]) {
        let bytes = docs.iter().map(|d| d.len() + 24).sum::<usize>() + q.pk.len() + 128;
        if bytes > MAX_ANSWER_BYTES || q.with_expired {
            return;
        }
        let expires = docs.iter().filter_map(|d| super::ttl_of(d)).min_by(f64::total_cmp);
        let part = self.part(&q.pk);
        let mut t = self.table(table);
        if t.position(part) != stamp.0 {
            return;
        }
        if t.bytes + bytes > MAX_BYTES {
            t.answers.clear();
            t.bytes = 0;
        }
        let answer = Answer { at: stamp.0, expires, docs: docs.into(), bytes };
        t.bytes += bytes;
        if let Some(old) = t.answers.insert(q.clone(), answer) {
            t.bytes -= old.bytes;
        }
    }

    /// The partitions of these redb keys (`pk \0 sk`) were just written.
    pub fn forget<'a>(&self, table: Table, keys: impl IntoIterator<Item = &'a str>) {
        let mut t = self.table(table);
        t.next += 1;
        let at = t.next;
        let mut last = None;
        for k in keys {
            let pk = k.split_once(super::SEP).map_or(k, |(pk, _)| pk);
            // Writes come grouped by partition (a batch of one user's fixes): hash each once.
            if last == Some(pk) {
                continue;
            }
            last = Some(pk);
            let part = self.part(pk);
            t.written.insert(part, at);
        }
        if t.written.len() > MAX_WRITTEN {
            // Every partition counts as written now: what was read before is retired.
            t.written.clear();
            t.floor = at;
            t.answers.clear();
            t.bytes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SkRange;

    impl Answers {
        fn get(&self, table: Table, q: &Query, now: i64) -> Result<Vec<Vec<u8>>, Stamp> {
            self.get_each(table, std::slice::from_ref(q), now).pop().expect("one answer")
        }
    }

    fn q(pk: &str) -> Query {
        Query::new(pk, SkRange::All).limit(10)
    }

    fn docs(s: &str) -> Vec<Vec<u8>> {
        vec![s.as_bytes().to_vec()]
    }

    #[test]
    fn an_answer_is_kept_until_a_write_of_its_partition() {
        let a = Answers::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("p"), stamp, &docs("v1"));
        assert_eq!(a.get(Table::Main, &q("p"), 0).ok(), Some(docs("v1")));
        // Another query of the partition, another partition, the other table: not this answer.
        assert!(a.get(Table::Main, &Query::new("p", SkRange::All), 0).is_err());
        a.forget(Table::Main, ["q\0x"]);
        a.forget(Table::Locations, ["p\0x"]);
        assert_eq!(a.get(Table::Main, &q("p"), 0).ok(), Some(docs("v1")));
        a.forget(Table::Main, ["q\0y", "p\0x"]);
        assert!(a.get(Table::Main, &q("p"), 0).is_err());
    }

    #[test]
    fn a_read_overtaken_by_a_write_keeps_nothing() {
        let a = Answers::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        // A write commits while the read is under way: what the read found may be the old value.
        a.forget(Table::Main, ["p\0k"]);
        a.offer(Table::Main, &q("p"), stamp, &docs("old"));
        assert!(a.get(Table::Main, &q("p"), 0).is_err());
    }

    #[test]
    fn an_answer_expires_with_its_earliest_item() {
        let a = Answers::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 100) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("p"), stamp, &[br#"{"expires_at":150}"#.to_vec(), br#"{"expires_at":160}"#.to_vec()]);
        assert!(a.get(Table::Main, &q("p"), 149).is_ok());
        assert!(a.get(Table::Main, &q("p"), 150).is_err());
    }

    #[test]
    fn forgetting_every_partition_retires_reads_under_way() {
        let a = Answers::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        let keys: Vec<String> = (0..=MAX_WRITTEN).map(|n| format!("w{n}\0x")).collect();
        a.forget(Table::Main, keys.iter().map(String::as_str));
        a.offer(Table::Main, &q("p"), stamp, &docs("old"));
        assert!(a.get(Table::Main, &q("p"), 0).is_err());
        assert!(a.table(Table::Main).written.is_empty());
    }

    #[test]
    fn answers_are_bounded() {
        let a = Answers::default();
        let big = vec![vec![b'x'; MAX_ANSWER_BYTES / 2]];
        for n in 0..(2 * MAX_BYTES / (MAX_ANSWER_BYTES / 2)) {
            let query = q(&format!("p{n}"));
            if let Err(stamp) = a.get(Table::Main, &query, 0) {
                a.offer(Table::Main, &query, stamp, &big);
            }
        }
        assert!(a.table(Table::Main).bytes <= MAX_BYTES);
        let huge = vec![vec![b'x'; MAX_ANSWER_BYTES + 1]];
        let Err(stamp) = a.get(Table::Main, &q("h"), 0) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("h"), stamp, &huge);
        assert!(a.get(Table::Main, &q("h"), 0).is_err());
    }
}
