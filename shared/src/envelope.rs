//! Success envelopes. The HTTP status is the body's `code` (201 for a creation, as Roam answers
//! and as Roam's clients check).

use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::value::RawValue;

use crate::store::StoreError;

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

impl<T: Serialize> IntoResponse for Envelope<T> {
    fn into_response(self) -> Response {
        json_written(status_of(self.code), self.to_json(ANSWER_CAPACITY))
    }
}

impl<T: Serialize> Envelope<T> {
    /// The answer, its buffer sized for `data_bytes` of data (JSON the caller knows the length
    /// of) besides the envelope.
    pub fn into_response_sized(self, data_bytes: usize) -> Response {
        json_written(status_of(self.code), self.to_json(data_bytes + ANSWER_CAPACITY))
    }

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

/// v2 success: `{code, message, description, ...fields}` (e.g. `trip`, or `trips` and `has_more`).
#[derive(Debug)]
pub struct V2Envelope {
    pub code: u16,
    pub message: &'static str,
    pub description: String,
    pub fields: serde_json::Map<String, serde_json::Value>,
}

impl V2Envelope {
    pub fn new(code: u16, message: &'static str, description: impl Into<String>) -> Self {
        Self { code, message, description: description.into(), fields: serde_json::Map::new() }
    }
    pub fn with(mut self, key: &str, value: serde_json::Value) -> Self {
        self.fields.insert(key.to_owned(), value);
        self
    }
}

impl IntoResponse for V2Envelope {
    fn into_response(self) -> Response {
        let mut body = self.fields;
        body.insert("code".into(), self.code.into());
        body.insert("message".into(), self.message.into());
        body.insert("description".into(), self.description.into());
        json_answer(status_of(self.code), &body)
    }
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

/// `view` (a stored record as an answer shows it, `what` in an error) as JSON text, written into
/// an answer as it is.
pub fn rendered<T: Serialize>(what: &str, view: &T) -> Result<Box<RawValue>, StoreError> {
    serde_json::value::to_raw_value(view).map_err(|e| StoreError::Corrupt(format!("rendering {what}: {e}")))
}

/// First capacity of an answer's buffer: most answers (a page of a list) fit, and a longer one
/// grows it a few times.
const ANSWER_CAPACITY: usize = 4096;

/// `value` as a JSON answer, written into one growing buffer. axum's `Json` writes through a
/// `BytesMut` writer: a capacity check and a copy for every piece serde_json writes (a key, a
/// quote, a comma), which made copying the answer a tenth of a warm list request's time.
pub fn json_answer<T: Serialize>(status: axum::http::StatusCode, value: &T) -> Response {
    let mut buf = Vec::with_capacity(ANSWER_CAPACITY);
    json_written(status, serde_json::to_writer(&mut buf, value).map(|()| buf))
}

/// A JSON answer already written, or a 500 if writing it failed.
pub fn json_written(status: axum::http::StatusCode, body: serde_json::Result<Vec<u8>>) -> Response {
    use axum::http::{HeaderValue, header};
    match body {
        // Built as it is sent: through axum's tuple, a body of bytes was labelled
        // `application/octet-stream` first and then labelled again.
        Ok(body) => {
            let mut answer = Response::new(axum::body::Body::from(body));
            *answer.status_mut() = status;
            answer.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            answer
        }
        Err(e) => crate::error::ApiError::internal(e).into_response(),
    }
}

/// The HTTP status a success `code` is answered with.
fn status_of(code: u16) -> axum::http::StatusCode {
    axum::http::StatusCode::from_u16(code).unwrap_or(axum::http::StatusCode::OK)
}

/// A GPX 1.1 document (`application/gpx+xml`), offered as a download named `filename`.
#[derive(Debug)]
pub struct GpxFile {
    pub filename: String,
    pub body: String,
}

impl IntoResponse for GpxFile {
    fn into_response(self) -> Response {
        let disposition = format!("attachment; filename=\"{}\"", self.filename.replace('"', ""));
        (
            [
                (axum::http::header::CONTENT_TYPE, "application/gpx+xml".to_owned()),
                (axum::http::header::CONTENT_DISPOSITION, disposition),
            ],
            self.body,
        )
            .into_response()
    }
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
