//! The trip lists: v1/v3 by page number, v2 by cursor.

use serde::Deserialize;

use super::{Api, Trip, TripState, events_pk, load_events_many, trips_pk};
use crate::domain::list_pages;
use crate::error::ApiError;
use crate::ids::id_range;
use crate::metadata::MetadataFilter;
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{Doc, Query, SkRange, Store, StoreError, Table, from_item, from_json, from_jsons, key_of};
use crate::time::DateRange;

/// Filters of the v1/v3 list.
#[derive(Debug, Default)]
pub struct ListFilter {
    pub user_id: Option<String>,
    pub range: Option<DateRange>,
    pub metadata: Option<MetadataFilter>,
    /// `trip_type` (inferred from Roam's client code; `all` is None).
    pub trip_type: Option<TripType>,
}

/// Where a trip is in its life, as Roam's clients ask for it with `trip_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TripType {
    /// Ended.
    Completed,
    /// Started, not ended (paused ones too).
    Active,
    /// Not started.
    Upcoming,
}

impl TripType {
    /// `completed`, `active`, `upcoming` or `all` (None); anything else is a 400 naming it.
    pub fn parse(s: &str) -> Result<Option<Self>, ApiError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "completed" => Some(Self::Completed),
            "active" => Some(Self::Active),
            "upcoming" => Some(Self::Upcoming),
            "all" => None,
            _ => {
                return Err(ApiError::field(
                    "trip_type",
                    format!("'{s}' is not one of completed, active, upcoming, all"),
                ));
            }
        })
    }

    pub fn matches(self, t: &Trip) -> bool {
        match self {
            Self::Completed => t.ended_at.is_some(),
            Self::Active => t.started_at.is_some() && t.ended_at.is_none(),
            Self::Upcoming => t.started_at.is_none(),
        }
    }
}

/// A listed trip as stored: its record and its events' (in the order they were recorded).
#[derive(Debug, Clone)]
pub struct StoredTrip {
    pub doc: Doc,
    pub events: Vec<Doc>,
}

impl StoredTrip {
    /// The trip with its events.
    pub fn decode(&self) -> Result<Trip, StoreError> {
        let mut trip: Trip = from_json(&self.doc)?;
        trip.events = from_jsons(&self.events)?;
        Ok(trip)
    }
}

/// v1/v3 trips newest first (as Roam lists them), one page, as stored (shown through
/// [`super::view::v1_json`], or decoded).
pub async fn list_v1(
    store: &dyn Store,
    p: &Project,
    f: &ListFilter,
    page: PageNumber,
) -> Result<(Vec<StoredTrip>, PageInfo), ApiError> {
    let ids = f.range.map(|r| id_range(&r));
    if let (Some(user), None, None) = (&f.user_id, &f.metadata, f.trip_type) {
        // A page of the user's own list.
        let (docs, info) = super::by_user::page(store, p, user, ids, page).await?;
        return Ok((with_events(store, p, docs).await?, info));
    }
    let keep = |t: &Trip| {
        f.user_id.as_ref().is_none_or(|u| t.user_id.as_ref() == Some(u))
            && f.metadata.as_ref().is_none_or(|m| m.matches(t.metadata.as_ref()))
            && f.trip_type.is_none_or(|k| k.matches(t))
    };
    let filtered = f.user_id.is_some() || f.metadata.is_some() || f.trip_type.is_some();
    let keep = filtered.then_some(&keep as &(dyn Fn(&Trip) -> bool + Sync));
    let pk = trips_pk(&p.project_id, Api::V1);
    let (docs, info) = list_pages::page_where(store, Table::Main, &pk, ids, page, keep, Order::NewestFirst).await?;
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    let docs = docs.into_iter().map(|d| Ok((from_json::<Id>(&d)?.id, d))).collect::<Result<_, StoreError>>()?;
    Ok((with_events(store, p, docs).await?, info))
}

/// The stored events of each trip of a page (id, record), read together.
async fn with_events(store: &dyn Store, p: &Project, docs: Vec<(String, Doc)>) -> Result<Vec<StoredTrip>, ApiError> {
    let qs: Vec<Query> = docs.iter().map(|(id, _)| Query::new(events_pk(&p.project_id, id), SkRange::All)).collect();
    let events = store.query_docs_many(Table::Main, &qs).await?;
    Ok(docs.into_iter().zip(events).map(|((_, doc), events)| StoredTrip { doc, events }).collect())
}

/// Cursor paging of v2 trips, newest first (`starting_after`: older than that trip;
/// `ending_before`: newer than it).
pub async fn list_v2(
    store: &dyn Store,
    p: &Project,
    user_id: Option<&str>,
    state: Option<TripState>,
    starting_after: Option<&str>,
    ending_before: Option<&str>,
    limit: usize,
) -> Result<(Vec<Trip>, bool), ApiError> {
    let newer_first = ending_before.is_none();
    // A user's trips come from their own list.
    let mine = user_id;
    let pk = match mine {
        Some(u) => super::by_user::list_pk(&p.project_id, Api::V2, u),
        None => trips_pk(&p.project_id, Api::V2),
    };
    let mut q = Query::new(&pk, SkRange::All).limit(100);
    if newer_first {
        q = q.descending();
    }
    q.after = starting_after.or(ending_before).map(str::to_owned);
    let keep = |t: &Trip| user_id.is_none_or(|u| t.user_id.as_deref() == Some(u)) && state.is_none_or(|s| t.state == s);
    let mut out = Vec::new();
    loop {
        let page = store.query(Table::Main, &q).await?;
        let trips: Vec<Trip> = match mine {
            Some(_) => {
                let ids = page.items.iter().map(|i| key_of(i).map(|(_, sk)| sk)).collect::<Result<Vec<_>, _>>()?;
                super::by_user::trips_at(store, p, Api::V2, ids).await?
            }
            None => page.items.into_iter().map(from_item).collect::<Result<_, _>>()?,
        };
        out.extend(trips.into_iter().filter(|t| keep(t)));
        if out.len() > limit || page.last_sk.is_none() {
            break;
        }
        q.after = page.last_sk;
    }
    let has_more = out.len() > limit;
    out.truncate(limit);
    load_events_many(store, p, &mut out).await?;
    if !newer_first {
        out.reverse();
    }
    Ok((out, has_more))
}
