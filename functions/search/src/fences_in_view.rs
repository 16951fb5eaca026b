//! The geofences in a map's view: `GET /v1/api/geofences/in-view/?bbox=<west>,<south>,<east>,<north>`
//! (degrees, as the users' `/v1/api/users/positions/`), each fence meeting the box once, with
//! what a map draws of it, `limit` at most (1 to 5,000, default 2,000; `truncated` says more are
//! there, and `next` is the `cursor` of the next page, asked with the same `bbox`). A view wider
//! than the index serves (about 40 × 25 km) is a 400 naming `bbox`: zoom in. What the console's
//! map draws its fences from.

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use serde_json::value::RawValue;
use shared::auth::SecretKey;
use shared::domain::geofences::in_view;
use shared::{ApiError, AppState, Envelope, Params};

fn parse_limit(q: &Params) -> Result<usize, ApiError> {
    match q.opt("limit") {
        None => Ok(in_view::DEFAULT_VIEW_LIMIT),
        Some(l) => l.parse::<usize>().ok().filter(|n| (1..=in_view::MAX_VIEW_LIMIT).contains(n)).ok_or_else(|| {
            ApiError::field("limit", format!("'{l}' is not a whole number from 1 to {}", in_view::MAX_VIEW_LIMIT))
        }),
    }
}

/// The page: fences as the domain rendered them, written as they are.
#[derive(Serialize)]
struct Page {
    geofences: Vec<Box<RawValue>>,
    truncated: bool,
    next: Option<String>,
}

pub async fn fences_in_view(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
) -> Result<Response, ApiError> {
    q.only(&["bbox", "limit", "cursor"])?;
    let bbox = crate::positions::parse_bbox(
        q.opt("bbox").ok_or_else(|| ApiError::field("bbox", "is required (west,south,east,north)"))?,
    )?;
    let limit = parse_limit(&q)?;
    let after = q
        .opt("cursor")
        .map(|c| shared::domain::geofences::index::ViewCursor::parse(c, &bbox, shared::ids::is_id))
        .transpose()?;
    let (geofences, next) = in_view::fences_in(s.store.as_ref(), &p, bbox, limit, after.as_ref()).await?;
    let bytes = geofences.iter().map(|g| g.get().len() + 1).sum::<usize>();
    let next = next.map(|c| c.encode());
    let page = Page { geofences, truncated: next.is_some(), next };
    Ok(Envelope::ok(shared::envelope::SUCCESS, page).into_response_sized(bytes))
}
