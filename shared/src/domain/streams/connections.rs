//! Streams on AWS: API Gateway's WebSocket API holds the connections, the store holds what each
//! one subscribed to, and whatever commits messages posts them to the project's connections
//! through the Management API (docs/streams.md, "AWS").
//!
//! - `<project>#WS`, sort key the connection id: a [`Connection`] (its key or token, its
//!   subscriptions with their resolved matchers), TTL two hours (API Gateway's own limit);
//! - `WSCONN#<connection id>`, sort key `-`: its project, since `$disconnect` and the messages
//!   carry only the connection id.
//!
//! [`publish`] is what a committed pass calls: the process's hub, then (only where a [`Poster`]
//! is installed: a WebSocket endpoint is configured) one Query of the project's connections and a
//! post per matching message and subscription; a connection answered 410 is deleted.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Filter, Matcher, StreamMessage, protocol, tokens};
use crate::apigw::{Delivery, Poster};
use crate::domain::webhooks::outbox::Message;
use crate::error::{ApiError, Kind};
use crate::expiry::TTL_ATTRIBUTE;
use crate::project::{KeyKind, Project};
use crate::store::{Cond, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;

/// How long a connection is kept: API Gateway closes every connection after two hours.
pub const TTL_SECONDS: i64 = 2 * 3600;
/// WebSocket connections open at once per project (all its keys and tokens together).
pub const MAX_PER_PROJECT: usize = 1000;
/// Subscriptions per connection (on either transport: API Gateway's and `waymark serve`'s).
pub const MAX_SUBSCRIPTIONS: usize = 20;

/// Whether a connection holding `open` subscriptions, `id` among them or not (`has`), may open
/// subscription `id`: a new id, within [`MAX_SUBSCRIPTIONS`].
pub fn room_for(open: usize, has: bool, id: &str) -> Result<(), ApiError> {
    if has {
        return Err(ApiError::new(
            Kind::Conflict,
            format!("id: subscription '{id}' is open on this connection; unsubscribe it first or choose another id"),
        ));
    }
    if open >= MAX_SUBSCRIPTIONS {
        return Err(ApiError::new(
            Kind::TooMany,
            format!("id: a connection has at most {MAX_SUBSCRIPTIONS} subscriptions; unsubscribe one first"),
        ));
    }
    Ok(())
}

const SK: &str = "-";

fn pk(project_id: &str) -> String {
    [project_id, "#WS"].concat()
}

fn reverse_pk(connection_id: &str) -> String {
    ["WSCONN#", connection_id].concat()
}

/// A WebSocket connection as the store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Connection {
    pub connection_id: String,
    pub project_id: String,
    pub account_id: String,
    /// The hash of the stream token it was opened with (checked before posting).
    pub token_hash: Option<String>,
    /// That token's filter: the only one its subscriptions may open.
    pub token_filter: Option<Filter>,
    #[serde(default)]
    pub subscriptions: BTreeMap<String, Subscription>,
    #[serde(default)]
    pub version: u64,
    /// When the store lets it go (epoch seconds): kept as it was set at `$connect`.
    pub expires_s: i64,
}

/// A subscription of a connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subscription {
    pub filter: Filter,
    pub matcher: Matcher,
    /// Set while its subscribe still sends stored messages (`since`): fan-outs leave it alone so
    /// its messages go out in id order; the subscribe sends what was committed meanwhile.
    #[serde(default)]
    pub replaying: bool,
}

impl Connection {
    /// The project, acting as its secret key does for streams.
    pub fn project(&self) -> Project {
        Project { project_id: self.project_id.clone(), account_id: self.account_id.clone(), kind: KeyKind::Secret }
    }
}

#[derive(Serialize, Deserialize)]
struct Reverse {
    project_id: String,
}

/// What a connection no longer registered answers (over two hours old, or closed).
pub fn unknown() -> ApiError {
    ApiError::new(Kind::Gone, "connection: this connection is no longer open (over 2 hours old, or closed); reconnect")
}

