//! The users in a map's view: `GET /v1/api/users/positions/?bbox=<west>,<south>,<east>,<north>`
//! (degrees), each user's latest position from the user-position index, `limit` at most (1 to
//! 10,000, default 5,000; `truncated` says more are there, and `next` is the `cursor` of the
//! next page, asked with the same `bbox`). A view wider than the index serves
//! (about 40 × 25 km) is a 400 naming `bbox`: zoom in. What the console's map loads.

use axum::extract::State;
use serde_json::json;
use shared::auth::SecretKey;
use shared::domain::nearby;
use shared::{ApiError, AppState, Envelope, Params};

/// `west,south,east,north` in degrees, west ≤ east (a view across the antimeridian is asked in
/// two), south ≤ north.
pub(crate) fn parse_bbox(s: &str) -> Result<geo::Rect<f64>, ApiError> {
    let bad = |why: &str| ApiError::field("bbox", format!("'{s}': {why}"));
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("not four numbers west,south,east,north"))?;
    let [w, so, e, n] = v[..] else { return Err(bad("not four numbers west,south,east,north")) };
    if !(-180.0..=180.0).contains(&w) || !(-180.0..=180.0).contains(&e) {
        return Err(bad("longitudes are from -180 to 180"));
    }
    if !(-90.0..=90.0).contains(&so) || !(-90.0..=90.0).contains(&n) {
        return Err(bad("latitudes are from -90 to 90"));
    }
    if w > e || so > n {
        return Err(bad("west must not be east of east, nor south north of north"));
    }
    Ok(geo::Rect::new(geo::Coord { x: w, y: so }, geo::Coord { x: e, y: n }))
}

fn parse_limit(q: &Params) -> Result<usize, ApiError> {
    match q.opt("limit") {
        None => Ok(nearby::DEFAULT_VIEW_LIMIT),
        Some(l) => l.parse::<usize>().ok().filter(|n| (1..=nearby::MAX_VIEW_LIMIT).contains(n)).ok_or_else(|| {
            ApiError::field("limit", format!("'{l}' is not a whole number from 1 to {}", nearby::MAX_VIEW_LIMIT))
        }),
    }
}

pub async fn positions(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
) -> Result<Envelope<serde_json::Value>, ApiError> {
    q.only(&["bbox", "limit", "cursor"])?;
    let bbox =
        parse_bbox(q.opt("bbox").ok_or_else(|| ApiError::field("bbox", "is required (west,south,east,north)"))?)?;
    let limit = parse_limit(&q)?;
    let after = q.opt("cursor").map(|c| nearby::ViewCursor::parse(c, &bbox, |u| !u.is_empty())).transpose()?;
    let (found, next) = nearby::positions_in(s.store.as_ref(), &p, bbox, limit, after.as_ref()).await?;
    let positions: Vec<_> = found.iter().map(nearby::position_json).collect();
    let next = next.map(|c| c.encode());
    Ok(Envelope::ok(
        shared::envelope::SUCCESS,
        json!({"positions": positions, "truncated": next.is_some(), "next": next}),
    ))
}
