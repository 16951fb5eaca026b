//! Live streams (docs/streams.md): subscriptions to the messages of a project, one user, a group
//! or one trip, optionally of some event types. A stream carries exactly the webhook messages of
//! the outbox (`webhooks::outbox::Message`: same body, same id as the events API), so a stream, a
//! webhook and a list of events agree.
//!
//! - [`Filter`]: what a subscription asks for, parsed from a request ([`Filter::parse`]) and
//!   resolved against the store once ([`Filter::resolve`]) into a [`Matcher`];
//! - [`hub`]: the live fan-out of one process, bounded per subscriber;
//! - [`resume`]: the stored messages after a resume id, in id order, checked against retention;
//! - [`tokens`]: short-lived tokens the secret key mints for browsers, one filter each.

pub mod connections;
pub mod hub;
pub mod protocol;
pub mod resume;
pub mod tokens;

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::groups;
use crate::domain::webhooks::EVENT_TYPES;
use crate::domain::webhooks::outbox::Message;
use crate::error::ApiError;
use crate::project::Project;
use crate::store::Store;

/// The event types a stream carries: the webhooks' types but `webhook.test`.
pub fn stream_types() -> impl Iterator<Item = &'static str> {
    EVENT_TYPES.iter().copied().filter(|t| *t != "webhook.test")
}

/// Whose messages a subscription takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", content = "id", rename_all = "snake_case")]
pub enum Scope {
    Project,
    User(String),
    Group(String),
    Trip(String),
}

/// A subscription: its scope and, optionally, the event types it takes (all when `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    pub scope: Scope,
    pub types: Option<Vec<String>>,
}

