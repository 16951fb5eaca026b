//! The JSON an answer shows for a stored record, kept from one request to the next and looked up
//! by the record's exact bytes: a warm list spent about a third of its CPU decoding its stored
//! records and writing them out again (users, geofences, locations, geofence events), the same
//! records on every request.
//!
//! Never stale, on either store and without being told of writes: what is kept is a function of
//! the bytes read (and of what else the caller names as `context`, such as a time zone), and a
//! hit compares them whole, or is carried by the stored document it was rendered from, whose
//! bytes never change ([`lookup_carried`]). A changed record has other bytes, so it is a miss,
//! rendered afresh.

use std::any::Any;
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use foldhash::fast::RandomState;
use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::store::{Doc, StoreError, from_json};

/// Memos the records are spread over by hash, each behind a lock of its own: with one, the two
/// worker threads met on it (contended in 2.2 % of a warm users list's samples).
const SHARDS: usize = 16;
/// Bytes kept in each of a shard's two generations (records, their JSON, and what an entry costs
/// besides): 8 MiB a generation in all. When the newer is full it becomes the older and the older
/// is dropped: records read again meanwhile move to the newer, so a long history read once does
/// not push out the lists read on every request. An entry dropped here lives on while a kept
/// stored document carries it (bounded with the store's answers, `store::embedded::answers`).
const GENERATION_BYTES: usize = (8 << 20) / SHARDS;
/// An entry's own cost besides its bytes: the map's slot, the `Arc` and three allocations.
const ENTRY_OVERHEAD: usize = 160;

struct Entry {
    view: &'static str,
    context: String,
    doc: Box<[u8]>,
    json: Box<RawValue>,
    /// What else the record gives that its readers need again ([`Missing::keep_with`]), and the
    /// bytes it holds.
    with: Option<(Box<dyn Any + Send + Sync>, usize)>,
}

impl Entry {
    fn size(&self) -> usize {
        let with = self.with.as_ref().map_or(0, |(_, bytes)| *bytes);
        self.doc.len() + self.json.get().len() + self.context.len() + with + ENTRY_OVERHEAD
    }
}

/// A rendered record, written into an answer as it is.
#[derive(Clone)]
pub struct Json(Arc<Entry>);

impl Json {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.json.get()
    }

    /// What was kept beside the JSON ([`Missing::keep_with`]), if it is a `T`.
    pub fn with<T: Any>(&self) -> Option<&T> {
        self.0.with.as_ref().and_then(|(w, _)| w.downcast_ref())
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.json.serialize(s)
    }
}

impl std::fmt::Debug for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.json.get())
    }
}

#[derive(Default)]
struct Generation {
    // Keyed by a hash already: foldhash rather than the default SipHash over it.
    entries: HashMap<u64, Arc<Entry>, RandomState>,
    bytes: usize,
}

impl Generation {
    fn insert(&mut self, hash: u64, entry: Arc<Entry>) {
        self.bytes += entry.size();
        // A hash shared by two records keeps the later one (the other renders at its next read).
        if let Some(old) = self.entries.insert(hash, entry) {
            self.bytes -= old.size();
        }
    }
}

#[derive(Default)]
struct Memo {
    newer: Generation,
    older: Generation,
}

impl Memo {
    /// The entry at `hash` if it is `same`; one found in the older generation moves to the newer.
    fn get(&mut self, hash: u64, same: impl Fn(&Entry) -> bool) -> Option<Arc<Entry>> {
        if let Some(e) = self.newer.entries.get(&hash).filter(|e| same(e)) {
            return Some(e.clone());
        }
        let e = self.older.entries.get(&hash).filter(|e| same(e)).cloned()?;
        self.keep(hash, e.clone());
        Some(e)
    }

    fn keep(&mut self, hash: u64, entry: Arc<Entry>) {
        if self.newer.bytes + entry.size() > GENERATION_BYTES {
            self.older = std::mem::take(&mut self.newer);
        }
        self.newer.insert(hash, entry);
    }
}

