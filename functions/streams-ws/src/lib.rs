//! Live streams on AWS (docs/streams.md, "AWS"): the handler of API Gateway's WebSocket API.
//!
//! - `$connect` authenticates the secret key (`Api-Key` header) or a stream token
//!   (`?token=wm_st_…`) and registers the connection (`domain::streams::connections`); a refusal
//!   is the HTTP status the handshake gets.
//! - `$disconnect` forgets it.
//! - Every message (`$default`: `{"action":"subscribe"|"unsubscribe",…}`,
//!   `domain::streams::protocol`) is answered with frames through the Management API: the
//!   acknowledgement or an error naming the field, then for a subscribe with `since` the stored
//!   messages after it, in id order, before the subscription takes live ones.
//!
//! Live messages are posted by whatever commits them (`connections::publish`).

use aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest;
use serde_json::{Value, json};
use shared::ApiError;
use shared::apigw::{Delivery, Poster};
use shared::domain::streams::connections::{self, Connection, Subscription};
use shared::domain::streams::protocol::{self, Request, Subscribe};
use shared::domain::streams::{Matcher, resume, tokens};
use shared::error::Kind;
use shared::store::Store;

/// Stored messages one subscribe sends at most, and the time it spends on them (the function's
/// timeout is 28 s): past either the subscription closes with `reason: replay_limit` and its
/// `last_event_id`, and the client subscribes again from it. (A replay cut short by a crash would
/// leave its subscription replaying, never live, until the connection ends.)
pub const MAX_REPLAY: usize = 2000;
pub const REPLAY_TIME: std::time::Duration = std::time::Duration::from_secs(15);

/// The Management API endpoint of the stage an event came through.
pub fn endpoint_of(e: &ApiGatewayWebsocketProxyRequest) -> String {
    let c = &e.request_context;
    format!("https://{}/{}", c.domain_name.as_deref().unwrap_or_default(), c.stage.as_deref().unwrap_or_default())
}

/// Answer one event of the WebSocket API.
pub async fn handle(store: &dyn Store, poster: &dyn Poster, e: ApiGatewayWebsocketProxyRequest) -> Value {
    let ctx = &e.request_context;
    let Some(conn) = ctx.connection_id.clone() else {
        return answer(&ApiError::bad_request("requestContext.connectionId: missing"));
    };
    match ctx.route_key.as_deref().unwrap_or("$default") {
        "$connect" => match connect(store, &conn, &e).await {
            Ok(()) => json!({"statusCode": 200}),
            Err(err) => answer(&err),
        },
        "$disconnect" => {
            if let Err(err) = connections::disconnect(store, &conn).await {
                // Its item expires with its TTL anyway.
                tracing::warn!(connection_id = %conn, error = %err.msg, "disconnect not recorded");
            }
            json!({"statusCode": 200})
        }
        _ => {
            let text = if e.is_base64_encoded { None } else { e.body.as_deref() };
            message(store, poster, &conn, text).await;
            json!({"statusCode": 200})
        }
    }
}

/// A refusal: its status, and the error frame as the body.
fn answer(err: &ApiError) -> Value {
    json!({"statusCode": err.kind.http_status(), "body": protocol::error(None, err)})
}

async fn connect(store: &dyn Store, conn: &str, e: &ApiGatewayWebsocketProxyRequest) -> Result<(), ApiError> {
    let q = &e.query_string_parameters;
    if let Some((k, _)) = q.iter().find(|(k, _)| *k != "token") {
        return Err(ApiError::field(k, "is not a parameter of the stream's URL; only token (a stream token)"));
    }
    let key = e.headers.get("api-key").and_then(|v| v.to_str().ok()).map(str::trim).filter(|k| !k.is_empty());
    let (p, token) = match (q.first("token"), key) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field("token", "give a stream token or the Api-Key header, not both"));
        }
        (Some(t), None) => match tokens::authenticate(store, t).await? {
            Some((p, filter)) => (p, Some((t, filter))),
            None => return Err(ApiError::unauthorized("token: not a live stream token (unknown, expired or revoked)")),
        },
        (None, Some(k)) => (shared::auth::secret_project(store, k).await?, None),
        (None, None) => {
            return Err(ApiError::unauthorized("Api-Key: header is required (or ?token= with a stream token)"));
        }
    };
    connections::connect(store, &p, conn, token).await.map(drop)
}

/// A client's message: answered with frames (a connection found gone is forgotten).
async fn message(store: &dyn Store, poster: &dyn Poster, conn: &str, text: Option<&str>) {
    let Some(text) = text else {
        let e = ApiError::bad_request("a message must be a text frame of JSON");
        return post(store, poster, conn, &protocol::error(None, &e)).await;
    };
    match protocol::parse(text) {
        Err(r) => post(store, poster, conn, &protocol::error(r.subscription.as_deref(), &r.error)).await,
        Ok(Request::Unsubscribe { id }) => {
            let removed = connections::update(store, conn, |c| {
                c.subscriptions
                    .remove(&id)
                    .map(drop)
                    .ok_or_else(|| ApiError::not_found(format!("id: no subscription '{id}' on this connection")))
            })
            .await;
            let frame = match removed {
                Ok(()) => protocol::unsubscribed(&id),
                Err(e) => protocol::error(Some(&id), &e),
            };
            post(store, poster, conn, &frame).await;
        }
        Ok(Request::Subscribe(s)) => {
            let id = s.id.clone();
            if let Err(e) = subscribe(store, poster, conn, s).await {
                post(store, poster, conn, &protocol::error(Some(&id), &e)).await;
            }
        }
    }
}

