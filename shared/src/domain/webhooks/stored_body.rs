//! A webhook message's body as stored: deflated and base64-encoded behind a `z:` prefix when that
//! is shorter (a body is JSON, so it never starts so). A geofence event's body (the event, its
//! user and its fence) is about 1.1 KB of JSON: with the message's other attributes the item
//! passed DynamoDB's 1 KB write unit and cost two; deflated, about 0.5 KB, one. Only on a store
//! billed by the kilobyte (`Store::bills_by_kilobyte`): deflating costs about 20 µs a message
//! (release build), which the embedded store's ingest would pay for nothing. Bodies stored plain
//! read as they are. In memory a [`super::outbox::Message`]'s body is always the plain text sent.

use std::io::{Read, Write};

use base64::Engine;
use serde::{Deserialize, Deserializer};

const PREFIX: &str = "z:";

/// The stored form of `body`: deflated when that is shorter.
pub fn encode(body: &str) -> String {
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    let deflated = z.write_all(body.as_bytes()).and_then(|()| z.finish());
    match deflated {
        Ok(bytes) => {
            let packed = format!("{PREFIX}{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes));
            if packed.len() < body.len() { packed } else { body.to_owned() }
        }
        Err(_) => body.to_owned(),
    }
}

/// `body` stored as `like` was: deflated if it was (an erasure's redaction keeps the form).
pub fn encode_like(like: &str, body: &str) -> String {
    if like.starts_with(PREFIX) { encode(body) } else { body.to_owned() }
}

/// The plain body of a stored one, or an error saying why it is not readable.
pub fn decode(stored: &str) -> Result<String, String> {
    let Some(packed) = stored.strip_prefix(PREFIX) else { return Ok(stored.to_owned()) };
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD.decode(packed).map_err(|e| e.to_string())?;
    let mut out = String::new();
    flate2::read::DeflateDecoder::new(&bytes[..]).read_to_string(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let stored = String::deserialize(d)?;
    decode(&stored).map_err(|e| serde::de::Error::custom(format!("a webhook message's body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_deflated_when_shorter() {
        let body = format!(r#"{{"id":"x","data":{{"names":[{}]}}}}"#, vec![r#""fence""#; 40].join(","));
        let stored = encode(&body);
        assert!(stored.starts_with(PREFIX) && stored.len() < body.len() / 2, "{stored}");
        assert_eq!(decode(&stored).unwrap(), body);
        // Short or incompressible: kept plain, and plain reads as it is (bodies stored before).
        assert_eq!(encode("{}"), "{}");
        assert_eq!(decode(r#"{"a":1}"#).unwrap(), r#"{"a":1}"#);
        assert!(decode("z:not base64!").is_err());
    }
}
