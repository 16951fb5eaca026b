//! Server-Sent Events at `GET /v1/api/streams/sse/` (docs/streams.md): one subscription per
//! connection, its filter in the query, opened with the secret key or a stream token.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::request::Parts;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde_json::json;
use shared::domain::streams::Filter;
use shared::{ApiError, AppState, Params};

use super::feed::{Feed, Item};
use super::{FILTER_PARAMS, KEEP_ALIVE, Opener, PARAMS, RETRY, open};

pub(super) async fn sse(
    State(s): State<AppState>,
    mut parts: Parts,
    q: Params,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    q.only(PARAMS)?;
    let asked = Filter::parse(q.opt("user_id"), q.opt("group_id"), q.opt("trip_id"), q.opt("events"))?;
    let opener = Opener::of(&s, &mut parts, q.opt("token")).await?;
    let filter = opener.filter(asked, FILTER_PARAMS.into_iter().find(|f| q.opt(f).is_some()))?;
    let headers = &parts.headers;
    // The browser's reconnection names the last id it saw; it wins over the URL's `since`.
    let (field, after) = match headers.get("last-event-id").map(|v| v.to_str().map(str::trim)) {
        Some(Ok(v)) if !v.is_empty() => ("Last-Event-ID", Some(v.to_owned())),
        Some(Err(_)) => return Err(ApiError::field("Last-Event-ID", "is not text")),
        _ => ("since", q.opt("since").map(str::to_owned)),
    };
    let live = open(s.store.as_ref(), &opener.project, &filter, field, after.as_deref()).await?;
    let mut feed = Feed::new(s.store.clone(), opener.project, live, after);
    feed.token = opener.token.map(|(t, _)| t);
    let stream = futures::stream::unfold(feed, |mut f| async move { next(&mut f).await.map(|e| (Ok(e), f)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// The next SSE event of a feed.
async fn next(feed: &mut Feed) -> Option<Event> {
    Some(match feed.next_item().await? {
        Item::Open => Event::default().retry(RETRY).comment("subscribed"),
        Item::Message(m) => Event::default().id(m.id.as_str()).data(&*m.body),
        Item::Closed { reason, message, last_event_id } => Event::default()
            .event("closed")
            .data(json!({"reason": reason, "message": message, "last_event_id": last_event_id}).to_string()),
    })
}
