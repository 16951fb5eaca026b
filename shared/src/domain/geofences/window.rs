//! A static fence's active window as requests give it: `is_enabled` as `[flag, start, end]`, or
//! the pair `enable_at` / `disable_at` (create and update take both the same way).

use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::time::{Timestamp, parse_ts};

/// `is_enabled` as `[flag, start_time, end_time]` (either time null or "" to leave that end open).
pub(super) fn parse_window(v: &[Value]) -> Result<(bool, Option<Timestamp>, Option<Timestamp>), ApiError> {
    let field = "is_enabled";
    let flag = v
        .first()
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::field(field, "must be a boolean or [boolean, start_time, end_time]"))?;
    if v.len() > 3 {
        return Err(ApiError::field(field, "must be [boolean, start_time, end_time]"));
    }
    let ts = |i: usize, name: &str| -> Result<Option<Timestamp>, ApiError> {
        match v.get(i) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => parse_ts(&format!("is_enabled[{i}] ({name})"), s).map(|t| Some(Timestamp(t))),
            Some(_) => Err(ApiError::field(&format!("is_enabled[{i}]"), "must be a timestamp")),
        }
    };
    let (a, b) = (ts(1, "start_time")?, ts(2, "end_time")?);
    if let (Some(a), Some(b)) = (a, b)
        && b <= a
    {
        return Err(ApiError::field("is_enabled[2]", "end_time must be after start_time"));
    }
    Ok((flag, a, b))
}

/// A window's ends, either open.
pub(super) type Window = (Option<Timestamp>, Option<Timestamp>);

/// `enable_at` / `disable_at`: None when neither is given; one without the other is a 400 naming
/// the missing one (Roam marks each "required if the other is present"). Each is a timestamp,
/// or null (or "") to leave that end open.
pub(super) fn pair(enable_at: &Option<Value>, disable_at: &Option<Value>) -> Result<Option<Window>, ApiError> {
    let at = |field: &str, v: &Value| -> Result<Option<Timestamp>, ApiError> {
        match v {
            Value::Null => Ok(None),
            Value::String(s) if s.is_empty() => Ok(None),
            Value::String(s) => parse_ts(field, s).map(|t| Some(Timestamp(t))),
            _ => Err(ApiError::field(field, "must be a timestamp or null")),
        }
    };
    match (enable_at, disable_at) {
        (Some(_), None) => Err(ApiError::field("disable_at", "is required with enable_at")),
        (None, Some(_)) => Err(ApiError::field("enable_at", "is required with disable_at")),
        (Some(a), Some(b)) => Ok(Some((at("enable_at", a)?, at("disable_at", b)?))),
        (None, None) => Ok(None),
    }
}

/// A window's end after its start.
pub(super) fn check_order(from: Option<Timestamp>, until: Option<Timestamp>) -> Result<(), ApiError> {
    match (from, until) {
        (Some(a), Some(b)) if b <= a => Err(ApiError::field("disable_at", "must be after enable_at")),
        _ => Ok(()),
    }
}

/// `Some(Value::Null)` for an explicit null, so "clear" differs from "leave".
pub(super) fn some_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}
