//! Success envelopes. The HTTP status is the body's `code` (201 for a creation, as Roam answers
//! and as Roam's clients check).

use axum::response::{IntoResponse, Response};
use serde::Serialize;

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

impl<T: Serialize> IntoResponse for Envelope<T> {
    fn into_response(self) -> Response {
        // Written straight from `data` (keys in the order a JSON map sorts them): `json!` would
        // first copy all of `data` into a `Value` tree, which for a long trip route is most of
        // the request's time.
        #[derive(Serialize)]
        struct Body<'a, T> {
            code: u16,
            data: &'a T,
            msg: &'a str,
            status: bool,
        }
        let body = Body { code: self.code, data: &self.data, msg: &self.msg, status: true };
        (status_of(self.code), axum::Json(body)).into_response()
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
        (status_of(self.code), axum::Json(serde_json::Value::Object(body))).into_response()
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
