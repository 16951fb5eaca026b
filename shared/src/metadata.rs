//! Custom key-value metadata and the `k1:v1,k2:v2` filter, and the limit on free text.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// Longest free text (names, descriptions, tags), in bytes.
pub const MAX_TEXT: usize = 1024;

/// Free text (names, descriptions, tags) is limited to [`MAX_TEXT`] bytes everywhere.
pub fn check_text(field: &str, v: &Option<String>) -> Result<(), ApiError> {
    match v {
        Some(s) if s.len() > MAX_TEXT => Err(ApiError::field(field, format!("at most {MAX_TEXT} characters"))),
        _ => Ok(()),
    }
}

/// Most keys a metadata object may carry, and the longest JSON it may serialize to.
pub const MAX_METADATA_KEYS: usize = 50;
pub const MAX_METADATA_BYTES: usize = 4096;

/// Validate a metadata object given in a request body.
pub fn validate(field: &str, m: &Map<String, Value>) -> Result<(), ApiError> {
    if m.len() > MAX_METADATA_KEYS {
        return Err(ApiError::field(field, format!("at most {MAX_METADATA_KEYS} keys")));
    }
    let size = serde_json::to_vec(m).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > MAX_METADATA_BYTES {
        return Err(ApiError::field(field, format!("at most {MAX_METADATA_BYTES} bytes of JSON")));
    }
    check_values(field, m, 1)
}

/// Deepest nesting of objects and arrays accepted (DynamoDB stores at most 32 levels).
pub const MAX_METADATA_DEPTH: usize = 16;

/// Keys must be non-empty and numbers storable, at any depth: DynamoDB rejects empty attribute
/// names and numbers outside about 1e-130..1e126, and both backends must accept the same input.
fn check_values(field: &str, m: &Map<String, Value>, depth: usize) -> Result<(), ApiError> {
    if depth > MAX_METADATA_DEPTH {
        return Err(ApiError::field(field, format!("nested deeper than {MAX_METADATA_DEPTH} levels")));
    }
    for (k, v) in m {
        if k.is_empty() {
            return Err(ApiError::field(field, "keys must not be empty"));
        }
        check_value(&format!("{field}.{k}"), v, depth)?;
    }
    Ok(())
}

fn check_value(field: &str, v: &Value, depth: usize) -> Result<(), ApiError> {
    match v {
        Value::Object(m) => check_values(field, m, depth + 1),
        Value::Array(_) if depth + 1 > MAX_METADATA_DEPTH => {
            Err(ApiError::field(field, format!("nested deeper than {MAX_METADATA_DEPTH} levels")))
        }
        Value::Array(a) => a.iter().try_for_each(|x| check_value(field, x, depth + 1)),
        Value::Number(n) if !n.as_f64().is_some_and(storable) => {
            Err(ApiError::field(field, format!("{n} is outside the storable range (about 1e-130 to 1e125)")))
        }
        _ => Ok(()),
    }
}

/// Whether DynamoDB can store the number (zero, or magnitude between 1e-130 and 1e125).
pub fn storable(x: f64) -> bool {
    x == 0.0 || (1e-130..1e125).contains(&x.abs())
}

/// Every listed pair must match. Values compare as text, so `count:3` matches `{"count": 3}` and
/// `{"count": "3"}`; `flag:true` matches `true`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataFilter(pub Vec<(String, String)>);

impl MetadataFilter {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut pairs = Vec::new();
        for part in s.split(',') {
            let (k, v) = part.split_once(':').ok_or_else(|| {
                ApiError::field("metadata", format!("'{part}' is not key:value (format key1:value1,key2:value2)"))
            })?;
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() {
                return Err(ApiError::field("metadata", format!("'{part}' has an empty key")));
            }
            pairs.push((k.to_string(), v.to_string()));
        }
        Ok(Self(pairs))
    }

    pub fn matches(&self, metadata: Option<&Map<String, Value>>) -> bool {
        let Some(m) = metadata else { return self.0.is_empty() };
        self.0.iter().all(|(k, v)| match m.get(k) {
            Some(Value::String(s)) => s == v,
            Some(Value::Number(n)) => v.parse::<f64>().ok() == n.as_f64(),
            Some(Value::Bool(b)) => v.parse::<bool>().ok() == Some(*b),
            Some(_) | None => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn all_pairs_must_match() {
        let f = MetadataFilter::parse("team:red, n:3").unwrap();
        let m = json!({"team": "red", "n": 3}).as_object().cloned();
        assert!(f.matches(m.as_ref()));
        let m = json!({"team": "red"}).as_object().cloned();
        assert!(!f.matches(m.as_ref()));
        assert!(!f.matches(None));
    }

    #[test]
    fn unstorable_metadata_is_refused() {
        for bad in [json!({"": 1}), json!({"a": {"": 1}}), json!({"a": [1e-200]}), json!({"a": 1e200})] {
            assert!(validate("metadata", bad.as_object().unwrap()).is_err(), "{bad}");
        }
        let mut deep = json!(1);
        for _ in 0..20 {
            deep = json!({"k": deep});
        }
        assert!(validate("metadata", deep.as_object().unwrap()).is_err());
        assert!(validate("metadata", json!({"a": {"b": [1, 2.5, "x", null]}}).as_object().unwrap()).is_ok());
    }

    #[test]
    fn malformed_filter_names_the_parameter() {
        let e = MetadataFilter::parse("team").unwrap_err();
        assert!(e.msg.starts_with("metadata:"));
    }
}
