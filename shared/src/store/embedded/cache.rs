//! The embedded store's cache of small reads (queries and point reads), kept in memory until
//! their partition is written; all of its invalidation is [`ReadCache::mark`]. Never stale only
//! because this process is the file's only writer: every write marks its partitions as
//! committing before its group commits (reads begun then keep nothing) and as written at the next
//! position after; an answer is served only while its partition still has the position it had
//! when the read began, and before its earliest item's expiry.
//! See docs/architecture.md, "The embedded store's cache of small reads".

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use foldhash::fast::RandomState;

use crate::store::{Doc, Query, Table};

/// Bytes of documents kept per table at most; past it, all answers are dropped (those in use
/// come back at their next read).
const MAX_BYTES: usize = 8 << 20;
/// Partitions whose last write position is remembered per table; past it, all are forgotten at
/// once and count as written now (answers and reads under way then are retired).
const MAX_WRITTEN: usize = 1 << 16;
/// ReadCache larger than this are not kept: long reads are rarely read again unchanged.
pub(super) const MAX_ANSWER_BYTES: usize = 256 << 10;

struct Answer {
    /// The partition's position when the read began.
    at: u64,
    /// The earliest expiry (epoch seconds) of the answer's items.
    expires: Option<f64>,
    docs: Arc<[Doc]>,
    bytes: usize,
}

/// A point read's answer: the item's document.
struct Point {
    at: u64,
    expires: Option<f64>,
    doc: Doc,
    bytes: usize,
}

#[derive(Default)]
struct Table1 {
    /// Position of the last write of each partition (by hash); absent: `floor`.
    written: HashMap<u64, u64>,
    floor: u64,
    next: u64,
    answers: HashMap<Query, Answer, RandomState>,
    /// By the item's redb key (`pk \0 sk`).
    points: HashMap<String, Point, RandomState>,
    bytes: usize,
}

impl Table1 {
    fn position(&self, part: u64) -> u64 {
        self.written.get(&part).copied().unwrap_or(self.floor)
    }

    /// Whether a read of partition `part` begun at position `at` still holds: no write of the
    /// partition has begun committing since, nor was one committing then.
    fn admits(&self, part: u64, at: u64) -> bool {
        at & COMMITTING == 0 && self.position(part) == at
    }

    /// Room for `bytes` more: when they would pass [`MAX_BYTES`], everything goes.
    fn make_room(&mut self, bytes: usize) {
        if self.bytes + bytes > MAX_BYTES {
            self.answers.clear();
            self.points.clear();
            self.bytes = 0;
        }
    }
}

/// Set in a partition's position while a write of it commits: nothing read then is kept.
const COMMITTING: u64 = 1 << 63;

/// Bytes a kept point costs besides its key and document.
const POINT_OVERHEAD: usize = 96;

/// One map per table (the tables have distinct key spaces).
#[derive(Default)]
pub(super) struct ReadCache {
    tables: [Mutex<Table1>; 2],
    hasher: RandomState,
}

/// What [`ReadCache::get`] found when nothing was kept: the partition's position, for
/// [`ReadCache::offer`].
pub(super) struct Stamp(u64);

