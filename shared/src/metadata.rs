//! Custom key-value metadata and the `k1:v1,k2:v2` filter.

use serde_json::{Map, Value};

use crate::error::ApiError;

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
    Ok(())
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
    fn malformed_filter_names_the_parameter() {
        let e = MetadataFilter::parse("team").unwrap_err();
        assert!(e.msg.starts_with("metadata:"));
    }
}
