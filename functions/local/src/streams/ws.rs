//! The WebSocket at `GET /v1/api/streams/ws/` (docs/streams.md): one connection, any number of
//! subscriptions up to [`MAX_SUBSCRIPTIONS`], each a [`Feed`] as an SSE stream is. The client
//! sends `{"action":"subscribe","id":"s1","filter":{…},"since":"<event id>"}` and
//! `{"action":"unsubscribe","id":"s1"}`; the server answers with frames naming the subscription:
//! `subscribed`, `message` (the webhook body), `error` (status and a message naming the field),
//! `closed` (reason and where to resume) and `unsubscribed`. The same frames as the WebSocket API
//! on AWS.
//!
//! Each subscription runs in a task of its own that writes its frames into the connection's
//! bounded queue: a connection that reads slowly holds up only its own subscriptions, which then
//! fall behind in the hub and are closed with `lagging`, never ingest or other subscribers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::request::Parts;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use shared::domain::streams::Filter;
use shared::error::Kind;
use shared::{ApiError, AppState, Params};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::guard::ConnectionPlace;

use super::{KEEP_ALIVE, Opener, feed::Feed, feed::Item, open};

/// Subscriptions one connection holds at once.
pub const MAX_SUBSCRIPTIONS: usize = 32;
/// A connection without a subscription for this long is closed (as API Gateway closes idle ones).
pub const IDLE: Duration = Duration::from_secs(600);
/// Frames waiting for a slow connection before its subscriptions wait in turn.
const OUTBOX: usize = 64;
/// A client's frame larger than this is refused (subscribe frames are small).
const MAX_FRAME: usize = 16 * 1024;

pub(super) async fn ws(
    State(s): State<AppState>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    mut parts: Parts,
    q: Params,
) -> Result<Response, ApiError> {
    q.only(&["token"])?;
    let place = parts.extensions.remove::<ConnectionPlace>();
    let opener = Opener::of(&s, &mut parts, q.opt("token")).await?;
    let upgrade = upgrade.map_err(|e| {
        ApiError::new(
            Kind::Invalid,
            format!("Upgrade: this path speaks WebSocket only ({}); see docs/streams.md", e.body_text()),
        )
    })?;
    // Client frames are small: tungstenite's 128 KB read and write buffers were most of an idle
    // connection's memory (scripts/bench/streams.py).
    let upgrade = upgrade.max_message_size(MAX_FRAME).read_buffer_size(4096).write_buffer_size(8192);
    Ok(upgrade.on_upgrade(move |socket| async move {
        connection(s, opener, socket).await;
        drop(place);
    }))
}

struct Subscriptions {
    tasks: HashMap<String, JoinHandle<()>>,
    /// When the connection last had no subscription (None: it has one).
    empty_since: Option<Instant>,
}

async fn connection(s: AppState, opener: Opener, socket: WebSocket) {
    let (mut sink, mut source) = socket.split();
    let (tx, mut rx) = mpsc::channel::<String>(OUTBOX);
    let mut subs = Subscriptions { tasks: HashMap::new(), empty_since: Some(Instant::now()) };
    let mut ping = tokio::time::interval(KEEP_ALIVE);
    ping.tick().await;
    let close = loop {
        tokio::select! {
            Some(frame) = rx.recv() => {
                if sink.send(Message::Text(frame.into())).await.is_err() {
                    break None;
                }
            }
            incoming = source.next() => match incoming {
                Some(Ok(Message::Text(t))) => {
                    if let Some(frame) = request(&s, &opener, &mut subs, &tx, t.as_str()).await
                        && sink.send(Message::Text(frame.into())).await.is_err()
                    {
                        break None;
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    let e = ApiError::bad_request("frames are JSON text; binary frames are not understood");
                    if sink.send(Message::Text(error_frame(None, &e).into())).await.is_err() {
                        break None;
                    }
                }
                // Pings are answered by the socket itself; a close or an error ends the connection.
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                _ => break None,
            },
            _ = ping.tick() => {
                subs.tasks.retain(|_, t| !t.is_finished());
                if subs.tasks.is_empty() {
                    let since = *subs.empty_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= IDLE {
                        break Some(CloseFrame { code: 1000, reason: Utf8Bytes::from_static("idle: no subscription") });
                    }
                } else {
                    subs.empty_since = None;
                }
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    break None;
                }
            }
        }
    };
    for t in subs.tasks.values() {
        t.abort();
    }
    if let Some(c) = close {
        let _ = sink.send(Message::Close(Some(c))).await;
    }
}

