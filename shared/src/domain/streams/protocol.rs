//! The WebSocket protocol of streams, the same for `waymark serve` and API Gateway's WebSocket
//! API: what a client sends (subscribe, unsubscribe) and the frames the server sends. Pure:
//! parsing and JSON only; the transports authenticate, resolve and feed. A subscription is
//! acknowledged before any message of it; a message carries the webhook body byte for byte.
//! The frames: docs/streams.md, "WebSocket protocol".

use serde_json::{Map, Value, json};

use super::Filter;
use crate::error::{ApiError, Kind};

/// Longest subscription id a client may choose.
pub const MAX_ID_CHARS: usize = 64;
/// The fields a subscription's `filter` takes.
pub const FILTER_FIELDS: [&str; 4] = ["user_id", "group_id", "trip_id", "events"];

/// A client's request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Subscribe(Subscribe),
    Unsubscribe { id: String },
}

/// A subscribe request, its filter parsed (not yet checked against a project).
#[derive(Debug, Clone, PartialEq)]
pub struct Subscribe {
    pub id: String,
    pub filter: Filter,
    /// The first filter field the client named (none: it asked for the whole project, or for
    /// its stream token's filter).
    pub named: Option<&'static str>,
    /// Resume after this event id.
    pub since: Option<String>,
}

impl Subscribe {
    /// The filter to open: the client's, or on a connection opened with a stream token, the
    /// token's (a subscribe may repeat it, not ask for another: 403 naming the field).
    pub fn filter_for(&self, token: Option<&Filter>) -> Result<Filter, ApiError> {
        let named = self.named.map(|f| format!("filter.{f}"));
        self.filter.clone().within_token(named.as_deref(), token)
    }
}

/// A request refused before it opened anything: the error frame to send, for the subscription
/// it named (if it named one).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub subscription: Option<String>,
    pub error: ApiError,
}

/// Parse a client's text frame.
pub fn parse(text: &str) -> Result<Request, Refused> {
    let refuse = |subscription: Option<&str>, error| Refused { subscription: subscription.map(str::to_owned), error };
    let Ok(Value::Object(mut o)) = serde_json::from_str::<Value>(text) else {
        return Err(refuse(None, ApiError::bad_request("a message must be a JSON object with an action")));
    };
    // The id first, so every later error names its subscription.
    let id = match o.remove("id") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= MAX_ID_CHARS => s,
        _ => {
            return Err(refuse(
                None,
                ApiError::field("id", format!("must be a subscription id of 1 to {MAX_ID_CHARS} characters")),
            ));
        }
    };
    let action = o.remove("action");
    let req = match action.as_ref().and_then(Value::as_str) {
        Some("subscribe") => {
            let since = match o.remove("since") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
                Some(_) => return Err(refuse(Some(&id), ApiError::field("since", "must be an event id"))),
            };
            let (filter, named) = match o.remove("filter") {
                None | Some(Value::Null) => (Filter::parse(None, None, None, None), None),
                Some(Value::Object(f)) => parse_filter(f),
                Some(_) => return Err(refuse(Some(&id), ApiError::field("filter", "must be an object"))),
            };
            let filter = filter.map_err(|e| refuse(Some(&id), e))?;
            Request::Subscribe(Subscribe { id: id.clone(), filter, named, since })
        }
        Some("unsubscribe") => Request::Unsubscribe { id: id.clone() },
        _ => {
            return Err(refuse(Some(&id), ApiError::field("action", "must be 'subscribe' or 'unsubscribe'")));
        }
    };
    if let Some(k) = o.keys().next() {
        return Err(refuse(Some(&id), ApiError::field(k, "is not a field of this message")));
    }
    Ok(req)
}

fn parse_filter(mut f: Map<String, Value>) -> (Result<Filter, ApiError>, Option<&'static str>) {
    let mut values: [Option<String>; 4] = Default::default();
    let mut named = None;
    for (i, name) in FILTER_FIELDS.iter().enumerate() {
        match f.remove(*name) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                named = named.or(Some(*name));
                values[i] = Some(s);
            }
            Some(_) => return (Err(ApiError::field(name, "must be a string")), Some(name)),
        }
    }
    if let Some(k) = f.keys().next() {
        let e = ApiError::field(&format!("filter.{k}"), "is not a filter field; user_id, group_id, trip_id, events");
        return (Err(e), named);
    }
    let [u, g, t, e] = &values;
    (Filter::parse(u.as_deref(), g.as_deref(), t.as_deref(), e.as_deref()), named)
}

fn id_json(subscription: Option<&str>) -> String {
    // A string serializes infallibly.
    serde_json::to_string(&subscription).unwrap_or_else(|_| "null".into())
}

/// A message frame: the stored webhook body embedded as it is (byte for byte).
pub fn message(subscription: &str, body: &str) -> String {
    ["{\"subscription\":", &id_json(Some(subscription)), ",\"message\":", body, "}"].concat()
}

/// The acknowledgement of a subscribe: the subscription is live (sent before any message).
pub fn subscribed(subscription: &str) -> String {
    json!({"subscription": subscription, "subscribed": true}).to_string()
}

