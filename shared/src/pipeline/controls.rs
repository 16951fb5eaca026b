//! Trip controls as the edge calls them: the user's stored fixes are derived first, then the
//! control takes its place in the user's sequence after them (`domain::sequence`). Without the
//! first step, fixes stored just before a control but not yet processed (the stream-fed
//! processor runs a moment after ingest on AWS) would fall behind it and fire nothing.

use crate::domain::trips::{self, Action, Api, NewTrip, Trip};
use crate::error::ApiError;
use crate::project::Project;
use crate::store::Store;

/// Derive what the user's stored fixes cause, if anything waits. A failure here is logged and
/// the control goes on: its fixes then come after it, late, as an offline batch does.
async fn catch_up(store: &dyn Store, p: &Project, user_id: &str) {
    if let Err(e) = super::processor::process_user(store, p, user_id).await {
        tracing::warn!(user_id, error = %e.msg, "a trip control could not derive its user's pending fixes first");
    }
}

/// [`trips::control`], after the trip's user's pending fixes.
pub async fn control(
    store: &dyn Store,
    p: &Project,
    api: Api,
    trip_id: &str,
    action: Action,
    at: Option<crate::time::Timestamp>,
) -> Result<Trip, ApiError> {
    if let Ok(t) = trips::get(store, p, api, trip_id).await
        && let Some(user) = t.user_id.as_deref()
    {
        catch_up(store, p, user).await;
    }
    trips::control(store, p, api, trip_id, action, at).await
}

/// [`trips::quick`], after the user's pending fixes.
pub async fn quick(store: &dyn Store, p: &Project, api: Api, input: NewTrip) -> Result<Trip, ApiError> {
    if let Some(user) = input.user_id.as_deref() {
        catch_up(store, p, user).await;
    }
    trips::quick(store, p, api, input).await
}