/// Act on one client frame; the frame to answer at once, if any (a subscription's own frames
/// come from its task).
async fn request(
    s: &AppState,
    opener: &Opener,
    subs: &mut Subscriptions,
    tx: &mpsc::Sender<String>,
    text: &str,
) -> Option<String> {
    let req = match Request::parse(text) {
        Ok(r) => r,
        Err((id, e)) => return Some(error_frame(id.as_deref(), &e)),
    };
    subs.tasks.retain(|_, t| !t.is_finished());
    match req {
        Request::Unsubscribe { id } => Some(match subs.tasks.remove(&id) {
            Some(t) => {
                t.abort();
                frame(&id, "unsubscribed", json!(true))
            }
            None => {
                error_frame(Some(&id), &ApiError::not_found(format!("id: no subscription '{id}' on this connection")))
            }
        }),
        Request::Subscribe { id, filter, named, since } => {
            if subs.tasks.contains_key(&id) {
                return Some(error_frame(
                    Some(&id),
                    &ApiError::conflict(format!(
                        "id: subscription '{id}' is open on this connection; unsubscribe first"
                    )),
                ));
            }
            if subs.tasks.len() >= MAX_SUBSCRIPTIONS {
                return Some(error_frame(
                    Some(&id),
                    &ApiError::new(
                        Kind::TooMany,
                        format!(
                            "id: a connection holds at most {MAX_SUBSCRIPTIONS} subscriptions; unsubscribe one first"
                        ),
                    ),
                ));
            }
            let feed = match subscribe(s, opener, filter, named.as_deref(), since).await {
                Ok(f) => f,
                Err(e) => return Some(error_frame(Some(&id), &e)),
            };
            subs.empty_since = None;
            subs.tasks.insert(id.clone(), tokio::spawn(run(id, feed, tx.clone())));
            None
        }
    }
}

async fn subscribe(
    s: &AppState,
    opener: &Opener,
    asked: Filter,
    named: Option<&str>,
    since: Option<String>,
) -> Result<Feed, ApiError> {
    let filter = opener.filter(asked, named)?;
    let live = open(s.store.as_ref(), &opener.project, &filter, "since", since.as_deref()).await?;
    let mut feed = Feed::new(s.store.clone(), opener.project.clone(), live, since);
    feed.token = opener.token.as_ref().map(|(t, _)| t.clone());
    Ok(feed)
}

/// A subscription's frames into the connection's queue, until its feed ends or the connection
/// goes.
async fn run(id: String, mut feed: Feed, tx: mpsc::Sender<String>) {
    while let Some(item) = feed.next_item().await {
        let f = match item {
            Item::Open => frame(&id, "subscribed", json!(true)),
            // The body is the stored JSON: written as it is, never parsed again.
            Item::Message(m) => format!("{{\"subscription\":{},\"message\":{}}}", json!(id), m.body),
            Item::Closed { reason, message, last_event_id } => {
                frame(&id, "closed", json!({"reason": reason, "message": message, "last_event_id": last_event_id}))
            }
        };
        if tx.send(f).await.is_err() {
            return;
        }
    }
}

fn frame(id: &str, what: &str, v: Value) -> String {
    json!({"subscription": id, what: v}).to_string()
}

fn error_frame(id: Option<&str>, e: &ApiError) -> String {
    let status = shared::http_error::status(e.kind).as_u16();
    json!({"subscription": id, "error": {"status": status, "message": e.msg}}).to_string()
}

/// A client's frame.
#[derive(Debug, PartialEq)]
enum Request {
    Subscribe {
        id: String,
        filter: Filter,
        /// The first filter field the frame named (a token's subscription may repeat its filter).
        named: Option<String>,
        since: Option<String>,
    },
    Unsubscribe {
        id: String,
    },
}

const FILTER_FIELDS: [&str; 4] = ["user_id", "group_id", "trip_id", "events"];