/// Post one frame; a connection gone is forgotten.
async fn post(store: &dyn Store, poster: &dyn Poster, conn: &str, frame: &str) {
    match poster.post(conn, frame).await {
        Ok(Delivery::Sent) => {}
        Ok(Delivery::Gone) => {
            if let Err(e) = connections::disconnect(store, conn).await {
                tracing::warn!(connection_id = %conn, error = %e.msg, "gone connection not forgotten");
            }
        }
        Err(e) => tracing::warn!(connection_id = %conn, error = %e, "post to connection failed"),
    }
}

/// Open a subscription: checked and resolved as a stream is, stored (live from then on, or
/// replaying), acknowledged, then its stored messages after `since`.
async fn subscribe(store: &dyn Store, poster: &dyn Poster, conn: &str, s: Subscribe) -> Result<(), ApiError> {
    let c = connections::get(store, conn).await?.ok_or_else(connections::unknown)?;
    let filter = s.filter_for(c.token_filter.as_ref())?;
    room_for(&c, &s.id)?;
    let p = c.project();
    let matcher = shared::domain::trips::stream_filter::resolve_filter(store, &p, &filter).await?;
    if let Some(since) = &s.since {
        resume::check(store, &p, "since", since).await?;
    }
    let sub = Subscription { filter, matcher: matcher.clone(), replaying: s.since.is_some() };
    let c = connections::update(store, conn, |c| {
        room_for(c, &s.id)?;
        c.subscriptions.insert(s.id.clone(), sub.clone());
        Ok(c.clone())
    })
    .await?;
    if connections::post_all(store, poster, &c, &[protocol::subscribed(&s.id)]).await? == 0 {
        return Ok(());
    }
    match s.since {
        Some(since) => replay(store, poster, &c, &s.id, &matcher, since).await,
        None => Ok(()),
    }
}

/// Whether connection `c` may open subscription `id` ([`connections::room_for`]).
fn room_for(c: &Connection, id: &str) -> Result<(), ApiError> {
    connections::room_for(c.subscriptions.len(), c.subscriptions.contains_key(id), id)
}

/// Send the stored messages after `since`, then let the subscription go live and send what was
/// committed meanwhile (fan-outs skip a replaying subscription, so the order holds).
async fn replay(
    store: &dyn Store,
    poster: &dyn Poster,
    c: &Connection,
    id: &str,
    matcher: &Matcher,
    since: String,
) -> Result<(), ApiError> {
    let p = c.project();
    let (mut cursor, mut last_sent, mut sent, mut live) = (since, None::<String>, 0, false);
    let started = std::time::Instant::now();
    loop {
        let page = resume::page(store, &p, &cursor).await?;
        let full = page.len() == resume::PAGE;
        if let Some(m) = page.last() {
            cursor = m.id.clone();
        }
        for m in page.iter().filter(|m| matcher.matches(m)) {
            if sent == MAX_REPLAY || started.elapsed() > REPLAY_TIME {
                let why = format!(
                    "a subscribe sends at most {MAX_REPLAY} stored messages in {} s; subscribe again from last_event_id",
                    REPLAY_TIME.as_secs()
                );
                return close(store, poster, c, id, "replay_limit", &why, last_sent.as_deref()).await;
            }
            if connections::post_all(store, poster, c, &[protocol::message(id, &m.body)]).await? == 0 {
                // Gone (forgotten), or not sent: the client resumes from what it got.
                return close_quietly(store, c, id).await;
            }
            last_sent = Some(m.id.clone());
            sent += 1;
        }
        if full {
            continue;
        }
        if live {
            return Ok(());
        }
        // Live from now on; one more read sends what was committed before this write.
        let still = connections::update(store, &c.connection_id, |c| {
            Ok(c.subscriptions.get_mut(id).map(|s| s.replaying = false).is_some())
        })
        .await?;
        if !still {
            return Ok(());
        }
        live = true;
    }
}

/// End a subscription from the server's side: its `closed` frame, and it is removed.
async fn close(
    store: &dyn Store,
    poster: &dyn Poster,
    c: &Connection,
    id: &str,
    reason: &str,
    why: &str,
    last: Option<&str>,
) -> Result<(), ApiError> {
    close_quietly(store, c, id).await?;
    connections::post_all(store, poster, c, &[protocol::closed(id, reason, why, last)]).await.map(drop)
}

async fn close_quietly(store: &dyn Store, c: &Connection, id: &str) -> Result<(), ApiError> {
    match connections::update(store, &c.connection_id, |c| Ok(c.subscriptions.remove(id).map(drop))).await {
        Err(e) if e.kind == Kind::Gone => Ok(()),
        other => other.map(drop),
    }
}
