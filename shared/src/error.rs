//! One error type for every handler, turned into the interface's envelope in one place.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

/// An error a request can end with. `msg` is written for the person calling the API: it names the
/// field and says what would be accepted. Internal causes are logged, never sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub msg: String,
    /// The input at fault, for Roam's error object (kept as data: never read back from `msg`).
    pub field: Option<FieldError>,
}

/// One entry of Roam's error object.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, msg: impl Into<String>) -> Self {
        Self { status, msg: msg.into(), field: None }
    }
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, msg)
    }
    /// 400 naming the field: `field: reason`, with the field in Roam's error object.
    pub fn field(field: &str, reason: impl std::fmt::Display) -> Self {
        let message = reason.to_string();
        Self {
            status: StatusCode::BAD_REQUEST,
            msg: format!("{field}: {message}"),
            field: Some(FieldError { field: field.to_owned(), message }),
        }
    }
    pub fn unauthorized(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, msg)
    }
    pub fn forbidden(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, msg)
    }
    pub fn not_found(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, msg)
    }
    pub fn conflict(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, msg)
    }
    /// 500 with an opaque message; the cause goes to the log only.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }

    /// Waymark's `errors` list: `[{field, message}]` for the field at fault, empty when none is.
    pub fn field_errors(&self) -> serde_json::Value {
        match &self.field {
            Some(f) => json!([{"field": f.field, "message": f.message}]),
            None => json!([]),
        }
    }

    /// Roam's `error` object (its "Error Responses" page): `GS401` for a key problem (missing,
    /// unknown, or one that may not do this), `GS402` for an invalid input with `details`
    /// `{field: [messages]}`, `GS404` for an unknown id or path, `GS400` for anything else, its
    /// `details` the reason as text (as Roam's key and unknown errors carry it).
    pub fn roam_error(&self) -> serde_json::Value {
        let (code, message) = match (self.status, &self.field) {
            (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, _) => ("GS401", "Invalid Api key"),
            (StatusCode::BAD_REQUEST, Some(_)) => ("GS402", "Invalid request"),
            (StatusCode::NOT_FOUND, _) => ("GS404", "Not found"),
            _ => ("GS400", "An error occured"),
        };
        let details = match (&self.field, code) {
            (Some(f), "GS402") => json!({ f.field.as_str(): [f.message] }),
            _ => json!(self.msg),
        };
        json!({"ErrorCode": code, "ErrorMessage": message, "details": details})
    }

    /// The v2 `message`: a snake_case reason derived from the status (400 is Roam's
    /// `invalid_request_error`).
    pub fn v2_message(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "invalid_request_error",
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::NOT_ACCEPTABLE => "not_acceptable",
            StatusCode::CONFLICT => "conflict",
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            _ => "internal_error",
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.msg)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::TooLarge(n) => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "body: the record would take {n} bytes, more than the {} a record may hold; send less text, metadata or fewer items",
                    crate::store::MAX_ITEM_BYTES
                ),
            ),
            other => Self::internal(other),
        }
    }
}

/// v1/v3 error envelope: `{status: false, msg, code, data: null, errors: [{field, message}],
/// error: {ErrorCode, ErrorMessage, details}}` with that HTTP status: Waymark's list and Roam's
/// object, both built here so no handler builds either.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (errors, error) = (self.field_errors(), self.roam_error());
        let body = json!({"status": false, "msg": self.msg, "code": self.status.as_u16(), "data": null,
            "errors": errors, "error": error});
        (self.status, axum::Json(body)).into_response()
    }
}

/// v2 error envelope, Roam's error object: `{code, message, description, errors: [{field, message}]}`.
#[derive(Debug)]
pub struct V2Error(pub ApiError);

impl From<ApiError> for V2Error {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}
impl From<StoreError> for V2Error {
    fn from(e: StoreError) -> Self {
        Self(e.into())
    }
}

impl IntoResponse for V2Error {
    fn into_response(self) -> Response {
        let e = self.0;
        let body = json!({"code": e.status.as_u16(), "message": e.v2_message(), "description": e.msg, "errors": e.field_errors()});
        (e.status, axum::Json(body)).into_response()
    }
}