/// Register a new connection of project `p`, opened with the secret key or a stream token
/// (`token`: the token and its filter). 429 past [`MAX_PER_PROJECT`].
pub async fn connect(
    store: &dyn Store,
    p: &Project,
    connection_id: &str,
    token: Option<(&str, Filter)>,
) -> Result<Connection, ApiError> {
    let open = store.count(Table::Main, &pk(&p.project_id), &SkRange::All).await?;
    if open >= MAX_PER_PROJECT {
        return Err(ApiError::new(
            Kind::TooMany,
            format!("connections: a project has at most {MAX_PER_PROJECT} WebSocket connections open at once"),
        ));
    }
    let (token_hash, token_filter) = match token {
        Some((t, f)) => (Some(crate::domain::keys::hash_secret(t)), Some(f)),
        None => (None, None),
    };
    let c = Connection {
        connection_id: connection_id.to_owned(),
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        token_hash,
        token_filter,
        subscriptions: BTreeMap::new(),
        version: 1,
        expires_s: Timestamp::now().0.timestamp() + TTL_SECONDS,
    };
    let mut item = to_item(&pk(&c.project_id), connection_id, &c)?;
    item.insert(TTL_ATTRIBUTE.into(), json!(c.expires_s));
    let mut reverse = to_item(&reverse_pk(connection_id), SK, &Reverse { project_id: c.project_id.clone() })?;
    reverse.insert(TTL_ATTRIBUTE.into(), json!(c.expires_s));
    store
        .transact(vec![
            WriteOp::Put { table: Table::Main, item, cond: Cond::None },
            WriteOp::Put { table: Table::Main, item: reverse, cond: Cond::None },
        ])
        .await?;
    Ok(c)
}

/// The connection, if it is still registered.
pub async fn get(store: &dyn Store, connection_id: &str) -> Result<Option<Connection>, ApiError> {
    let Some(r) = store.get(Table::Main, &reverse_pk(connection_id), SK).await? else { return Ok(None) };
    let r: Reverse = from_item(r)?;
    let item = store.get(Table::Main, &pk(&r.project_id), connection_id).await?;
    Ok(item.map(from_item).transpose()?)
}

/// Forget a connection (`$disconnect`, or gone when posted to). Whether it was registered.
pub async fn disconnect(store: &dyn Store, connection_id: &str) -> Result<bool, ApiError> {
    let Some(r) = store.get(Table::Main, &reverse_pk(connection_id), SK).await? else { return Ok(false) };
    let r: Reverse = from_item(r)?;
    remove(store, &r.project_id, connection_id).await?;
    Ok(true)
}

async fn remove(store: &dyn Store, project_id: &str, connection_id: &str) -> Result<(), ApiError> {
    store
        .transact(vec![
            WriteOp::Delete { table: Table::Main, pk: pk(project_id), sk: connection_id.to_owned(), cond: Cond::None },
            WriteOp::Delete { table: Table::Main, pk: reverse_pk(connection_id), sk: SK.into(), cond: Cond::None },
        ])
        .await?;
    Ok(())
}