impl ReadCache {
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
    pub fn get_each(&self, table: Table, qs: &[Query], now: i64) -> Vec<Result<Vec<Doc>, Stamp>> {
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
    pub fn offer(&self, table: Table, q: &Query, stamp: Stamp, docs: &[Doc]) {
        let bytes = docs.iter().map(|d| d.len() + 24).sum::<usize>() + q.pk.len() + 128;
        if bytes > MAX_ANSWER_BYTES || q.with_expired {
            return;
        }
        let expires = docs.iter().filter_map(|d| super::ttl_of(d)).min_by(f64::total_cmp);
        let part = self.part(&q.pk);
        let mut t = self.table(table);
        if !t.admits(part, stamp.0) {
            return;
        }
        t.make_room(bytes);
        let answer = Answer { at: stamp.0, expires, docs: docs.into(), bytes };
        t.bytes += bytes;
        if let Some(old) = t.answers.insert(q.clone(), answer) {
            t.bytes -= old.bytes;
        }
    }

    /// For each of the items of partition `pk` at sort keys `sks`, its document kept at `now`
    /// (epoch seconds), or the stamp to offer it with once read ([`ReadCache::offer_point`]).
    pub fn get_points(&self, table: Table, pk: &str, sks: &[impl AsRef<str>], now: i64) -> Vec<Result<Doc, Stamp>> {
        let part = self.part(pk);
        // One key buffer for all: the partition, then each sort key in turn.
        let mut key = String::with_capacity(pk.len() + 1 + sks.first().map_or(0, |s| s.as_ref().len()));
        key.push_str(pk);
        key.push_str(super::SEP);
        let prefix = key.len();
        let t = self.table(table);
        let at = t.position(part);
        let mut answer = |sk: &str| {
            key.truncate(prefix);
            key.push_str(sk);
            match t.points.get(key.as_str()) {
                Some(p) if p.at == at && p.expires.is_none_or(|e| (now as f64) < e) => Ok(p.doc.clone()),
                _ => Err(Stamp(at)),
            }
        };
        sks.iter().map(|sk| answer(sk.as_ref())).collect()
    }

    /// What the point read of `pk`/`sk` begun at `stamp` found (an item: an absent one is not
    /// kept), under [`ReadCache::offer`]'s rules.
    pub fn offer_point(&self, table: Table, pk: &str, sk: &str, stamp: Stamp, doc: &Doc) {
        let bytes = pk.len() + 1 + sk.len() + doc.len() + POINT_OVERHEAD;
        if bytes > MAX_ANSWER_BYTES {
            return;
        }
        let expires = super::ttl_of(doc);
        let part = self.part(pk);
        let mut t = self.table(table);
        if !t.admits(part, stamp.0) {
            return;
        }
        t.make_room(bytes);
        t.bytes += bytes;
        let point = Point { at: stamp.0, expires, doc: doc.clone(), bytes };
        if let Some(old) = t.points.insert(super::key(pk, sk), point) {
            t.bytes -= old.bytes;
        }
    }

    /// The partitions of these redb keys (`pk \0 sk`) are about to be written (`committing`:
    /// their group commits next) or were just written (the group's outcome is known).
    pub fn mark<'a>(&self, table: Table, keys: impl IntoIterator<Item = &'a str>, committing: bool) {
        let mut t = self.table(table);
        t.next += 1;
        let at = t.next | if committing { COMMITTING } else { 0 };
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
            // Not committing: every partition would stay so until written again.
            t.floor = at & !COMMITTING;
            t.answers.clear();
            t.points.clear();
            t.bytes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SkRange;

    impl ReadCache {
        fn get(&self, table: Table, q: &Query, now: i64) -> Result<Vec<Doc>, Stamp> {
            self.get_each(table, std::slice::from_ref(q), now).pop().expect("one answer")
        }
    }

    fn q(pk: &str) -> Query {
        Query::new(pk, SkRange::All).limit(10)
    }

    fn docs(s: &str) -> Vec<Doc> {
        vec![Doc::from(s.as_bytes())]
    }

    fn doc(b: &[u8]) -> Doc {
        Doc::from(b)
    }

    #[test]
    fn an_answer_is_kept_until_a_write_of_its_partition() {
        let a = ReadCache::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("p"), stamp, &docs("v1"));
        assert_eq!(a.get(Table::Main, &q("p"), 0).ok(), Some(docs("v1")));
        // Another query of the partition, another partition, the other table: not this answer.
        assert!(a.get(Table::Main, &Query::new("p", SkRange::All), 0).is_err());
        a.mark(Table::Main, ["q\0x"], false);
        a.mark(Table::Locations, ["p\0x"], false);
        assert_eq!(a.get(Table::Main, &q("p"), 0).ok(), Some(docs("v1")));
        a.mark(Table::Main, ["q\0y", "p\0x"], false);
        assert!(a.get(Table::Main, &q("p"), 0).is_err());
    }

    #[test]
    fn a_read_overtaken_by_a_write_keeps_nothing() {
        let a = ReadCache::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        // A write commits while the read is under way: what the read found may be the old value.
        a.mark(Table::Main, ["p\0k"], false);
        a.offer(Table::Main, &q("p"), stamp, &docs("old"));
        assert!(a.get(Table::Main, &q("p"), 0).is_err());
    }

