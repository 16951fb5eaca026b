//! Request extractors that turn every rejection into the interface's envelope, naming the field.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use chrono_tz::Tz;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::http_error::V2Error;
use crate::paging::PageNumber;
use crate::time::DateRange;

/// Largest accepted request body: 1,000 locations with every optional field fit well inside.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A JSON body. Unlike `axum::Json` it answers 400 (not 415/422) in the envelope and names the
/// field that failed, e.g. `locations[2].coordinates: invalid type: string "x", expected f64`.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let mime = v.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
                mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
            })
            .unwrap_or(false);
        if !is_json {
            return Err(ApiError::field("Content-Type", "the body must be sent as application/json"));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(body_rejection)?;
        parse_json_object(&bytes).map(ApiJson)
    }
}

/// A body that could not be read, in the envelope: 413 over the limit, else 400.
pub fn body_rejection(r: axum::extract::rejection::BytesRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(crate::error::Kind::TooLarge, format!("body: larger than the {MAX_BODY_BYTES} bytes accepted"))
    } else {
        ApiError::field("body", format!("could not be read ({})", r.body_text()))
    }
}

/// Parse a JSON object body. serde would read a JSON array positionally into a struct; every
/// body here is an object.
pub fn parse_json_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => parse_json(bytes),
        None => Err(ApiError::field("body", "is empty; a JSON object is required")),
        Some(_) => Err(ApiError::field("body", "must be a JSON object")),
    }
}

/// Parse JSON, reporting the path of the failing field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // serde_json appends "at line 1 column 78"; the field path says more.
        let reason = inner.to_string();
        let reason = reason.split(" at line ").next().unwrap_or(&reason).to_owned();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::field("body", format!("malformed JSON ({inner})"))
        } else if path == "." || path.is_empty() {
            // serde reports a missing or unknown field at the enclosing object, naming it only in
            // its message: named as the field, so Roam's `details` carry it as Roam's do.
            match named_field(&reason) {
                Some((f, true)) => ApiError::field(f, "is required"),
                Some((f, false)) => ApiError::field(f, "is not a field of this body"),
                None => ApiError::field("body", reason),
            }
        } else {
            ApiError::field(&path, reason)
        }
    })
}

/// The field serde's top-level message names: (name, true) for "missing field `x`", (name, false)
/// for "unknown field `x`, expected ...".
fn named_field(reason: &str) -> Option<(&str, bool)> {
    let (rest, missing) = match (reason.strip_prefix("missing field `"), reason.strip_prefix("unknown field `")) {
        (Some(r), _) => (r, true),
        (_, Some(r)) => (r, false),
        _ => return None,
    };
    rest.split_once('`').map(|(f, _)| (f, missing))
}

/// The query string as a map, with typed getters that name the parameter on failure.
#[derive(Debug, Default, Clone)]
pub struct Params(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let q = parts.uri.query().unwrap_or("");
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(q).map_err(|e| ApiError::field("query", format!("cannot be decoded ({e})")))?;
        let mut map = HashMap::new();
        for (k, v) in pairs {
            if map.insert(k.clone(), v).is_some() {
                return Err(ApiError::field(&k, "given more than once"));
            }
        }
        Ok(Params(map))
    }
}

impl Params {
    /// A non-empty string parameter, or None when absent or empty.
    pub fn opt(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|s| s.trim()).filter(|s| !s.is_empty())
    }
    pub fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.opt(name).ok_or_else(|| ApiError::field(name, "is required"))
    }
    /// Refuse a parameter the operation does not know: 400 naming it (none is silently ignored).
    pub fn only(&self, known: &[&str]) -> Result<&Self, ApiError> {
        let mut unknown: Vec<&str> = self.0.keys().map(String::as_str).filter(|k| !known.contains(k)).collect();
        unknown.sort();
        match unknown.first() {
            None => Ok(self),
            Some(k) => {
                Err(ApiError::field(k, format!("is not a parameter of this operation (it takes {})", known.join(", "))))
            }
        }
    }
    pub fn has(&self, name: &str) -> bool {
        self.opt(name).is_some()
    }
    /// `true`/`false` in any case, also `1`/`0`; absent is `default`.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, ApiError> {
        match self.opt(name).map(|s| s.to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" || v == "1" => Ok(true),
            Some(v) if v == "false" || v == "0" => Ok(false),
            Some(v) => Err(ApiError::field(name, format!("'{v}' is not a boolean (true or false)"))),
        }
    }
    pub fn page_number(&self) -> Result<PageNumber, ApiError> {
        PageNumber::parse(self.opt("page_number"))
    }
    pub fn timezone(&self) -> Result<Option<Tz>, ApiError> {
        crate::time::parse_tz(self.opt("timezone_offset"))
    }
    /// `start_date` / `end_date` interpreted in `tz` (UTC when None).
    pub fn date_range(&self, tz: Option<Tz>) -> Result<Option<DateRange>, ApiError> {
        DateRange::parse(self.opt("start_date"), self.opt("end_date"), tz)
    }
    pub fn metadata_filter(&self) -> Result<Option<crate::metadata::MetadataFilter>, ApiError> {
        self.opt("metadata").map(crate::metadata::MetadataFilter::parse).transpose()
    }
}

/// [`ApiJson`] for the v2 API: rejections in the v2 envelope.
#[derive(Debug)]
pub struct V2Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for V2Json<T> {
    type Rejection = V2Error;
    async fn from_request(req: Request, state: &S) -> Result<Self, V2Error> {
        Ok(Self(ApiJson::from_request(req, state).await?.0))
    }
}

/// [`Params`] for the v2 API: rejections in the v2 envelope.
#[derive(Debug, Default, Clone)]
pub struct V2Params(pub Params);

impl<S: Send + Sync> FromRequestParts<S> for V2Params {
    type Rejection = V2Error;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, V2Error> {
        Ok(Self(Params::from_request_parts(parts, state).await?))
    }
}
