//! What happens to each stored batch of locations. This is the one place later work hooks into
//! (trip progress, geofence events, stays for insights): it receives exactly the locations that
//! were newly stored, so a re-sent batch triggers nothing twice.

use crate::auth::Project;
use crate::error::ApiError;
use crate::store::Store;

use super::locations::Location;
use super::{geofences, insights, trips, users};

/// Called after a batch for `user_id` was stored; `stored` is in `recorded_at` order.
pub async fn after_store(store: &dyn Store, p: &Project, user_id: &str, stored: &[Location]) -> Result<(), ApiError> {
    let Some(newest) = stored.last() else { return Ok(()) };
    // Offline batches may be older than what the user already reported: keep the newest fix.
    let before = std::sync::Mutex::new(None);
    let user = users::modify(store, p, "user_id", user_id, |u| {
        // Re-run on a version conflict: only the attempt that commits may leave a value here.
        let mut prev = before.lock().unwrap_or_else(|e| e.into_inner());
        *prev = None;
        let newer = u.last_location_update.as_ref().is_none_or(|cur| newest.recorded_at > cur.recorded_at);
        if newer {
            *prev = Some(u.last_location_update.clone());
            u.last_location_update = Some(newest.clone());
        }
        Ok(newer)
    })
    .await?;
    trips::on_locations(store, p, user_id, stored).await?;
    geofences::events::on_locations(store, p, &user, stored).await?;
    insights::on_locations(store, p, user_id, stored).await?;
    // Moving fences follow latest positions: only a batch that moved the user counts.
    if let Some(before) = before.into_inner().unwrap_or_else(|e| e.into_inner()) {
        geofences::moving::reindex_user(store, p, &user, before.as_ref()).await?;
        geofences::moving::on_moved(store, p, &user).await?;
    }
    Ok(())
}
