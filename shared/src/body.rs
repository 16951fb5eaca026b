//! Answer bodies as JSON bytes: the v1/v3 success envelope, objects and arrays written straight
//! into a buffer (the long parts of an answer, such as a trip's route, written by hand). Pure:
//! the HTTP edge (`envelope`) turns them into responses.

use serde::Serialize;
use serde::ser::SerializeMap;

/// The `msg` Roam answers on success for most operations (its clients may show it).
pub const SUCCESS: &str = "Success.";

/// v1/v3 success: `{status: true, msg, code, data}`.
#[derive(Debug)]
pub struct Envelope<T> {
    pub code: u16,
    pub msg: String,
    pub data: T,
}

impl<T> Envelope<T> {
    pub fn ok(msg: impl Into<String>, data: T) -> Self {
        Self { code: 200, msg: msg.into(), data }
    }
    pub fn created(msg: impl Into<String>, data: T) -> Self {
        Self { code: 201, msg: msg.into(), data }
    }

    /// The body's bytes, `{"code","data","msg","status"}` (sorted, as the JSON tree it replaced
    /// wrote them), with `data` written straight into the buffer by `write` (a long part written
    /// by hand: a trip's route, on several cores), the buffer sized for `capacity` bytes from the
    /// start (grown as it was written, a 20 kB answer was copied three times over).
    pub fn to_json_with(
        &self,
        capacity: usize,
        write: impl FnOnce(&T, &mut Vec<u8>) -> serde_json::Result<()>,
    ) -> serde_json::Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(capacity);
        let mut body = ObjectWriter::new(&mut buf);
        body.serialize_entry("code", &self.code)?;
        body.entry_written("data", |out| write(&self.data, out))?;
        body.serialize_entry("msg", &self.msg)?;
        body.serialize_entry("status", &true)?;
        body.end()?;
        Ok(buf)
    }
}

impl<T: Serialize> Envelope<T> {
    /// The body's bytes, `data` serialised straight into them (building a `json!` tree around it
    /// copied the whole of `data` once more: a fifth of a warm list request's time).
    pub fn to_json(&self, capacity: usize) -> serde_json::Result<Vec<u8>> {
        self.to_json_with(capacity, |data, out| serde_json::to_writer(out, data))
    }
}

/// A JSON object written entry by entry straight into a buffer, byte for byte as serde_json
/// writes a map of string keys: a [`SerializeMap`] (so what writes a `Serialize` impl's entries
/// can write them here too), and entries whose value is written by hand
/// ([`ObjectWriter::entry_written`]).
pub struct ObjectWriter<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> ObjectWriter<'a> {
    /// An object begun at the end of `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    /// An entry whose value `write` writes into the buffer, as JSON.
    pub fn entry_written(
        &mut self,
        key: &str,
        write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> serde_json::Result<()> {
        self.serialize_key(key)?;
        self.out.push(b':');
        write(self.out)
    }
}

impl SerializeMap for ObjectWriter<'_> {
    type Ok = ();
    type Error = serde_json::Error;

    fn serialize_key<K: Serialize + ?Sized>(&mut self, key: &K) -> serde_json::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        let at = self.out.len();
        serde_json::to_writer(&mut *self.out, key)?;
        if self.out.get(at) != Some(&b'"') {
            return Err(serde::ser::Error::custom("an object's key must be a string"));
        }
        Ok(())
    }

    fn serialize_value<V: Serialize + ?Sized>(&mut self, value: &V) -> serde_json::Result<()> {
        self.out.push(b':');
        serde_json::to_writer(&mut *self.out, value)
    }

    fn end(self) -> serde_json::Result<()> {
        self.out.push(b'}');
        Ok(())
    }
}

/// An answer written in pieces that, put end to end in order, are its bytes: a long answer, sent
/// while its later pieces are still being written (`crate::streamed`). Any piece may be asked
/// for from any thread, in any order.
pub trait Pieces: Send + Sync + 'static {
    /// How many pieces (at least one).
    fn count(&self) -> usize;
    /// Piece `k`'s bytes.
    fn piece(&self, k: usize) -> serde_json::Result<Vec<u8>>;
}

/// `items` as a JSON array, each written by `write`: the parts of answers written by hand.
pub fn write_array<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(T, &mut Vec<u8>) -> serde_json::Result<()>,
) -> serde_json::Result<()> {
    out.push(b'[');
    for (k, item) in items.into_iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        write(item, out)?;
    }
    out.push(b']');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_envelope_and_objects_are_written_as_serde_json_writes_them() {
        let data = json!({"a": "x \"q\" \u{1}", "b": [1, 2.5, null], "c": {}});
        let body = Envelope::ok("m \"n\"", &data).to_json(0).unwrap();
        let tree = json!({"code": 200, "data": data, "msg": "m \"n\"", "status": true});
        assert_eq!(String::from_utf8(body).unwrap(), tree.to_string());
        let by_hand = Envelope::created("m", ())
            .to_json_with(0, |(), out| {
                let mut o = ObjectWriter::new(out);
                o.entry_written("b", |out| {
                    out.extend_from_slice(b"[1,2]");
                    Ok(())
                })?;
                o.serialize_entry("a", "z")?;
                SerializeMap::end(o)
            })
            .unwrap();
        let want = r#"{"code":201,"data":{"b":[1,2],"a":"z"},"msg":"m","status":true}"#;
        assert_eq!(String::from_utf8(by_hand).unwrap(), want);
        let mut out = Vec::new();
        assert!(ObjectWriter::new(&mut out).serialize_entry(&1, &1).is_err(), "a key that is not a string");
    }
}