static MEMO: LazyLock<(RandomState, [Mutex<Memo>; SHARDS])> = LazyLock::new(Default::default);

/// The shard of the record at `hash`.
fn shard(hash: u64) -> &'static Mutex<Memo> {
    &MEMO.1[(hash % SHARDS as u64) as usize]
}

/// The JSON that `render` makes of the record stored as `doc` (decoded as `T`), for `view` (a
/// name for the shape) in `context` (what else the shape depends on, such as a time zone; empty
/// when nothing): kept from an earlier call with the same three when there was one, else
/// rendered now and kept. `render` writes the record's view with
/// [`serde_json::value::to_raw_value`] (a view borrows from its record, so it cannot be returned).
pub fn json_of<'d, T: DeserializeOwned>(
    view: &'static str,
    context: &str,
    doc: &'d Doc,
    render: impl FnOnce(&T) -> serde_json::Result<Box<RawValue>>,
) -> Result<Cow<'d, Json>, StoreError> {
    match lookup_doc(view, context, doc) {
        Ok(json) => Ok(json),
        // Rendered outside the lock: other requests' lookups do not wait for it.
        Err(missing) => {
            let json = render(&from_json(doc)?).map_err(|e| missing.failed(e))?;
            Ok(Cow::Owned(missing.keep(json)))
        }
    }
}

/// A record with nothing kept for it yet ([`lookup`]): render it, then [`Missing::keep`] what
/// depends only on the record and the context, or [`Missing::once`] what depends on more.
pub struct Missing {
    hash: u64,
    entry: Entry,
    /// The stored documents looked up ([`lookup_carried`]), to carry what is kept: the first
    /// and the others (boxed: a miss is returned by value).
    carry: Option<Box<(Doc, Vec<Doc>)>>,
}

/// What a stored document carries ([`lookup_carried`]): the view made of it and of the other
/// documents it was made with (none for a view of one record), known by identity.
struct Carried {
    rest: Vec<Doc>,
    json: Json,
}

/// `a == b`, without `memcmp` for empty strings: an empty string's pointer is dangling, and
/// glibc's AVX-512 `memcmp` reads it with every byte masked off, which costs a fault suppressed
/// by microcode (a quarter of a made-afresh users list's CPU went to comparing empty contexts).
fn same_str(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// [`lookup`] of one stored document ([`lookup_carried`] with no others).
pub fn lookup_doc<'d>(view: &'static str, context: &str, doc: &'d Doc) -> Result<Cow<'d, Json>, Missing> {
    lookup_carried(view, context, doc, &[])
}

/// [`lookup`] of a view of the stored records `first` and `rest` (a trip and its events; a view
/// of one record has no others): first what `first` carries from an earlier reader that had
/// these very documents ([`Doc::derived`]: a kept answer's documents are handed out again as they
/// are), found without joining, hashing or comparing their bytes and lent rather than counted once
/// more (the two worker threads counting the same entries' references met on them). Otherwise by
/// their bytes (several records [`joined`]); what is found or kept then, `first` carries from now
/// on.
pub fn lookup_carried<'d>(
    view: &'static str,
    context: &str,
    first: &'d Doc,
    rest: &[Doc],
) -> Result<Cow<'d, Json>, Missing> {
    let carried = first.derived::<Carried>().filter(|c| {
        same_str(c.json.0.view, view)
            && same_str(&c.json.0.context, context)
            && c.rest.len() == rest.len()
            && c.rest.iter().zip(rest).all(|(a, b)| a.same(b))
    });
    if let Some(c) = carried {
        return Ok(Cow::Borrowed(&c.json));
    }
    let found = if rest.is_empty() {
        lookup(view, context, first)
    } else {
        lookup(view, context, &joined(std::iter::once(first).chain(rest).map(|d| &d[..])))
    };
    match found {
        Ok(json) => {
            first.derive(Carried { rest: rest.to_vec(), json: json.clone() });
            Ok(Cow::Owned(json))
        }
        Err(missing) => Err(Missing { carry: Some(Box::new((first.clone(), rest.to_vec()))), ..missing }),
    }
}

