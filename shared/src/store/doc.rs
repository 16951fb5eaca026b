//! A stored item's JSON document as reads hand it out ([`Doc`]).

use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;

use super::{StoreError, from_json};

/// A stored item's JSON document, shared rather than copied: the embedded store hands the same
/// one to every read of an answer it keeps (see `embedded::answers`), and with it whatever a
/// reader derived from its bytes before ([`Doc::derived`]). A made-afresh warm list spent a tenth
/// of its CPU copying kept documents out and hashing and comparing each one's bytes to find the
/// JSON it renders to (`crate::rendered`).
#[derive(Clone)]
pub struct Doc(Arc<Inner>);

struct Inner {
    bytes: Vec<u8>,
    /// What the first reader that asked derived from `bytes`; bytes never change, so it holds for
    /// as long as the document lives.
    derived: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl Doc {
    /// What was derived from this document ([`Doc::derive`]), if it is a `T`.
    pub fn derived<T: Any>(&self) -> Option<&T> {
        self.0.derived.get().and_then(|d| d.downcast_ref())
    }

    /// Keep `value`, derived from these bytes alone, for the document's next readers; the first
    /// value kept stays (one slot: a document is nearly always read for one purpose).
    pub fn derive<T: Any + Send + Sync>(&self, value: T) {
        let _ = self.0.derived.set(Box::new(value));
    }

    /// The record the document decodes to, decoded once for all its readers (kept as what was
    /// derived from it, unless something else was first).
    pub fn decoded<T: DeserializeOwned + Any + Send + Sync>(&self) -> Result<Arc<T>, StoreError> {
        if let Some(record) = self.derived::<Arc<T>>() {
            return Ok(record.clone());
        }
        let record = Arc::new(from_json::<T>(self)?);
        self.derive(record.clone());
        Ok(record)
    }

    /// Whether `other` is this very document (shared, not merely equal bytes).
    pub fn same(&self, other: &Doc) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The bytes, without a copy when no one else holds the document.
    pub fn into_vec(self) -> Vec<u8> {
        match Arc::try_unwrap(self.0) {
            Ok(inner) => inner.bytes,
            Err(shared) => shared.bytes.clone(),
        }
    }
}

impl From<Vec<u8>> for Doc {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Arc::new(Inner { bytes, derived: OnceLock::new() }))
    }
}

impl From<&[u8]> for Doc {
    fn from(bytes: &[u8]) -> Self {
        bytes.to_vec().into()
    }
}

impl Deref for Doc {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0.bytes
    }
}

impl AsRef<[u8]> for Doc {
    fn as_ref(&self) -> &[u8] {
        &self.0.bytes
    }
}

impl PartialEq for Doc {
    fn eq(&self, other: &Self) -> bool {
        self.0.bytes == other.0.bytes
    }
}

impl fmt::Debug for Doc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Doc({})", String::from_utf8_lossy(&self.0.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_derived_rides_with_every_copy_and_the_first_stays() {
        let doc = Doc::from(br#"{"a":1}"#.to_vec());
        let copy = doc.clone();
        assert!(copy.derived::<u32>().is_none());
        doc.derive(7u32);
        doc.derive(8u32);
        assert_eq!(copy.derived::<u32>(), Some(&7));
        assert!(copy.derived::<String>().is_none(), "only as the type it was kept as");
        assert!(Doc::from(&copy[..]).derived::<u32>().is_none(), "equal bytes read again start empty");
        let record = Doc::from(&br#"{"a":2}"#[..]);
        let first = record.decoded::<serde_json::Value>().unwrap();
        assert!(Arc::ptr_eq(&first, &record.clone().decoded().unwrap()), "decoded once");
        assert_eq!(copy.decoded::<serde_json::Value>().unwrap()["a"], 1, "the slot taken: decoded each time");
        assert!(Doc::from(&b"{"[..]).decoded::<serde_json::Value>().is_err());
        drop(doc);
        assert_eq!(copy.into_vec(), br#"{"a":1}"#);
    }
}