impl Filter {
    /// From the request's `user_id`, `group_id`, `trip_id` (at most one; none: the whole project)
    /// and `events` (comma-separated types).
    pub fn parse(
        user_id: Option<&str>,
        group_id: Option<&str>,
        trip_id: Option<&str>,
        events: Option<&str>,
    ) -> Result<Self, ApiError> {
        let named: Vec<(&str, &str)> = [("user_id", user_id), ("group_id", group_id), ("trip_id", trip_id)]
            .into_iter()
            .filter_map(|(f, v)| v.map(|v| (f, v.trim())))
            .collect();
        let scope = match named.as_slice() {
            [] => Scope::Project,
            [(f, "")] => return Err(ApiError::field(f, "must not be empty")),
            // A malformed id is bad input (400), as everywhere; a well-formed one that names
            // nothing of the project is a 404 when the filter is resolved.
            [(f @ ("user_id" | "trip_id"), v)] if !crate::ids::is_id(v) => {
                return Err(ApiError::field(f, format!("'{v}' is not an id (24 hexadecimal characters)")));
            }
            [("user_id", v)] => Scope::User((*v).to_owned()),
            [("group_id", v)] => Scope::Group((*v).to_owned()),
            [(_, v)] => Scope::Trip((*v).to_owned()),
            _ => return Err(ApiError::field(named[1].0, "give at most one of user_id, group_id and trip_id")),
        };
        let types = match events.map(str::trim) {
            None | Some("*") => None,
            Some(list) => {
                let mut out = Vec::new();
                for (i, t) in list.split(',').map(str::trim).enumerate() {
                    if !stream_types().any(|k| k == t) {
                        return Err(ApiError::field(
                            &format!("events[{i}]"),
                            format!(
                                "'{t}' is not a stream event type; one of {}",
                                stream_types().collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    }
                    out.push(t.to_owned());
                }
                out.sort();
                out.dedup();
                Some(out)
            }
        };
        Ok(Self { scope, types })
    }

    /// The filter a subscription of a stream token opens: the token's own (`token`), which a
    /// request may repeat but not change (`named`: the first filter field it gave, as the
    /// request spells it: `trip_id`, `filter.trip_id`); with the secret key (`None`), this one.
    pub fn within_token(self, named: Option<&str>, token: Option<&Filter>) -> Result<Self, ApiError> {
        match (token, named) {
            (None, _) => Ok(self),
            (Some(t), Some(f)) if *t != self => {
                Err(ApiError::forbidden(format!("{f}: this stream token opens another subscription only")))
            }
            (Some(t), _) => Ok(t.clone()),
        }
    }

    /// Check that the scope names something of this project (404 otherwise) and read what
    /// matching needs: a group's members (as of now: docs/streams.md). A trip is read by the
    /// caller (the trip room publishes to this one) and given to [`Matcher::trip`].
    pub async fn resolve(&self, store: &dyn Store, p: &Project) -> Result<Matcher, ApiError> {
        let scope = match &self.scope {
            Scope::Project => Resolved::Project,
            Scope::User(u) => {
                crate::domain::users::get(store, p, u)
                    .await?
                    .ok_or_else(|| ApiError::not_found(format!("user_id: no user '{u}' in this project")))?;
                Resolved::User(u.clone())
            }
            Scope::Group(g) => {
                if !groups::exists(store, p, g).await? {
                    return Err(ApiError::not_found(format!("group_id: no group '{g}' in this project")));
                }
                Resolved::Users(groups::members(store, p, g).await?.into_iter().collect())
            }
            // The trip room publishes to streams, so the edge reads the trip ([`Matcher::trip`]).
            Scope::Trip(t) => {
                return Err(ApiError::new(
                    crate::error::Kind::Internal,
                    format!("trip '{t}' must be resolved by the caller"),
                ));
            }
        };
        Ok(Matcher { scope, types: self.types.clone() })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Resolved {
    Project,
    User(String),
    Users(HashSet<String>),
    /// The trip's events, and the `location.updated` of its user (what a tracking page shows).
    Trip {
        trip_id: String,
        user_id: Option<String>,
    },
}

/// A resolved filter: whether a message belongs to the subscription. Serializable: API Gateway's
/// connections keep theirs in the store (`connections`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Matcher {
    scope: Resolved,
    types: Option<Vec<String>>,
}

impl Matcher {
    /// A trip's subscription: its events and its user's `location.updated`.
    pub fn trip(trip_id: String, user_id: Option<String>, types: Option<Vec<String>>) -> Self {
        Self { scope: Resolved::Trip { trip_id, user_id }, types }
    }

    pub fn matches(&self, m: &StreamMessage) -> bool {
        if m.kind == "webhook.test" || self.types.as_ref().is_some_and(|t| !t.contains(&m.kind)) {
            return false;
        }
        let user = m.user_id.as_deref();
        match &self.scope {
            Resolved::Project => true,
            Resolved::User(u) => user == Some(u.as_str()),
            Resolved::Users(us) => user.is_some_and(|u| us.contains(u)),
            Resolved::Trip { trip_id, user_id } => {
                m.trip_id.as_deref() == Some(trip_id.as_str())
                    || (m.kind == "location.updated" && user.is_some() && user == user_id.as_deref())
            }
        }
    }
}

/// A message as streams carry it: the stored body, and what filters look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMessage {
    pub id: String,
    pub kind: String,
    pub user_id: Option<String>,
    pub trip_id: Option<String>,
    /// `{id, type, created_at, project_id, data}`, the bytes a webhook sends.
    pub body: Arc<str>,
}

impl StreamMessage {
    pub fn of(m: &Message) -> Self {
        // The trip a trip event concerns is in its data (`trip_id` of the event, or the trip's own).
        let trip_id = serde_json::from_str::<Value>(&m.body).ok().and_then(|b| {
            let d = &b["data"];
            [&d["trip_id"], &d["trip"]["trip_id"], &d["trip"]["id"]]
                .into_iter()
                .find_map(|v| v.as_str().map(str::to_owned))
        });
        Self {
            id: m.id.clone(),
            kind: m.event_type.clone(),
            user_id: m.user_id.clone(),
            trip_id: if m.event_type.starts_with("trip.") { trip_id } else { None },
            body: m.body.as_str().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: &str, user: Option<&str>, trip: Option<&str>) -> StreamMessage {
        StreamMessage {
            id: "0".repeat(24),
            kind: kind.into(),
            user_id: user.map(Into::into),
            trip_id: trip.map(Into::into),
            body: "{}".into(),
        }
    }

    #[test]
    fn a_filter_takes_one_scope_and_known_types() {
        let f = Filter::parse(Some("0123456789abcdef01234561"), None, None, Some("geofence.entry, location.updated"))
            .unwrap();
        assert_eq!(f.scope, Scope::User("0123456789abcdef01234561".into()));
        assert_eq!(f.types, Some(vec!["geofence.entry".into(), "location.updated".into()]));
        assert_eq!(Filter::parse(None, None, None, Some("*")).unwrap().types, None);
        let e = Filter::parse(Some("u"), None, Some("t"), None).unwrap_err();
        assert!(e.msg.contains("trip_id"), "{}", e.msg);
        let e = Filter::parse(None, None, None, Some("geofence.entry,webhook.test")).unwrap_err();
        assert!(e.msg.starts_with("events[1]"), "{}", e.msg);
        assert!(Filter::parse(Some(" "), None, None, None).unwrap_err().msg.contains("user_id"));
        // A malformed id is bad input naming its field (a well-formed unknown one is a 404 later).
        for (user, trip, field) in [(Some("u1"), None, "user_id"), (None, Some("t1"), "trip_id")] {
            let e = Filter::parse(user, None, trip, None).unwrap_err();
            assert_eq!((e.kind, e.msg.starts_with(field)), (crate::error::Kind::Invalid, true), "{}", e.msg);
        }
    }

    #[test]
    fn a_trip_matcher_takes_its_events_and_its_users_locations_only() {
        let m = Matcher { scope: Resolved::Trip { trip_id: "t1".into(), user_id: Some("u1".into()) }, types: None };
        assert!(m.matches(&msg("trip.started", Some("u1"), Some("t1"))));
        assert!(!m.matches(&msg("trip.started", Some("u1"), Some("t2"))));
        assert!(m.matches(&msg("location.updated", Some("u1"), None)));
        assert!(!m.matches(&msg("location.updated", Some("u2"), None)));
        assert!(!m.matches(&msg("geofence.entry", Some("u1"), None)));
        let typed = Matcher { scope: Resolved::Project, types: Some(vec!["geofence.exit".into()]) };
        assert!(typed.matches(&msg("geofence.exit", None, None)));
        assert!(!typed.matches(&msg("geofence.entry", None, None)));
        assert!(!typed.matches(&msg("webhook.test", None, None)));
    }
}
