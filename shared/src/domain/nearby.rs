//! Nearby users: users whose latest location is within a radius of a point, nearest first,
//! optionally members of one group. Reads the user-position cell index the events processor
//! keeps current (one item per user, in the precision-6 cell of the user's latest fix).

use serde_json::{Value, json};

use crate::auth::Project;
use crate::domain::geofences::moving;
use crate::domain::{groups, locations, users};
use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::store::Store;

/// Search radius bounds and default (meters), as Roam documents them.
pub const MIN_RADIUS_M: f64 = 100.0;
pub const MAX_RADIUS_M: f64 = 10_000.0;
pub const DEFAULT_RADIUS_M: f64 = 1000.0;

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
    let mut out = Vec::new();
    for (user_id, distance_m) in moving::positions_near(store, p, at, radius_m).await? {
        if members.as_ref().is_some_and(|m| !m.contains(&user_id)) {
            continue;
        }
        if let Some(user) = users::get(store, p, &user_id).await? {
            out.push(NearbyUser { user, distance_m });
        }
    }
    out.sort_by(|a, b| a.distance_m.total_cmp(&b.distance_m).then_with(|| a.user.id.cmp(&b.user.id)));
    Ok(out)
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