impl Request {
    /// Parse a frame; an error names the field, with the subscription id when it was readable.
    fn parse(text: &str) -> Result<Self, (Option<String>, ApiError)> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| (None, ApiError::bad_request(format!("frame: not JSON ({e}); see docs/streams.md"))))?;
        let Value::Object(o) = v else {
            return Err((None, ApiError::bad_request("frame: a JSON object is expected")));
        };
        let id = match o.get("id") {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => s.clone(),
            Some(_) => return Err((None, ApiError::field("id", "must be a string of 1 to 64 characters"))),
            None => return Err((None, ApiError::field("id", "is required: the client's name for the subscription"))),
        };
        let fail = |e: ApiError| (Some(id.clone()), e);
        let allowed: &[&str] = match o.get("action").and_then(Value::as_str) {
            Some("subscribe") => &["action", "id", "filter", "since"],
            Some("unsubscribe") => &["action", "id"],
            _ => return Err(fail(ApiError::field("action", "must be 'subscribe' or 'unsubscribe'"))),
        };
        if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(fail(ApiError::field(
                k,
                format!("is not a field of this action; expected {}", allowed.join(", ")),
            )));
        }
        if allowed.len() == 2 {
            return Ok(Self::Unsubscribe { id });
        }
        let f = match o.get("filter") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(f)) => f.clone(),
            Some(_) => return Err(fail(ApiError::field("filter", "must be an object"))),
        };
        if let Some(k) = f.keys().find(|k| !FILTER_FIELDS.contains(&k.as_str())) {
            return Err(fail(ApiError::field(
                &format!("filter.{k}"),
                format!("is not a filter field; expected {}", FILTER_FIELDS.join(", ")),
            )));
        }
        let [user, group, trip, events] =
            FILTER_FIELDS.map(|k| string_field(&f, k, &format!("filter.{k}")).map_err(fail));
        let filter = Filter::parse(user?.as_deref(), group?.as_deref(), trip?.as_deref(), events?.as_deref())
            .map_err(|e| fail(ApiError { msg: format!("filter.{}", e.msg), ..e }))?;
        let named = FILTER_FIELDS.iter().find(|k| f.get(**k).is_some_and(|v| !v.is_null())).map(|k| (*k).to_owned());
        let since = string_field(&o, "since", "since").map_err(fail)?;
        Ok(Self::Subscribe { id, filter, named, since })
    }
}

/// A string field (absent or null: None); `name` is how errors name it.
fn string_field(o: &Map<String, Value>, key: &str, name: &str) -> Result<Option<String>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::field(name, "must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::domain::streams::Scope;

    fn err(text: &str) -> String {
        Request::parse(text).unwrap_err().1.msg
    }

    #[test]
    fn frames_parse_and_bad_ones_name_their_field() {
        let r = Request::parse(
            r#"{"action":"subscribe","id":"s1","filter":{"user_id":"u1","events":"geofence.entry"},"since":null}"#,
        )
        .unwrap();
        let Request::Subscribe { id, filter, named, since } = r else { panic!("{r:?}") };
        assert_eq!(
            (id.as_str(), filter.scope, named.as_deref(), since),
            ("s1", Scope::User("u1".into()), Some("user_id"), None)
        );
        assert_eq!(
            Request::parse(r#"{"action":"unsubscribe","id":"s1"}"#).unwrap(),
            Request::Unsubscribe { id: "s1".into() }
        );
        assert!(err("[1]").starts_with("frame"));
        assert!(err(r#"{"action":"subscribe"}"#).starts_with("id"));
        assert!(err(r#"{"action":"watch","id":"a"}"#).starts_with("action"));
        assert!(err(r#"{"action":"subscribe","id":"a","filter":{"user":"u"}}"#).starts_with("filter.user"));
        assert!(err(r#"{"action":"subscribe","id":"a","filter":{"events":"nope"}}"#).starts_with("filter.events[0]"));
        assert!(err(r#"{"action":"subscribe","id":"a","filter":{"trip_id":5}}"#).starts_with("filter.trip_id"));
        assert!(err(r#"{"action":"unsubscribe","id":"a","since":"x"}"#).starts_with("since"));
        assert_eq!(Request::parse(r#"{"action":"x","id":"a"}"#).unwrap_err().0.as_deref(), Some("a"));
    }
}
