//! The user's started trips (`<project>#UT#<user>`, the user's own partition): the trips their
//! locations move, each with its online judge.

use serde::{Deserialize, Serialize};

use super::{Api, Trip, gps};
use crate::error::ApiError;
use crate::project::Project;
use crate::store::{Store, Table, from_item};

pub(crate) fn user_trips_pk(project_id: &str, user_id: &str) -> String {
    [project_id, "#UT#", user_id].concat()
}

/// Entry of the user's started trips (in the user's own partition).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct UserTrip {
    pub(crate) trip_id: String,
    pub(crate) api: Api,
    /// The trip's online judge, which nearly every pass of the user moves: kept here, where the
    /// pass reads the entry anyway, rather than on the trip record in the project's trips list,
    /// which every pass of every user on a trip rewrote (that partition capped a project's
    /// ingest). The record is written only when a pass changes more (a waypoint, the start
    /// location). None on entries from before: the record's judge holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gps: Option<gps::OnlineFilter>,
}

/// The judge of `trip` as its user's entry keeps it (the record's when the entry has none).
pub(crate) async fn judge_of(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
) -> Result<Option<gps::OnlineFilter>, ApiError> {
    let Some(user) = &trip.user_id else { return Ok(None) };
    let Some(item) = store.get(Table::Main, &user_trips_pk(&p.project_id, user), &trip.id).await? else {
        return Ok(None);
    };
    Ok(from_item::<UserTrip>(item)?.gps)
}
