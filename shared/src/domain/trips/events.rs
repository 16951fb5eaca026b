//! The trip events list Roam documents (`GET /v1/api/event/trips/`): a user's trip events in a
//! date range, optionally of one trip, newest first.
//!
//! Each trip event is stored twice in the same transaction: under its trip
//! (`<project>#TE#<trip>`, in recording order, what a trip's `events` shows) and under its user
//! (`<project>#UTE#<user>`, sort key the event id), so this list is one Query whatever the number
//! of trips. Event ids are time-ordered (the time of the change, or of the fix that caused it),
//! so a date range is a key range.

use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use super::TripEvent;
use super::json::event_json;
use crate::auth::Project;
use crate::domain::locations::{Location, location_json, locations_pk};
use crate::error::ApiError;
use crate::ids::id_range;
use crate::paging::{Order, PageInfo, PageNumber, list_page_in};
use crate::store::{Cond, SkRange, Store, StoreError, Table, WriteOp, from_item, to_item};
use crate::time::DateRange;

pub(crate) fn user_events_pk(project_id: &str, user_id: &str) -> String {
    format!("{project_id}#UTE#{user_id}")
}

/// The user-index copy of an event (none for an event of a trip without a user), expiring with
/// the project's `retention_days` (by the event id's time).
pub(crate) fn index_put(
    project_id: &str,
    e: &TripEvent,
    retention_days: Option<u32>,
) -> Result<Option<WriteOp>, StoreError> {
    let Some(u) = &e.user_id else { return Ok(None) };
    let mut item = to_item(&user_events_pk(project_id, u), &e.id, e)?;
    if let Some(t) = crate::domain::retention::expiry_of(&e.id, retention_days) {
        item.insert(crate::store::TTL_ATTRIBUTE.into(), t.into());
    }
    Ok(Some(WriteOp::Put { table: Table::Main, item, cond: Cond::None }))
}

/// An event as listed, with the fix that caused it (when one did).
#[derive(Debug, Clone)]
pub struct ListedEvent {
    pub event: TripEvent,
    pub location: Option<Location>,
}

/// One page of the user's trip events recorded inside `range`, newest first (as Roam lists
/// them), of `trip_id` only when given.
pub async fn list(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    trip_id: Option<&str>,
    range: DateRange,
    page: PageNumber,
) -> Result<(Vec<ListedEvent>, PageInfo), ApiError> {
    let (lo, hi) = id_range(&range);
    let pk = user_events_pk(&p.project_id, user_id);
    let keep = |e: &TripEvent| trip_id.is_none_or(|t| e.trip_id == t);
    let keep_ref: Option<&(dyn Fn(&TripEvent) -> bool + Sync)> = if trip_id.is_some() { Some(&keep) } else { None };
    let (events, info) =
        list_page_in(store, Table::Main, &pk, SkRange::Between(lo, hi), page, keep_ref, Order::NewestFirst).await?;
    // The fixes of one page (at most 10 reads), read together.
    let locs_pk = locations_pk(&p.project_id, user_id);
    let listed = futures::stream::iter(events)
        .map(|event| {
            let locs_pk = &locs_pk;
            async move {
                let location = match &event.user_location_id {
                    Some(id) => store.get(Table::Locations, locs_pk, id).await?.map(from_item).transpose()?,
                    None => None,
                };
                Ok::<_, StoreError>(ListedEvent { event, location })
            }
        })
        .buffered(10)
        .try_collect()
        .await?;
    Ok((listed, info))
}

/// An event as Roam's list shows it: the trip event, the causing fix's id as `location_id` and
/// its `location`, `recorded_at`, `speed`, `course`, `altitude`, `activity` and
/// `horizontal_accuracy` (those it has).
pub fn listed_json(e: &ListedEvent) -> Value {
    let mut v = event_json(&e.event);
    if let Some(l) = &e.location {
        let lj = location_json(l, None);
        v["location_id"] = json!(l.id);
        v["location"] = lj["coordinates"].clone();
        for k in ["recorded_at", "speed", "course", "altitude", "activity", "horizontal_accuracy"] {
            if let Some(x) = lj.get(k) {
                v[k] = x.clone();
            }
        }
    }
    v
}
