//! Live streams in `waymark serve` (docs/streams.md): Server-Sent Events at
//! `GET /v1/api/streams/sse/` ([`sse`]) and a WebSocket at `GET /v1/api/streams/ws/` ([`ws`]),
//! opened with the secret key or with a stream token minted at `/v1/api/streams/tokens/`
//! (browsers; the keys function's, as on AWS). Both carry the same [`feed::Feed`]: the stored messages after the client's resume
//! id, then live ones.

mod feed;
mod sse;
mod ws;

use std::time::Duration;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::routing::get;
use shared::auth::SecretKey;
use shared::domain::streams::hub::{self, Subscription};
use shared::domain::streams::{Filter, Matcher, Scope, resume, tokens};
use shared::domain::trips::stream_filter::resolve_filter;
use shared::http::route;
use shared::project::Project;
use shared::store::Store;
use shared::{ApiError, AppState};

pub use feed::{Feed, Item};

/// A comment (SSE) or a ping (WebSocket) on a quiet stream this often, so proxies and clients
/// keep it open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a client waits before it reconnects (the SSE `retry` field).
pub const RETRY: Duration = Duration::from_secs(2);
/// Ids remembered per stream to skip a message sent twice (a redone processor pass, or one both
/// stored and live at the switch from resuming to live).
pub const DEDUP: usize = 256;

/// How often an open stream of a token checks that the token still holds (revoked or expired:
/// the stream closes at its next message).
pub const TOKEN_CHECK: Duration = Duration::from_secs(1);
/// How often a quiet stream of a token checks it (and its trip: a trip's token ends with it).
pub const TOKEN_IDLE_CHECK: Duration = Duration::from_secs(2);

/// The WebSocket's path (`guard` keeps an upgraded connection's place in the connection limit).
pub const WS_PATH: &str = "/v1/api/streams/ws";
/// The WebSocket's documented path (the tracking page opens it).
pub const WS_PATH_SLASH: &str = "/v1/api/streams/ws/";

pub fn router() -> Router<AppState> {
    let r = route(Router::new(), "/v1/api/streams/sse/", get(sse::sse));
    route(r, "/v1/api/streams/ws/", get(ws::ws))
}

/// The query parameters of a stream: its filter, the resume id of a first connection, and a
/// stream token instead of the `Api-Key` header.
pub const PARAMS: &[&str] = &["user_id", "group_id", "trip_id", "events", "since", "token"];
const FILTER_PARAMS: [&str; 4] = ["user_id", "group_id", "trip_id", "events"];

/// Who opens a stream: a project by its secret key (any filter of the project), or by a stream
/// token (its own filter only; the token is checked again while the stream is open).
pub struct Opener {
    pub project: Project,
    pub token: Option<(String, Filter)>,
}

impl Opener {
    /// The `Api-Key` header or the `token` query parameter, not both.
    async fn of(s: &AppState, parts: &mut Parts, token: Option<&str>) -> Result<Self, ApiError> {
        let Some(t) = token else {
            return Ok(Self { project: SecretKey::from_request_parts(parts, s).await?.0, token: None });
        };
        if parts.headers.contains_key("api-key") {
            return Err(ApiError::field("token", "give a stream token or the Api-Key header, not both"));
        }
        let Some((project, filter)) = tokens::authenticate(s.store.as_ref(), t).await? else {
            return Err(ApiError::unauthorized("token: not a live stream token (unknown, expired or revoked)"));
        };
        Ok(Self { project, token: Some((t.to_owned(), filter)) })
    }

    /// The filter a subscription gets (`Filter::within_token`).
    fn filter(&self, asked: Filter, named: Option<&str>) -> Result<Filter, ApiError> {
        asked.within_token(named, self.token.as_ref().map(|(_, f)| f))
    }
}

/// What a new stream needs: its matcher and its live subscription, taken before the resume reads
/// the store, so nothing committed in between is missed.
pub struct Live {
    pub matcher: Matcher,
    pub sub: Subscription,
    /// The trip of a trip's subscription.
    pub trip_id: Option<String>,
}

pub async fn open(
    store: &dyn Store,
    p: &Project,
    filter: &Filter,
    field: &str,
    after: Option<&str>,
) -> Result<Live, ApiError> {
    let matcher = resolve_filter(store, p, filter).await?;
    if let Some(a) = after {
        resume::check(store, p, field, a).await?;
    }
    // A user's subscription hears that user's channel only; the others the project's.
    let route = match &filter.scope {
        Scope::User(u) => hub::Route::User(u.clone()),
        _ => hub::Route::All,
    };
    let sub = hub::hub().subscribe(&p.project_id, route, hub::MAX_PER_PROJECT)?;
    let trip_id = match &filter.scope {
        Scope::Trip(t) => Some(t.clone()),
        _ => None,
    };
    Ok(Live { matcher, sub, trip_id })
}