    #[test]
    fn nothing_read_while_a_write_of_the_partition_commits_is_kept() {
        let a = ReadCache::default();
        a.mark(Table::Main, ["p\0k"], true);
        // Begun before the commit or after it: either value, so neither is kept.
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("p"), stamp, &docs("either"));
        assert!(a.get(Table::Main, &q("p"), 0).is_err());
        let Err(stamp) = a.get_points(Table::Main, "p", &["k"], 0).pop().unwrap() else { panic!("nothing kept yet") };
        a.offer_point(Table::Main, "p", "k", stamp, &doc(b"either"));
        assert!(a.get_points(Table::Main, "p", &["k"], 0)[0].is_err());
        // Another partition is kept meanwhile.
        let Err(stamp) = a.get(Table::Main, &q("o"), 0) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("o"), stamp, &docs("other"));
        assert_eq!(a.get(Table::Main, &q("o"), 0).ok(), Some(docs("other")));
        // Once the commit's outcome is known, what is read is kept again.
        a.mark(Table::Main, ["p\0k"], false);
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("p"), stamp, &docs("new"));
        assert_eq!(a.get(Table::Main, &q("p"), 0).ok(), Some(docs("new")));
    }

    #[test]
    fn an_answer_expires_with_its_earliest_item() {
        let a = ReadCache::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 100) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("p"), stamp, &[doc(br#"{"expires_at":150}"#), doc(br#"{"expires_at":160}"#)]);
        assert!(a.get(Table::Main, &q("p"), 149).is_ok());
        assert!(a.get(Table::Main, &q("p"), 150).is_err());
    }

    #[test]
    fn forgetting_every_partition_retires_reads_under_way() {
        let a = ReadCache::default();
        let Err(stamp) = a.get(Table::Main, &q("p"), 0) else { panic!("nothing kept yet") };
        let keys: Vec<String> = (0..=MAX_WRITTEN).map(|n| format!("w{n}\0x")).collect();
        a.mark(Table::Main, keys.iter().map(String::as_str), false);
        a.offer(Table::Main, &q("p"), stamp, &docs("old"));
        assert!(a.get(Table::Main, &q("p"), 0).is_err());
        assert!(a.table(Table::Main).written.is_empty());
    }

    #[test]
    fn a_point_is_kept_until_a_write_of_its_partition_or_its_expiry() {
        let a = ReadCache::default();
        let get = |sks: &[&str], now| a.get_points(Table::Main, "p", sks, now);
        let [Err(s1), Err(s2)] = <[_; 2]>::try_from(get(&["a", "b"], 0)).ok().unwrap() else {
            panic!("nothing kept yet")
        };
        a.offer_point(Table::Main, "p", "a", s1, &doc(b"1"));
        a.offer_point(Table::Main, "p", "b", s2, &doc(br#"{"expires_at":150}"#));
        let found = get(&["a", "b", "c"], 149);
        assert_eq!(found[0].as_deref().ok(), Some(&b"1"[..]));
        assert_eq!(found[1].as_deref().ok(), Some(&br#"{"expires_at":150}"#[..]));
        assert!(found[2].is_err(), "a key never offered");
        assert!(get(&["b"], 150)[0].is_err(), "expired");
        // Another partition's key with the same sort key, the other table: not these.
        assert!(a.get_points(Table::Main, "q", &["a"], 0)[0].is_err());
        assert!(a.get_points(Table::Locations, "p", &["a"], 0)[0].is_err());
        // A partition written since the read began keeps nothing; one written after retires it.
        let Err(stamp) = a.get_points(Table::Main, "r", &["x"], 0).pop().unwrap() else { panic!("nothing kept") };
        a.mark(Table::Main, ["r\0y"], false);
        a.offer_point(Table::Main, "r", "x", stamp, &doc(b"old"));
        assert!(a.get_points(Table::Main, "r", &["x"], 0)[0].is_err());
        a.mark(Table::Main, ["p\0z"], false);
        assert!(get(&["a"], 0)[0].is_err());
    }

    #[test]
    fn points_count_against_the_bound() {
        let a = ReadCache::default();
        let big = doc(&vec![b'x'; 1 << 16]);
        for n in 0..(2 * MAX_BYTES / big.len()) {
            let sk = n.to_string();
            if let Err(stamp) = a.get_points(Table::Main, "p", &[&sk], 0).pop().unwrap() {
                a.offer_point(Table::Main, "p", &sk, stamp, &big);
            }
        }
        let t = a.table(Table::Main);
        assert!(t.bytes <= MAX_BYTES && !t.points.is_empty());
        let held = t.points.iter().map(|(k, p)| k.len() + p.doc.len() + POINT_OVERHEAD).sum::<usize>();
        assert_eq!(t.bytes, held);
    }

    #[test]
    fn answers_are_bounded() {
        let a = ReadCache::default();
        let big = vec![doc(&vec![b'x'; MAX_ANSWER_BYTES / 2])];
        for n in 0..(2 * MAX_BYTES / (MAX_ANSWER_BYTES / 2)) {
            let query = q(&format!("p{n}"));
            if let Err(stamp) = a.get(Table::Main, &query, 0) {
                a.offer(Table::Main, &query, stamp, &big);
            }
        }
        assert!(a.table(Table::Main).bytes <= MAX_BYTES);
        let huge = vec![doc(&vec![b'x'; MAX_ANSWER_BYTES + 1])];
        let Err(stamp) = a.get(Table::Main, &q("h"), 0) else { panic!("nothing kept yet") };
        a.offer(Table::Main, &q("h"), stamp, &huge);
        assert!(a.get(Table::Main, &q("h"), 0).is_err());
    }
}
