//! Each user's trips as a list of their ids (v1/v3 counted, [`list_pages`]; v2 a list apart), so
//! that `GET /v1/api/trips/?user_id=` and `GET /v2/trips?user_id=` read a page of the user's
//! trips rather than every trip of the project (which they decoded and filtered: on DynamoDB,
//! every trip's capacity on every request).
//!
//! An entry (`<project>#TU#<user>`, sort key the trip's id) is written in the transaction that
//! creates the trip, moved by the one that gives it to another user, and removed by the one that
//! deletes it, each transaction depending on the entry being there.

use serde::Deserialize;

use super::{Api, Trip, trips_pk};
use crate::domain::list_pages;
use crate::error::ApiError;
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{Cond, Doc, Item, Store, Table, WriteOp, from_json, from_jsons};

/// The user's list of trips of `api` (v2 trips are a list apart, as the project's are).
pub(crate) fn list_pk(project_id: &str, api: Api, user_id: &str) -> String {
    match api {
        Api::V1 => [project_id, "#TU#", user_id].concat(),
        Api::V2 => [project_id, "#TU2#", user_id].concat(),
    }
}

/// Enter a new trip in its user's list (the trip's id is new: no read needed). The v1/v3 lists
/// page by `page_number`, so they are counted; v2 pages by cursor.
pub(super) fn add_ops(project_id: &str, api: Api, user_id: &str, trip_id: &str) -> Vec<WriteOp> {
    let pk = list_pk(project_id, api, user_id);
    let item = Item::from_iter([("pk".to_owned(), pk.as_str().into()), ("sk".to_owned(), trip_id.into())]);
    let mut ops = vec![WriteOp::Put { table: Table::Main, item, cond: Cond::NotExists }];
    if api == Api::V1 {
        ops.extend(list_pages::count_ops(Table::Main, &pk, trip_id, 1));
    }
    ops
}

/// The writes that move trip `trip_id` from `from`'s list to `to`'s (None: no list), for the
/// transaction that changes the trip.
pub(super) fn move_ops(
    project_id: &str,
    api: Api,
    trip_id: &str,
    from: Option<&str>,
    to: Option<&str>,
) -> Vec<WriteOp> {
    let mut ops = Vec::new();
    if from == to {
        return ops;
    }
    if let Some(u) = from {
        let pk = list_pk(project_id, api, u);
        ops.push(WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: trip_id.to_owned(), cond: Cond::Exists });
        if api == Api::V1 {
            ops.extend(list_pages::count_ops(Table::Main, &pk, trip_id, -1));
        }
    }
    if let Some(u) = to {
        ops.extend(add_ops(project_id, api, u, trip_id));
    }
    ops
}

/// The page of `user_id`'s v1/v3 trips (without their events) as (id, stored JSON), newest
/// first, within the trip ids `range`.
pub(super) async fn page(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    range: Option<(String, String)>,
    page: PageNumber,
) -> Result<(Vec<(String, Doc)>, PageInfo), ApiError> {
    #[derive(Deserialize)]
    struct Entry {
        sk: String,
    }
    let pk = list_pk(&p.project_id, Api::V1, user_id);
    let (docs, info) = list_pages::page(store, Table::Main, &pk, range, page, Order::NewestFirst).await?;
    let entries: Vec<Entry> = from_jsons(&docs)?;
    let ids: Vec<String> = entries.into_iter().map(|e| e.sk).collect();
    Ok((docs_at(store, p, Api::V1, ids).await?, info))
}

/// The trips of `api` with these ids as (id, stored JSON), in their order (without their
/// events); an id whose trip is gone (a user's erasure under way) is passed over.
async fn docs_at(store: &dyn Store, p: &Project, api: Api, ids: Vec<String>) -> Result<Vec<(String, Doc)>, ApiError> {
    let docs = store.get_docs(Table::Main, &trips_pk(&p.project_id, api), &ids).await?;
    Ok(ids.into_iter().zip(docs).filter_map(|(id, d)| Some((id, d?))).collect())
}

/// [`docs_at`], decoded.
pub(super) async fn trips_at(
    store: &dyn Store,
    p: &Project,
    api: Api,
    ids: Vec<String>,
) -> Result<Vec<Trip>, ApiError> {
    let docs = docs_at(store, p, api, ids).await?;
    Ok(docs.iter().map(|(_, d)| from_json(d)).collect::<Result<_, _>>()?)
}
