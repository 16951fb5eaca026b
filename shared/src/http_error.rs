//! The HTTP edge of [`ApiError`]: each kind's status code and the interface's error envelopes
//! (v1/v3 and v2), built here so no handler builds either.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::{ApiError, Kind};
use crate::store::StoreError;

/// The status code of a kind of error.
pub fn status(kind: Kind) -> StatusCode {
    StatusCode::from_u16(kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Waymark's `errors` list: `[{field, message}]` for the field at fault, empty when none is.
pub fn field_errors(e: &ApiError) -> serde_json::Value {
    match &e.field {
        Some(f) => json!([{"field": f.field, "message": f.message}]),
        None => json!([]),
    }
}

/// Roam's `error` object (its "Error Responses" page): `GS401` for a key problem (missing,
/// unknown, or one that may not do this), `GS402` for an invalid input with `details`
/// `{field: [messages]}`, `GS404` for an unknown id or path, `GS400` for anything else, its
/// `details` the reason as text (as Roam's key and unknown errors carry it).
pub fn roam_error(e: &ApiError) -> serde_json::Value {
    let (code, message) = match (e.kind, &e.field) {
        (Kind::Unauthorized | Kind::Forbidden, _) => ("GS401", "Invalid Api key"),
        (Kind::Invalid, Some(_)) => ("GS402", "Invalid request"),
        (Kind::NotFound, _) => ("GS404", "Not found"),
        _ => ("GS400", "An error occured"),
    };
    let details = match (&e.field, code) {
        (Some(f), "GS402") => json!({ f.field.as_str(): [f.message] }),
        _ => json!(e.msg),
    };
    json!({"ErrorCode": code, "ErrorMessage": message, "details": details})
}

/// The v2 `message`: a snake_case reason for the kind (an invalid input is Roam's
/// `invalid_request_error`).
pub fn v2_message(kind: Kind) -> &'static str {
    match kind {
        Kind::Invalid => "invalid_request_error",
        Kind::Unauthorized => "unauthorized",
        Kind::Forbidden => "forbidden",
        Kind::NotFound => "not_found",
        Kind::MethodNotAllowed => "method_not_allowed",
        Kind::NotAcceptable => "not_acceptable",
        Kind::Conflict => "conflict",
        Kind::Gone => "gone",
        Kind::TooLarge => "payload_too_large",
        Kind::Timeout => "request_timeout",
        Kind::TooMany => "too_many_requests",
        Kind::Internal => "internal_error",
        Kind::Unavailable => "service_unavailable",
    }
}

/// v1/v3 error envelope: `{status: false, msg, code, data: null, errors: [{field, message}],
/// error: {ErrorCode, ErrorMessage, details}}` with that HTTP status: Waymark's list and Roam's
/// object.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = status(self.kind);
        let (errors, error) = (field_errors(&self), roam_error(&self));
        let body = json!({"status": false, "msg": self.msg, "code": status.as_u16(), "data": null,
            "errors": errors, "error": error});
        with_retry_after(self.kind, (status, axum::Json(body)).into_response())
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
        let status = status(e.kind);
        let body = json!({"code": status.as_u16(), "message": v2_message(e.kind), "description": e.msg,
            "errors": field_errors(&e)});
        with_retry_after(e.kind, (status, axum::Json(body)).into_response())
    }
}

/// Seconds a client is asked to wait after a 503: the store's retry budget (about 3 s) was spent
/// on throttling or errors, which on DynamoDB pass within a second or two as partitions split or
/// the fault clears.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// A 503 says when to come back (`Retry-After`, RFC 9110 §10.2.3); other answers are unchanged.
fn with_retry_after(kind: Kind, mut r: Response) -> Response {
    if kind == Kind::Unavailable {
        r.headers_mut().insert(axum::http::header::RETRY_AFTER, RETRY_AFTER_SECONDS.into());
    }
    r
}