/// The JSON kept for the record `doc` in `view` and `context`, or what keeps it once rendered.
/// For a view of several stored records, `doc` is their [`joined`] bytes.
fn lookup(view: &'static str, context: &str, doc: &[u8]) -> Result<Json, Missing> {
    let hash = MEMO.0.hash_one((view, context, doc));
    let same = |e: &Entry| same_str(e.view, view) && same_str(&e.context, context) && *e.doc == *doc;
    let kept = shard(hash).lock().unwrap_or_else(PoisonError::into_inner).get(hash, same);
    kept.map(Json).ok_or_else(|| {
        let (json, with) = (RawValue::NULL.to_owned(), None);
        let entry = Entry { view, context: context.to_owned(), doc: doc.into(), json, with };
        Missing { hash, entry, carry: None }
    })
}

impl Missing {
    /// Keep `json` as what the record renders to from now on.
    pub fn keep(self, json: Box<RawValue>) -> Json {
        let entry = Arc::new(Entry { json, ..self.entry });
        shard(self.hash).lock().unwrap_or_else(PoisonError::into_inner).keep(self.hash, entry.clone());
        let json = Json(entry);
        if let Some(docs) = self.carry {
            let (first, rest) = *docs;
            first.derive(Carried { rest, json: json.clone() });
        }
        json
    }

    /// `json`, and beside it `with` (`bytes` of heap): what else readers of the record need again
    /// (say the fields a search measures), decoded once with the JSON rather than on each read.
    pub fn keep_with<T: Any + Send + Sync>(mut self, json: Box<RawValue>, with: T, bytes: usize) -> Json {
        self.entry.with = Some((Box::new(with), bytes));
        self.keep(json)
    }

    /// `json` for this answer only: it depends on more than the record (the time, other records).
    pub fn once(self, json: Box<RawValue>) -> Json {
        Json(Arc::new(Entry { json, doc: Box::default(), ..self.entry }))
    }

    /// The error of a view that could not be written.
    pub fn failed(&self, e: serde_json::Error) -> StoreError {
        StoreError::Corrupt(format!("rendering {}: {e}", self.entry.view))
    }
}

