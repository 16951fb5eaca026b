//! Success answers at the HTTP edge. The HTTP status is the body's `code` (201 for a creation, as
//! Roam answers and as Roam's clients check); the bodies are written by `body`.

use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use crate::body::{Envelope, ObjectWriter, SUCCESS, write_array};

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
