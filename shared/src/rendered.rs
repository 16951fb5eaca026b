//! The JSON an answer shows for a stored document, kept from one request to the next and looked
//! up by the document's exact bytes: a warm list spent about a third of its CPU decoding its
//! stored records and writing them out again (users, geofences, search), the same records on
//! every request.
//!
//! Never stale, on either store and without being told of writes: what is kept is a function of
//! the bytes read (and of what else the caller names in `view`, such as a time zone), and a hit
//! compares them whole. A changed document has other bytes, so it is a miss, rendered afresh.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::store::StoreError;

/// Bytes kept at most (documents and their JSON); past it, all are dropped and the next requests
/// render again. A list page holds ten documents of about a kilobyte.
const MAX_BYTES: usize = 16 << 20;

struct Entry {
    view: &'static str,
    context: String,
    doc: Box<[u8]>,
    json: Box<RawValue>,
}

/// A rendered document, written into an answer as it is.
#[derive(Clone)]
pub struct Json(Arc<Entry>);

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
struct Memo {
    entries: HashMap<u64, Arc<Entry>>,
    bytes: usize,
}

static MEMO: LazyLock<(RandomState, Mutex<Memo>)> = LazyLock::new(Default::default);

/// The JSON that `render` makes of `doc` for `view` (a name for the shape) in `context` (what
/// else the shape depends on, such as a time zone; empty when nothing): kept from an earlier
/// call with the same three when there was one, else rendered now and kept.
pub fn json_of(
    view: &'static str,
    context: &str,
    doc: &[u8],
    render: impl FnOnce(&[u8]) -> Result<String, StoreError>,
) -> Result<Json, StoreError> {
    let (hasher, memo) = &*MEMO;
    let hash = hasher.hash_one((view, context, doc));
    let lock = || memo.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = lock().entries.get(&hash)
        && e.view == view
        && e.context == context
        && *e.doc == *doc
    {
        return Ok(Json(e.clone()));
    }
    let json = RawValue::from_string(render(doc)?).map_err(|e| StoreError::Corrupt(format!("rendered {view}: {e}")))?;
    let entry = Arc::new(Entry { view, context: context.to_owned(), doc: doc.into(), json });
    let size = doc.len() + entry.json.get().len() + context.len();
    let mut m = lock();
    if m.bytes + size > MAX_BYTES {
        m.entries.clear();
        m.bytes = 0;
    }
    // A hash shared by two documents keeps the later one (the other is rendered at its next read).
    if let Some(old) = m.entries.insert(hash, entry.clone()) {
        m.bytes -= old.doc.len() + old.json.get().len() + old.context.len();
    }
    m.bytes += size;
    Ok(Json(entry))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::from_json;
    use std::cell::Cell;

    fn upper(doc: &[u8], calls: &Cell<usize>) -> Result<String, StoreError> {
        calls.set(calls.get() + 1);
        let s: String = from_json(doc)?;
        Ok(format!("{:?}", s.to_uppercase()))
    }

    #[test]
    fn a_document_is_rendered_once_and_a_changed_one_again() {
        let calls = Cell::new(0);
        let a = json_of("test-upper", "", br#""abc""#, |d| upper(d, &calls)).unwrap();
        let b = json_of("test-upper", "", br#""abc""#, |d| upper(d, &calls)).unwrap();
        assert_eq!((format!("{a:?}"), format!("{b:?}"), calls.get()), (r#""ABC""#.into(), r#""ABC""#.into(), 1));
        // Other bytes, another view or another context: rendered for what they are.
        let c = json_of("test-upper", "", br#""abd""#, |d| upper(d, &calls)).unwrap();
        let d = json_of("test-other", "", br#""abc""#, |d| upper(d, &calls)).unwrap();
        let e = json_of("test-upper", "+02:00", br#""abc""#, |d| upper(d, &calls)).unwrap();
        assert_eq!(format!("{c:?}"), r#""ABD""#);
        assert_eq!((format!("{d:?}"), format!("{e:?}")), (r#""ABC""#.into(), r#""ABC""#.into()));
        assert_eq!(calls.get(), 4);
        // Written into an answer as it is.
        assert_eq!(serde_json::to_string(&[a, c]).unwrap(), r#"["ABC","ABD"]"#);
    }

    #[test]
    fn a_render_that_fails_keeps_nothing() {
        let calls = Cell::new(0);
        assert!(json_of("test-fail", "", b"not json", |d| upper(d, &calls)).is_err());
        assert!(json_of("test-fail", "", b"not json", |d| upper(d, &calls)).is_err());
        assert_eq!(calls.get(), 2);
    }
}
