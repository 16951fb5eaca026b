//! The WebSocket at `GET /v1/api/streams/ws/` (docs/streams.md): one connection, any number of
//! subscriptions up to [`connections::MAX_SUBSCRIPTIONS`], each a [`Feed`] as an SSE stream is.
//! The client sends `{"action":"subscribe","id":"s1","filter":{…},"since":"<event id>"}` and
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
use shared::domain::streams::connections;
use shared::domain::streams::protocol::{self, Request, Subscribe};
use shared::error::Kind;
use shared::{ApiError, AppState, Params};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::guard::ConnectionPlace;

use super::{KEEP_ALIVE, Opener, feed::Feed, feed::Item, open};

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
                    if sink.send(Message::Text(protocol::error(None, &e).into())).await.is_err() {
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
    let req = match protocol::parse(text) {
        Ok(r) => r,
        Err(r) => return Some(protocol::error(r.subscription.as_deref(), &r.error)),
    };
    subs.tasks.retain(|_, t| !t.is_finished());
    match req {
        Request::Unsubscribe { id } => Some(match subs.tasks.remove(&id) {
            Some(t) => {
                t.abort();
                protocol::unsubscribed(&id)
            }
            None => protocol::error(
                Some(&id),
                &ApiError::not_found(format!("id: no subscription '{id}' on this connection")),
            ),
        }),
        Request::Subscribe(sub) => {
            let id = sub.id.clone();
            if let Err(e) = connections::room_for(subs.tasks.len(), subs.tasks.contains_key(&id), &id) {
                return Some(protocol::error(Some(&id), &e));
            }
            let feed = match subscribe(s, opener, &sub).await {
                Ok(f) => f,
                Err(e) => return Some(protocol::error(Some(&id), &e)),
            };
            subs.empty_since = None;
            subs.tasks.insert(id.clone(), tokio::spawn(run(id, feed, tx.clone())));
            None
        }
    }
}

async fn subscribe(s: &AppState, opener: &Opener, sub: &Subscribe) -> Result<Feed, ApiError> {
    let filter = sub.filter_for(opener.token.as_ref().map(|(_, f)| f))?;
    let since = sub.since.clone();
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
            Item::Open => protocol::subscribed(&id),
            // The body is the stored JSON: written as it is, never parsed again.
            Item::Message(m) => protocol::message(&id, &m.body),
            Item::Closed { reason, message, last_event_id } => {
                protocol::closed(&id, reason, &message, last_event_id.as_deref())
            }
        };
        if tx.send(f).await.is_err() {
            return;
        }
    }
}