/// The acknowledgement of an unsubscribe: nothing more comes for it.
pub fn unsubscribed(subscription: &str) -> String {
    json!({"subscription": subscription, "unsubscribed": true}).to_string()
}

/// An error frame: the status the request would have had over HTTP, and the message naming the
/// field. An internal error's cause is never sent.
pub fn error(subscription: Option<&str>, e: &ApiError) -> String {
    let message = if e.kind == Kind::Internal { "internal error" } else { e.msg.as_str() };
    json!({"subscription": subscription, "error": {"status": e.kind.http_status(), "message": message}}).to_string()
}

/// The last frame of a subscription the server ends: why, and where to resume.
pub fn closed(subscription: &str, reason: &str, message: &str, last_event_id: Option<&str>) -> String {
    json!({"subscription": subscription,
           "closed": {"reason": reason, "message": message, "last_event_id": last_event_id}})
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::streams::Scope;

    #[test]
    fn a_subscribe_names_its_filter_and_resume_id() {
        let r = parse(
            r#"{"action":"subscribe","id":"s1","filter":{"trip_id":"0123456789abcdef0123456a","events":"trip.ended"},"since":"x"}"#,
        );
        let Ok(Request::Subscribe(s)) = r else { panic!("{r:?}") };
        assert_eq!((s.id.as_str(), s.named, s.since.as_deref()), ("s1", Some("trip_id"), Some("x")));
        assert_eq!(s.filter.scope, Scope::Trip("0123456789abcdef0123456a".into()));
        let Ok(Request::Subscribe(all)) = parse(r#"{"action":"subscribe","id":"a"}"#) else { panic!() };
        assert_eq!((all.filter.scope, all.named), (Scope::Project, None));
        assert_eq!(parse(r#"{"action":"unsubscribe","id":"s1"}"#), Ok(Request::Unsubscribe { id: "s1".into() }));
    }

    #[test]
    fn a_bad_request_is_refused_naming_the_field_and_its_subscription() {
        let cases = [
            ("[1]", None, 400, "a message must be"),
            (r#"{"action":"subscribe"}"#, None, 400, "id:"),
            (r#"{"action":"listen","id":"s"}"#, Some("s"), 400, "action:"),
            (r#"{"action":"subscribe","id":"s","filter":{"events":"nope"}}"#, Some("s"), 400, "events[0]:"),
            (r#"{"action":"subscribe","id":"s","filter":{"trip":"t"}}"#, Some("s"), 400, "filter.trip:"),
            (r#"{"action":"subscribe","id":"s","filter":{"user_id":1}}"#, Some("s"), 400, "user_id:"),
            (r#"{"action":"subscribe","id":"s","since":5}"#, Some("s"), 400, "since:"),
            (r#"{"action":"subscribe","id":"s","extra":1}"#, Some("s"), 400, "extra:"),
        ];
        for (text, sub, status, starts) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.subscription.as_deref(), sub, "{text}");
            let frame: Value = serde_json::from_str(&error(e.subscription.as_deref(), &e.error)).unwrap();
            assert_eq!(frame["error"]["status"], status, "{text}");
            let m = frame["error"]["message"].as_str().unwrap();
            assert!(m.starts_with(starts), "{text}: {m}");
        }
    }

    #[test]
    fn a_token_connection_may_repeat_its_filter_only() {
        let token = Filter::parse(None, None, Some("0123456789abcdef0123456a"), None).unwrap();
        let sub = |text: &str| match parse(text) {
            Ok(Request::Subscribe(s)) => s,
            other => panic!("{other:?}"),
        };
        assert_eq!(sub(r#"{"action":"subscribe","id":"s"}"#).filter_for(Some(&token)), Ok(token.clone()));
        let same = sub(r#"{"action":"subscribe","id":"s","filter":{"trip_id":"0123456789abcdef0123456a"}}"#);
        assert_eq!(same.filter_for(Some(&token)), Ok(token.clone()));
        let other = sub(r#"{"action":"subscribe","id":"s","filter":{"trip_id":"0123456789abcdef0123456b"}}"#);
        let e = other.filter_for(Some(&token)).unwrap_err();
        assert_eq!((e.kind, e.msg.starts_with("filter.trip_id:")), (Kind::Forbidden, true), "{}", e.msg);
    }

    #[test]
    fn frames_wrap_the_body_as_it_is() {
        let body = r#"{"id":"018f","type":"location.updated","data":{"x":1.50}}"#;
        assert_eq!(message("s\"1", body), format!(r#"{{"subscription":"s\"1","message":{body}}}"#));
        let v: Value = serde_json::from_str(&closed("s1", "revoked", "m", None)).unwrap();
        assert_eq!(v, json!({"subscription":"s1","closed":{"reason":"revoked","message":"m","last_event_id":null}}));
        let ack: Value = serde_json::from_str(&subscribed("s1")).unwrap();
        assert_eq!(ack, json!({"subscription": "s1", "subscribed": true}));
        let internal = ApiError::new(Kind::Internal, "db exploded");
        assert!(error(Some("s"), &internal).contains("\"internal error\""));
    }
}