/// Several stored records as one key for [`lookup`]: each one's length, then its bytes (so no two
/// lists of records give the same key).
fn joined<'a>(docs: impl IntoIterator<Item = &'a [u8]> + Clone) -> Vec<u8> {
    // Sized first: grown as it was written, a trip's key was copied a few times over.
    let mut key = Vec::with_capacity(docs.clone().into_iter().map(|d| d.len() + 8).sum());
    for d in docs {
        key.extend_from_slice(&(d.len() as u64).to_le_bytes());
        key.extend_from_slice(d);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::to_raw_value;
    use std::cell::Cell;

    fn upper(s: &str, calls: &Cell<usize>) -> serde_json::Result<Box<RawValue>> {
        calls.set(calls.get() + 1);
        to_raw_value(&s.to_uppercase())
    }

    /// [`json_of`] of `bytes` read afresh (a document carrying nothing yet), upper-cased.
    fn upper_of(view: &'static str, context: &str, bytes: &[u8], calls: &Cell<usize>) -> Json {
        json_of(view, context, &Doc::from(bytes), |s: &String| upper(s, calls)).unwrap().into_owned()
    }

    #[test]
    fn a_record_is_rendered_once_and_a_changed_one_again() {
        let calls = Cell::new(0);
        let a = upper_of("test-upper", "", br#""abc""#, &calls);
        let b = upper_of("test-upper", "", br#""abc""#, &calls);
        assert_eq!((format!("{a:?}"), format!("{b:?}"), calls.get()), (r#""ABC""#.into(), r#""ABC""#.into(), 1));
        // Other bytes, another view or another context: rendered for what they are.
        let c = upper_of("test-upper", "", br#""abd""#, &calls);
        let d = upper_of("test-other", "", br#""abc""#, &calls);
        let e = upper_of("test-upper", "+02:00", br#""abc""#, &calls);
        assert_eq!(format!("{c:?}"), r#""ABD""#);
        assert_eq!((format!("{d:?}"), format!("{e:?}")), (r#""ABC""#.into(), r#""ABC""#.into()));
        assert_eq!(calls.get(), 4);
        // Written into an answer as it is.
        assert_eq!(serde_json::to_string(&[a, c]).unwrap(), r#"["ABC","ABD"]"#);
    }

    #[test]
    fn a_stored_document_carries_its_json_for_its_view_and_context_only() {
        let calls = Cell::new(0);
        let doc = Doc::from(&br#""carried""#[..]);
        let a = json_of("test-carry", "", &doc, |s: &String| upper(s, &calls)).unwrap();
        let carried = doc.derived::<Carried>().expect("the document carries what it rendered to");
        assert!(Arc::ptr_eq(&a.0, &carried.json.0));
        // The same document in another view or context: rendered for those, not taken from it.
        let b = json_of("test-other", "", &doc, |s: &String| to_raw_value(&s.len())).unwrap();
        let c = json_of("test-carry", "+02:00", &doc, |s: &String| to_raw_value(&format!("{s}!"))).unwrap();
        assert_eq!((format!("{b:?}"), format!("{c:?}")), ("7".into(), r#""carried!""#.into()));
        let again = json_of("test-carry", "", &doc, |s: &String| upper(s, &calls)).unwrap();
        assert_eq!((format!("{again:?}"), calls.get()), (r#""CARRIED""#.into(), 1));
        // Equal bytes read again find it by their bytes, and carry it from then on.
        let read_again = Doc::from(&br#""carried""#[..]);
        assert!(Arc::ptr_eq(&json_of("test-carry", "", &read_again, |s: &String| upper(s, &calls)).unwrap().0, &a.0));
        assert!(read_again.derived::<Carried>().is_some() && calls.get() == 1);
    }

    #[test]
    fn a_record_that_does_not_decode_keeps_nothing() {
        let calls = Cell::new(0);
        assert!(json_of("test-fail", "", &Doc::from(&b"not json"[..]), |s: &String| upper(s, &calls)).is_err());
        assert!(json_of("test-fail", "", &Doc::from(&b"not json"[..]), |s: &String| upper(s, &calls)).is_err());
        assert_eq!(calls.get(), 0);
    }

    #[test]
    fn what_is_rendered_once_is_not_kept_and_joined_records_keep_apart() {
        let key = joined([&b"ab"[..], b"c"]);
        assert_ne!(key, joined([&b"a"[..], b"bc"]), "lengths keep the records apart");
        let Err(missing) = lookup("test-once", "", &key) else { panic!("nothing kept yet") };
        let once = missing.once(to_raw_value(&1).unwrap());
        assert_eq!(format!("{once:?}"), "1");
        // Not kept: the next lookup misses, and what it keeps is found after.
        let Err(missing) = lookup("test-once", "", &key) else { panic!("a view for one answer was kept") };
        missing.keep(to_raw_value(&2).unwrap());
        assert!(matches!(lookup("test-once", "", &key), Ok(j) if format!("{j:?}") == "2"));
        assert!(lookup("test-once", "", &joined([&b"a"[..], b"bc"])).is_err());
    }

    #[test]
    fn a_view_of_several_records_is_carried_by_the_first_for_those_very_documents() {
        let trip = Doc::from(&br#"{"trip":1}"#[..]);
        let events = vec![Doc::from(&b"[1]"[..]), Doc::from(&b"[2]"[..])];
        let Err(missing) = lookup_carried("test-joined", "", &trip, &events) else { panic!("nothing kept yet") };
        let kept = missing.keep(to_raw_value(&"made").unwrap());
        let carried = trip.derived::<Carried>().expect("the first document carries it");
        assert!(Arc::ptr_eq(&carried.json.0, &kept.0));
        let Ok(again) = lookup_carried("test-joined", "", &trip, &events) else { panic!("carried") };
        assert!(Arc::ptr_eq(&again.0, &kept.0));
        // The same bytes read again (other documents): found by their bytes, and carried by them.
        let (trip2, events2) = (Doc::from(&trip[..]), events.iter().map(|e| Doc::from(&e[..])).collect::<Vec<_>>());
        let Ok(by_bytes) = lookup_carried("test-joined", "", &trip2, &events2) else { panic!("kept by bytes") };
        assert!(Arc::ptr_eq(&by_bytes.0, &kept.0) && trip2.derived::<Carried>().is_some());
        // The first document with other events, fewer events, another context: not what it carries.
        let changed = vec![events[0].clone(), Doc::from(&b"[3]"[..])];
        assert!(lookup_carried("test-joined", "", &trip, &changed).is_err());
        assert!(lookup_carried("test-joined", "", &trip, &events[..1]).is_err());
        assert!(lookup_carried("test-joined", "https://x", &trip, &events).is_err());
        // A view for one answer only (a trip's ETA): not carried.
        let fresh = Doc::from(&br#"{"trip":2}"#[..]);
        let Err(missing) = lookup_carried("test-joined", "", &fresh, &events) else { panic!("nothing kept yet") };
        missing.once(to_raw_value(&"eta").unwrap());
        assert!(fresh.derived::<Carried>().is_none());
    }

    #[test]
    fn what_is_kept_beside_the_json_is_found_with_it() {
        let Err(missing) = lookup("test-with", "", b"[1,2]") else { panic!("nothing kept yet") };
        let kept = missing.keep_with(to_raw_value(&3).unwrap(), vec![1u8, 2], 2);
        assert_eq!(kept.with::<Vec<u8>>(), Some(&vec![1, 2]));
        let Ok(found) = lookup("test-with", "", b"[1,2]") else { panic!("kept") };
        assert_eq!((found.get(), found.with::<Vec<u8>>()), ("3", Some(&vec![1, 2])));
        assert!(found.with::<String>().is_none(), "only as the type it was kept as");
        let plain =
            json_of("test-upper", "", &Doc::from(&br#""x""#[..]), |s: &String| to_raw_value(s)).unwrap().into_owned();
        assert!(plain.with::<Vec<u8>>().is_none());
    }

    #[test]
    fn records_read_again_outlive_a_generation_of_others() {
        let entry = |n: usize| {
            let doc = format!("{n:0>1000}").into_bytes().into_boxed_slice();
            Arc::new(Entry { view: "t", context: String::new(), doc, json: to_raw_value(&n).unwrap(), with: None })
        };
        let mut m = Memo::default();
        m.keep(0, entry(0));
        let per = entry(0).size();
        // Two generations' worth of records read once; record 0 read again once the first
        // generation has become the older (and moved back to the newer).
        let n = 2 * GENERATION_BYTES / per;
        let zero = |e: &Entry| *e.doc == *entry(0).doc;
        for i in 1..=n {
            if i == 3 * n / 4 {
                assert!(m.older.entries.contains_key(&0), "the first generation is the older");
                assert!(m.get(0, zero).is_some(), "record 0 kept through the first generation");
            }
            m.keep(i as u64, entry(i));
        }
        assert!(m.get(0, zero).is_some(), "record 0, read again, outlived two generations of others");
        assert!(!m.newer.entries.contains_key(&1) && !m.older.entries.contains_key(&1));
        assert!(m.newer.bytes <= GENERATION_BYTES && m.older.bytes <= GENERATION_BYTES);
        assert_eq!(m.newer.bytes, m.newer.entries.values().map(|e| e.size()).sum::<usize>());
    }
}