/// Change a connection: `change` is applied to it as stored and written back if the connection
/// is unchanged meanwhile (else read and applied again). A connection no longer registered is
/// [`unknown`].
pub async fn update<T>(
    store: &dyn Store,
    connection_id: &str,
    mut change: impl FnMut(&mut Connection) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    for _ in 0..8 {
        let mut c = get(store, connection_id).await?.ok_or_else(unknown)?;
        let out = change(&mut c)?;
        let version = c.version;
        c.version += 1;
        let mut item = to_item(&pk(&c.project_id), connection_id, &c)?;
        item.insert(TTL_ATTRIBUTE.into(), json!(c.expires_s));
        match store.put(Table::Main, item, Cond::Equals("version", version.into())).await {
            Ok(()) => return Ok(out),
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("connection: changed by too many messages at once; send it again"))
}

/// The project's registered connections (one Query).
pub async fn of_project(store: &dyn Store, project_id: &str) -> Result<Vec<Connection>, ApiError> {
    let items = store.query(Table::Main, &Query::new(pk(project_id), SkRange::All)).await?.items;
    items.into_iter().map(|i| Ok(from_item(i)?)).collect()
}

// ---------------------------------------------------------------------------------------------
// Posting

static INSTALLED: OnceLock<Arc<dyn Poster>> = OnceLock::new();

tokio::task_local! {
    static SCOPED: Arc<dyn Poster>;
}

/// Post committed messages to the WebSocket API's connections from now on, in this process (a
/// Lambda function whose `WAYMARK_WS_ENDPOINT` is set). The first call wins.
pub fn install(poster: Arc<dyn Poster>) {
    let _ = INSTALLED.set(poster);
}

/// Run `f` with `poster` as the one [`publish`] posts through (tests: one endpoint per test).
pub async fn with_poster<F: Future>(poster: Arc<dyn Poster>, f: F) -> F::Output {
    SCOPED.scope(poster, f).await
}

fn poster() -> Option<Arc<dyn Poster>> {
    SCOPED.try_with(Arc::clone).ok().or_else(|| INSTALLED.get().cloned())
}

/// Hand committed messages to live streams: this process's subscribers (`hub`) and, where a
/// poster is installed, the project's WebSocket connections. Never fails the commit it follows:
/// a failed post is logged (the client resumes from its last id).
pub async fn publish(store: &dyn Store, project_id: &str, messages: &[Message]) {
    super::hub::publish(project_id, messages);
    if messages.is_empty() {
        return;
    }
    let Some(poster) = poster() else { return };
    let mut sorted: Vec<StreamMessage> = messages.iter().map(StreamMessage::of).collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    if let Err(e) = fan_out(store, poster.as_ref(), project_id, &sorted).await {
        tracing::warn!(project_id, error = %e.msg, "stream fan-out failed");
    }
}

/// Post `messages` (in id order) to each connection of the project whose live subscriptions
/// match them. Frames the connection's token no longer allows are not sent: its subscriptions
/// close (`revoked`) and the connection is hung up. Connections answered 410 are deleted.
pub async fn fan_out(
    store: &dyn Store,
    poster: &dyn Poster,
    project_id: &str,
    messages: &[StreamMessage],
) -> Result<usize, ApiError> {
    let mut sent = 0;
    for c in of_project(store, project_id).await? {
        let frames: Vec<String> = messages
            .iter()
            .flat_map(|m| {
                c.subscriptions
                    .iter()
                    .filter(|(_, s)| !s.replaying && s.matcher.matches(m))
                    .map(|(id, _)| protocol::message(id, &m.body))
            })
            .collect();
        if frames.is_empty() {
            continue;
        }
        if let Some(hash) = &c.token_hash
            && !tokens::live_hash(store, hash).await?
        {
            revoked(store, poster, &c).await?;
            continue;
        }
        sent += post_all(store, poster, &c, &frames).await?;
    }
    Ok(sent)
}

/// Post frames to one connection in order; a connection gone is deleted (the rest not sent).
/// How many went out.
pub async fn post_all(
    store: &dyn Store,
    poster: &dyn Poster,
    c: &Connection,
    frames: &[String],
) -> Result<usize, ApiError> {
    for (i, f) in frames.iter().enumerate() {
        match poster.post(&c.connection_id, f).await {
            Ok(Delivery::Sent) => {}
            Ok(Delivery::Gone) => {
                remove(store, &c.project_id, &c.connection_id).await?;
                return Ok(i);
            }
            Err(e) => {
                // Not known to be gone: the next message tries again; the client resumes.
                tracing::warn!(connection_id = %c.connection_id, error = %e, "post to connection failed");
                return Ok(i);
            }
        }
    }
    Ok(frames.len())
}

/// A connection whose token was revoked or expired: each subscription gets its `closed` frame,
/// then the connection is hung up and forgotten.
async fn revoked(store: &dyn Store, poster: &dyn Poster, c: &Connection) -> Result<(), ApiError> {
    let frames: Vec<String> = c
        .subscriptions
        .keys()
        .map(|id| protocol::closed(id, "revoked", "the stream token was revoked or has expired; mint a new one", None))
        .collect();
    post_all(store, poster, c, &frames).await?;
    if let Err(e) = poster.hang_up(&c.connection_id).await {
        tracing::warn!(connection_id = %c.connection_id, error = %e, "hanging up failed");
    }
    remove(store, &c.project_id, &c.connection_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_needs_a_new_id_and_room() {
        assert!(room_for(0, false, "s1").is_ok());
        assert!(room_for(MAX_SUBSCRIPTIONS - 1, false, "s1").is_ok());
        let taken = room_for(3, true, "s1").unwrap_err();
        assert_eq!((taken.kind.http_status(), taken.msg.starts_with("id: subscription 's1'")), (409, true));
        let full = room_for(MAX_SUBSCRIPTIONS, false, "s2").unwrap_err();
        assert_eq!((full.kind.http_status(), full.msg.starts_with("id: ")), (429, true), "{}", full.msg);
    }
}
