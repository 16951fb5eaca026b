//! Nearby users: users whose latest location is within a radius of a point, nearest first,
//! optionally members of one group. Reads the user-position cell index the events processor
//! keeps current (one item per user, in the precision-6 cell of the user's latest fix).

use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use crate::domain::geofences::moving;
use crate::domain::{groups, locations, users};
use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::project::Project;
use crate::store::Store;

/// A user found near the point.
#[derive(Debug, Clone)]
pub struct NearbyUser {
    pub user: users::User,
    pub distance_m: f64,
}

/// Live users of the project within `radius_m` of `at` (of `group_id` when given), nearest first
/// (ties by id).
pub async fn users_near(
    store: &dyn Store,
    p: &Project,
    at: LngLat,
    radius_m: f64,
    group_id: Option<&str>,
) -> Result<Vec<NearbyUser>, ApiError> {
    let members = match group_id {
        Some(g) => Some(groups::members(store, p, g).await?),
        None => None,
    };
    let found: Vec<(String, f64)> = moving::near(store, p, at, radius_m)
        .await?
        .into_iter()
        .map(|(pos, d)| (pos.user_id, d))
        .filter(|(u, _)| members.as_ref().is_none_or(|m| m.contains(u)))
        .collect();
    // The user records (latest location, app id) are read together, a bounded number at a time.
    let mut out: Vec<NearbyUser> = futures::stream::iter(found)
        .map(|(user_id, distance_m)| async move {
            Ok::<_, ApiError>(users::get(store, p, &user_id).await?.map(|user| NearbyUser { user, distance_m }))
        })
        .buffer_unordered(16)
        .try_filter_map(|u| async move { Ok(u) })
        .try_collect()
        .await?;
    out.sort_by(|a, b| a.distance_m.total_cmp(&b.distance_m).then_with(|| a.user.id.cmp(&b.user.id)));
    Ok(out)
}

/// Most positions a view lists by default, and at most.
pub const DEFAULT_VIEW_LIMIT: usize = 5_000;
pub const MAX_VIEW_LIMIT: usize = 10_000;

pub use crate::domain::geofences::index::{MAX_VIEW_CELLS, ViewCursor};

/// The latest positions of the project's users inside `bbox` (west, south, east, north), at
/// most `limit`, cell by cell from the south-west and each cell's users in id order, from the
/// user-position index (one item per user), after `after`. With the cursor of the last one
/// listed when more are there. What a map of the fleet loads for its view. A user whose latest
/// position moves between cells while a view is paged may be listed on two pages or none, as
/// any listing of moving things would.
pub async fn positions_in(
    store: &dyn Store,
    p: &Project,
    bbox: geo::Rect<f64>,
    limit: usize,
    after: Option<&ViewCursor>,
) -> Result<(Vec<moving::Position>, Option<ViewCursor>), ApiError> {
    let mut cells = crate::domain::geofences::index::box_cells("bbox", &bbox, MAX_VIEW_CELLS)?;
    if let Some(a) = after {
        let at = cells.iter().position(|c| *c == a.cell).unwrap_or(cells.len());
        cells.drain(..at);
    }
    let mut out: Vec<(String, moving::Position)> = Vec::new();
    // A chunk of cells at a time, so a full view stops reading once it has its limit.
    for chunk in cells.chunks(crate::domain::geofences::index::CELL_READS_IN_FLIGHT * 4) {
        for (cell, pos) in moving::in_cells(store, p, chunk).await? {
            if after.is_some_and(|a| a.cell == cell && pos.user_id.as_str() <= a.id.as_str()) {
                continue;
            }
            let c = pos.coordinates;
            let inside =
                c.lng >= bbox.min().x && c.lng <= bbox.max().x && c.lat >= bbox.min().y && c.lat <= bbox.max().y;
            if inside {
                if out.len() == limit {
                    let next = out.last().map(|(cell, pos)| ViewCursor { cell: cell.clone(), id: pos.user_id.clone() });
                    return Ok((out.into_iter().map(|(_, p)| p).collect(), next));
                }
                out.push((cell, pos));
            }
        }
    }
    Ok((out.into_iter().map(|(_, p)| p).collect(), None))
}

/// A position as the view lists it.
pub fn position_json(pos: &moving::Position) -> Value {
    json!({
        "user_id": pos.user_id, "location_id": pos.location_id,
        "coordinates": [pos.coordinates.lng, pos.coordinates.lat],
        "recorded_at": pos.recorded_at.format(None),
    })
}

/// A nearby user as Roam lists one: the user's id and app id with the latest location's fields
/// (its id as `location_id`), and Waymark's `distance` in meters.
pub fn nearby_json(n: &NearbyUser) -> Value {
    let mut v = match &n.user.last_location_update {
        Some(l) => {
            let mut v = locations::location_json(l, None);
            v["location_id"] = json!(l.id);
            v
        }
        None => json!({}),
    };
    v["id"] = json!(n.user.id);
    v["app_id"] = json!(users::app_id(&n.user));
    v["distance"] = json!((n.distance_m * 100.0).round() / 100.0);
    v
}
