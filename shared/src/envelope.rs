//! Success envelopes. The HTTP status is the body's `code` (201 for a creation, as Roam answers
//! and as Roam's clients check).

use axum::response::{IntoResponse, Response};
use serde::Serialize;
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

impl<T: Serialize> Envelope<T> {
    pub fn ok(msg: impl Into<String>, data: T) -> Self {
        Self { code: 200, msg: msg.into(), data }
    }
    pub fn created(msg: impl Into<String>, data: T) -> Self {
        Self { code: 201, msg: msg.into(), data }
    }
}

/// The v1/v3 body, serialised straight from `data` (building a `json!` tree around it copied the
/// whole of `data` once more: a fifth of a warm list request's time). Fields in the order the
/// tree wrote them (sorted), so answers stay byte for byte the same.
#[derive(Serialize)]
struct Body<'a, T> {
    code: u16,
    data: &'a T,
    msg: &'a str,
    status: bool,
}

impl<T: Serialize> IntoResponse for Envelope<T> {
    fn into_response(self) -> Response {
        json_written(status_of(self.code), self.to_json(ANSWER_CAPACITY))
    }
}

impl<T: Serialize> Envelope<T> {
    /// The answer, its buffer sized for `data_bytes` of data (kept JSON the caller knows the
    /// length of) besides the envelope: grown as it was written, a 20 kB answer was copied three
    /// times over (a twentieth of a search's time).
    pub fn into_response_sized(self, data_bytes: usize) -> Response {
        json_written(status_of(self.code), self.to_json(data_bytes + ANSWER_CAPACITY))
    }

    /// The body's bytes with the value of `key`, which `data` writes as [`MARK`], written by
    /// `write` instead, into a buffer sized for about `data_bytes` of it: a long part of an answer
    /// written by hand (a trip's route, on several cores; found fences, from JSON kept for them).
    /// Only a key writes `"key":` with its quotes (a quote inside a string is escaped), and `data`
    /// must hold one such key.
    pub fn to_json_spliced(
        &self,
        key: &str,
        data_bytes: usize,
        write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> serde_json::Result<Vec<u8>> {
        let mut out = self.to_json(data_bytes + ANSWER_CAPACITY)?;
        let marked = format!("\"{key}\":\"\\u0001\"");
        let at = memchr::memmem::find(&out, marked.as_bytes())
            .ok_or_else(|| serde::ser::Error::custom(format!("{key}: not marked")))?;
        let tail = out.split_off(at + marked.len());
        out.truncate(at + key.len() + 3);
        write(&mut out)?;
        out.extend_from_slice(&tail);
        Ok(out)
    }

    /// The body's bytes, written into a buffer of `capacity` bytes from the start.
    pub fn to_json(&self, capacity: usize) -> serde_json::Result<Vec<u8>> {
        let body = Body { code: self.code, data: &self.data, msg: &self.msg, status: true };
        let mut buf = Vec::with_capacity(capacity);
        serde_json::to_writer(&mut buf, &body)?;
        Ok(buf)
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

/// What `data` writes where [`Envelope::to_json_spliced`] writes a part by hand: a string no
/// answer holds otherwise.
pub const MARK: &str = "\u{1}";

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
    fn a_part_written_by_hand_goes_where_its_key_was_marked_and_only_there() {
        // A string holding the mark's text as a value: written escaped, never taken for it.
        let data = json!({"a": r#""b":"\u{1}""#, "b": MARK, "c": 1});
        let body = Envelope::ok("m", data)
            .to_json_spliced("b", 0, |out| {
                out.extend_from_slice(b"[1,2]");
                Ok(())
            })
            .unwrap();
        let want =
            json!({"code": 200, "data": {"a": r#""b":"\u{1}""#, "b": [1, 2], "c": 1}, "msg": "m", "status": true});
        assert_eq!(String::from_utf8(body).unwrap(), want.to_string());
        let unmarked = Envelope::ok("m", json!({"b": 1})).to_json_spliced("b", 0, |_| Ok(()));
        assert!(unmarked.is_err());
    }
}
