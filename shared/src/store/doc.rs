//! A stored item's JSON document as reads hand it out ([`Doc`]).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A stored item's JSON document, shared rather than copied: the embedded store hands the same
/// bytes to every read of an answer it keeps (see `embedded::cache`).
#[derive(Clone, PartialEq)]
pub struct Doc(Arc<Vec<u8>>);

impl Doc {
    /// The bytes, without a copy when no one else holds the document.
    pub fn into_vec(self) -> Vec<u8> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl From<Vec<u8>> for Doc {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Arc::new(bytes))
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
        &self.0
    }
}

impl AsRef<[u8]> for Doc {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Doc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Doc({})", String::from_utf8_lossy(&self.0))
    }
}

/// `view` (a stored record as an answer shows it, `what` in an error) as JSON text, written into
/// an answer as it is.
pub fn rendered<T: serde::Serialize>(
    what: &str,
    view: &T,
) -> Result<Box<serde_json::value::RawValue>, super::StoreError> {
    serde_json::value::to_raw_value(view).map_err(|e| super::StoreError::Corrupt(format!("rendering {what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_share_the_bytes_and_the_last_hands_them_out_whole() {
        let doc = Doc::from(br#"{"a":1}"#.to_vec());
        let copy = doc.clone();
        assert_eq!(copy, doc);
        drop(doc);
        assert_eq!(copy.into_vec(), br#"{"a":1}"#);
    }
}
