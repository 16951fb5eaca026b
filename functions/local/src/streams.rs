//! Live streams in `waymark serve` (docs/streams.md): Server-Sent Events at
//! `GET /v1/api/streams/sse/`, opened with the secret key or with a stream token minted at
//! `/v1/api/streams/tokens/` (browsers). A stream first sends the stored messages after the client's resume
//! id (`Last-Event-ID`, or `since` on the first connection), then live ones as the processor
//! commits them (`shared::domain::streams::hub`), skipping any id it has just sent. A subscriber
//! that falls [`hub::QUEUE`] messages behind gets a `closed` event with the reason and its last
//! id, and resumes from it.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::streams::hub::{self, Subscription};
use shared::domain::streams::{Filter, Matcher, Scope, StreamMessage, resume, tokens};
use shared::domain::trips::{self, Api};
use shared::error::Kind;
use shared::http::route;
use shared::project::Project;
use shared::store::Store;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};
use tokio::sync::broadcast::error::RecvError;

/// A comment on a quiet stream this often, so proxies and clients keep it open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a client waits before it reconnects (the SSE `retry` field).
pub const RETRY: Duration = Duration::from_secs(2);
/// Ids remembered per stream to skip a message sent twice (a redone processor pass, or one both
/// stored and live at the switch from resuming to live).
pub const DEDUP: usize = 256;

/// How often an open stream of a token checks that the token still holds (revoked or expired:
/// the stream closes at its next message).
pub const TOKEN_CHECK: Duration = Duration::from_secs(1);

pub const ROUTES: &[(&str, &str)] =
    &[("GET", "/v1/api/streams/sse/"), ("POST", "/v1/api/streams/tokens/"), ("DELETE", "/v1/api/streams/tokens/")];

pub fn router() -> Router<AppState> {
    let r = route(Router::new(), "/v1/api/streams/sse/", get(sse));
    route(r, "/v1/api/streams/tokens/", post(mint).delete(revoke))
}

/// The query parameters of a stream: its filter, the resume id of a first connection, and a
/// stream token instead of the `Api-Key` header.
pub const PARAMS: &[&str] = &["user_id", "group_id", "trip_id", "events", "since", "token"];
const FILTER_PARAMS: [&str; 4] = ["user_id", "group_id", "trip_id", "events"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewToken {
    user_id: Option<String>,
    group_id: Option<String>,
    trip_id: Option<String>,
    events: Option<String>,
    ttl_seconds: Option<Value>,
}

/// Mint a stream token for one filter, checked against the project as a stream checks it.
async fn mint(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<NewToken>,
) -> Result<Envelope<Value>, ApiError> {
    let filter = Filter::parse(b.user_id.as_deref(), b.group_id.as_deref(), b.trip_id.as_deref(), b.events.as_deref())?;
    let ttl = tokens::parse_ttl(b.ttl_seconds.as_ref())?;
    open_matcher(s.store.as_ref(), &p, &filter).await?;
    let minted = tokens::mint(s.store.as_ref(), &p, filter, ttl).await?;
    Ok(Envelope::created("Stream token created; it is shown only now", minted.json))
}

async fn revoke(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&["token_id"])?;
    let id = q.required("token_id")?;
    tokens::revoke(s.store.as_ref(), &p, id).await?;
    Ok(Envelope::ok("Stream token revoked", json!({"token_id": id})))
}

