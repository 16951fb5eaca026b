//! The trip events list Roam documents (`GET /v1/api/event/trips/`): a user's trip events in a
//! date range, optionally of one trip, newest first.
//!
//! Each trip event is stored twice in the same transaction: under its trip
//! (`<project>#TE#<trip>`, in recording order, what a trip's `events` shows) and under its user
//! (`<project>#UTE#<user>`, sort key the event id), so this list is one Query whatever the number
//! of trips. Event ids are time-ordered (the time of the change, or of the fix that caused it),
//! so a date range is a key range. The user's list keeps its own counts (`history_pages`: the
//! copies are counted by the transaction that writes them, see [`index_put`]), so page N reads
//! about what page 1 does; the list of one trip reads the user's list over that trip's span.

use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use super::json::event_json;
use super::{Trip, TripEvent};
use crate::domain::history_pages::{self, NewEntry};
use crate::domain::locations::{Location, location_json, locations_pk};
use crate::error::ApiError;
use crate::ids::id_range;
use crate::paging::{Order, PAGE_SIZE, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{Cond, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, from_jsons, query_as, to_item};
use crate::time::DateRange;

pub(crate) fn user_events_pk(project_id: &str, user_id: &str) -> String {
    [project_id, "#UTE#", user_id].concat()
}

/// The user-index copy of an event (none for an event of a trip without a user), expiring with
/// the project's `retention_days` (by the event id's time), and the entry to count it by: the
/// transaction that writes it runs inside [`history_pages::counting`]. Events are new when
/// written (each at the next position of its trip, under the trip's version check).
pub(crate) fn index_put(
    project_id: &str,
    e: &TripEvent,
    retention_days: Option<u32>,
) -> Result<Option<(WriteOp, NewEntry)>, StoreError> {
    let Some(u) = &e.user_id else { return Ok(None) };
    let pk = user_events_pk(project_id, u);
    let mut item = to_item(&pk, &e.id, e)?;
    let ttl = crate::expiry::expiry_of(&e.id, retention_days);
    if let Some(t) = ttl {
        item.insert(crate::store::TTL_ATTRIBUTE.into(), t.into());
    }
    let entry = NewEntry { pk, id: e.id.clone(), ttl };
    Ok(Some((WriteOp::Put { table: Table::Main, item, cond: Cond::None }, entry)))
}

/// An event as listed, with the fix that caused it (when one did).
#[derive(Debug, Clone)]
pub struct ListedEvent {
    pub event: TripEvent,
    pub location: Option<Location>,
}

/// One page of the user's trip events recorded inside `range`, newest first (as Roam lists
/// them), of `trip` only when given (with its events, as `trips::get` reads it).
pub async fn list(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    trip: Option<&Trip>,
    range: DateRange,
    page: PageNumber,
) -> Result<(Vec<ListedEvent>, PageInfo), ApiError> {
    let (lo, hi) = id_range(&range);
    let (events, info) = match trip {
        None => {
            let pk = user_events_pk(&p.project_id, user_id);
            let (docs, info) = history_pages::page(store, Table::Main, &pk, &lo, &hi, page, Order::NewestFirst).await?;
            (from_jsons::<TripEvent>(&docs)?, info)
        }
        Some(t) => of_trip(store, p, user_id, t, (&lo, &hi), page).await?,
    };
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

/// The page of the user's list filtered by `trip`: read over the span of ids of the trip's own
/// events (a trip's events, or more when the user had trips at the same time), not the user's
/// whole list; from the user's copies, so what retention let expire is gone.
async fn of_trip(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    trip: &Trip,
    (lo, hi): (&str, &str),
    page: PageNumber,
) -> Result<(Vec<TripEvent>, PageInfo), ApiError> {
    let ids = trip.events.iter().filter(|e| e.user_id.as_deref() == Some(user_id)).map(|e| e.id.as_str());
    let (Some(first), Some(last)) = (ids.clone().min(), ids.max()) else {
        return Ok((Vec::new(), PageInfo::new(page, 0)));
    };
    let (from, to) = (first.max(lo), last.min(hi));
    if from > to {
        return Ok((Vec::new(), PageInfo::new(page, 0)));
    }
    let q = Query::new(user_events_pk(&p.project_id, user_id), SkRange::Between(from.into(), to.into())).descending();
    let events: Vec<TripEvent> =
        query_as::<TripEvent>(store, Table::Main, &q).await?.into_iter().filter(|e| e.trip_id == trip.id).collect();
    let info = PageInfo::new(page, events.len());
    Ok((events.into_iter().skip(page.offset()).take(PAGE_SIZE).collect(), info))
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