async fn sse(
    State(s): State<AppState>,
    mut parts: Parts,
    q: Params,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    q.only(PARAMS)?;
    let asked = Filter::parse(q.opt("user_id"), q.opt("group_id"), q.opt("trip_id"), q.opt("events"))?;
    let (p, filter, token) = match q.opt("token") {
        None => (SecretKey::from_request_parts(&mut parts, &s).await?.0, asked, None),
        Some(t) => {
            if parts.headers.contains_key("api-key") {
                return Err(ApiError::field("token", "give a stream token or the Api-Key header, not both"));
            }
            let Some((p, filter)) = tokens::authenticate(s.store.as_ref(), t).await? else {
                return Err(ApiError::unauthorized("token: not a live stream token (unknown, expired or revoked)"));
            };
            // A token opens its own filter only; a URL may repeat it, not ask for another.
            let named = FILTER_PARAMS.iter().find(|f| q.opt(f).is_some());
            if let Some(f) = named
                && asked != filter
            {
                return Err(ApiError::forbidden(format!("{f}: this stream token opens another subscription only")));
            }
            (p, filter, Some(t.to_owned()))
        }
    };
    let headers = &parts.headers;
    // The browser's reconnection names the last id it saw; it wins over the URL's `since`.
    let (field, after) = match headers.get("last-event-id").map(|v| v.to_str().map(str::trim)) {
        Some(Ok(v)) if !v.is_empty() => ("Last-Event-ID", Some(v.to_owned())),
        Some(Err(_)) => return Err(ApiError::field("Last-Event-ID", "is not text")),
        _ => ("since", q.opt("since").map(str::to_owned)),
    };
    let live = open(s.store.as_ref(), &p, &filter, field, after.as_deref()).await?;
    let mut feed = Feed::new(s.store.clone(), p, live, after);
    feed.token = token;
    let stream = futures::stream::unfold(feed, |mut f| async move { f.next().await.map(|e| (Ok(e), f)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// What a new stream needs: its matcher and its live subscription, taken before the resume reads
/// the store, so nothing committed in between is missed.
pub struct Live {
    pub matcher: Matcher,
    pub sub: Subscription,
}

pub async fn open(
    store: &dyn Store,
    p: &Project,
    filter: &Filter,
    field: &str,
    after: Option<&str>,
) -> Result<Live, ApiError> {
    let matcher = open_matcher(store, p, filter).await?;
    if let Some(a) = after {
        resume::check(store, p, field, a).await?;
    }
    let sub = hub::hub().subscribe(&p.project_id, hub::MAX_PER_PROJECT)?;
    Ok(Live { matcher, sub })
}

/// The filter resolved against the project: 404 when it names nothing of it.
async fn open_matcher(store: &dyn Store, p: &Project, filter: &Filter) -> Result<Matcher, ApiError> {
    Ok(match &filter.scope {
        Scope::Trip(t) => {
            let trip = match trips::get(store, p, Api::V1, t).await {
                Err(e) if e.kind == Kind::NotFound => trips::get(store, p, Api::V2, t).await?,
                other => other?,
            };
            Matcher::trip(trip.id, trip.user_id, filter.types.clone())
        }
        _ => filter.resolve(store, p).await?,
    })
}

/// A stream's messages: the stored ones after the resume id, then live ones.
pub struct Feed {
    store: Arc<dyn Store>,
    p: Project,
    live: Live,
    /// The resume cursor while stored messages remain to be read.
    resuming: Option<String>,
    page: VecDeque<StreamMessage>,
    sent: Recent,
    last: Option<String>,
    started: bool,
    done: bool,
    /// The id sent before the last one (where a stream closed before the last one resumes).
    prev: Option<String>,
    /// The stream token it was opened with (checked every [`TOKEN_CHECK`]), if any.
    pub token: Option<String>,
    token_checked: Instant,
}

/// What a feed yields, before a transport frames it.
pub enum Item {
    /// The first frame: the stream is subscribed.
    Open,
    Message(StreamMessage),
    /// The last frame: why the stream ends, and where to resume.
    Closed {
        reason: &'static str,
        message: String,
        last_event_id: Option<String>,
    },
}

impl Feed {
    pub fn new(store: Arc<dyn Store>, p: Project, live: Live, after: Option<String>) -> Self {
        Self {
            store,
            p,
            live,
            last: after.clone(),
            resuming: after,
            page: VecDeque::new(),
            sent: Recent::default(),
            started: false,
            done: false,
            prev: None,
            token: None,
            token_checked: Instant::now(),
        }
    }

    /// Whether the stream's token (if any) still holds, read at most every [`TOKEN_CHECK`].
    async fn token_holds(&mut self) -> bool {
        let Some(t) = &self.token else { return true };
        if self.token_checked.elapsed() < TOKEN_CHECK {
            return true;
        }
        self.token_checked = Instant::now();
        match tokens::authenticate(self.store.as_ref(), t).await {
            Ok(found) => found.is_some(),
            // Unknown, not refused: the next message checks again.
            Err(e) => {
                tracing::warn!(error = %e.msg, "stream token check failed");
                true
            }
        }
    }

    /// The next item, or None when the stream has ended.
    pub async fn next_item(&mut self) -> Option<Item> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            return Some(Item::Open);
        }
        loop {
            if let Some(m) = self.page.pop_front() {
                if let Some(m) = self.keep(m) {
                    return Some(self.deliver(m).await);
                }
                continue;
            }
            if let Some(after) = self.resuming.take() {
                match resume::page(self.store.as_ref(), &self.p, &after).await {
                    Ok(page) => {
                        if page.len() == resume::PAGE {
                            self.resuming = page.last().map(|m| m.id.clone());
                        }
                        self.page = page.into();
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e.msg, "stream resume failed");
                        return Some(self.close("error", "the stored events could not be read; reconnect".into()));
                    }
                }
            }
            match self.live.sub.rx.recv().await {
                Ok(m) => {
                    if let Some(m) = self.keep((*m).clone()) {
                        return Some(self.deliver(m).await);
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    return Some(self.close(
                        "lagging",
                        format!(
                            "this stream fell more than {} messages behind ({n} skipped); resume from last_event_id",
                            hub::QUEUE
                        ),
                    ));
                }
                Err(RecvError::Closed) => return Some(self.close("shutdown", "the server is stopping".into())),
            }
        }
    }

    fn keep(&mut self, m: StreamMessage) -> Option<StreamMessage> {
        if !self.live.matcher.matches(&m) || !self.sent.insert(&m.id) {
            return None;
        }
        self.prev = self.last.replace(m.id.clone());
        Some(m)
    }

    /// A message to send, unless the stream's token no longer holds (then the stream closes,
    /// its last id the one before this message).
    async fn deliver(&mut self, m: StreamMessage) -> Item {
        if self.token_holds().await {
            return Item::Message(m);
        }
        self.last = self.prev.take();
        self.close("revoked", "the stream token was revoked or has expired; mint a new one".into())
    }

    fn close(&mut self, reason: &'static str, message: String) -> Item {
        self.done = true;
        Item::Closed { reason, message, last_event_id: self.last.clone() }
    }

    /// The next SSE event.
    async fn next(&mut self) -> Option<Event> {
        Some(match self.next_item().await? {
            Item::Open => Event::default().retry(RETRY).comment("subscribed"),
            Item::Message(m) => Event::default().id(m.id.as_str()).data(&*m.body),
            Item::Closed { reason, message, last_event_id } => Event::default()
                .event("closed")
                .data(json!({"reason": reason, "message": message, "last_event_id": last_event_id}).to_string()),
        })
    }
}

/// The last [`DEDUP`] ids sent.
#[derive(Default)]
struct Recent {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Recent {
    /// Whether `id` is new (then it is remembered).
    fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() == DEDUP
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.order.push_back(id.to_owned());
        self.set.insert(id.to_owned());
        true
    }
}
