//! Each user's trips as a list of their ids (v1/v3 counted, [`list_pages`]; v2 a list apart), so
//! that `GET /v1/api/trips/?user_id=` and `GET /v2/trips?user_id=` read a page of the user's
//! trips rather than every trip of the project (which they decoded and filtered: on DynamoDB,
//! every trip's capacity on every request).
//!
//! An entry (`<project>#TU#<user>`, sort key the trip's id) is written in the transaction that
//! creates the trip, moved by the one that gives it to another user, and removed by the one that
//! deletes it; those read whether the entry is there and make the transaction depend on it
//! (a trip from before these lists has none). Projects made since are marked indexed at creation;
//! an older project's trips are entered once, by its first such lists ([`enter_trips`]), each
//! conditional on the trip's version as read, so a change meanwhile makes it read the trip again.
//! Entering stops after [`BUILD_BUDGET`] and goes on at the next list from where it stopped (a
//! cursor beside the marker); until it is done, lists read the project's trips as before.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{Api, Trip, trips_pk};
use crate::domain::list_pages;
use crate::error::ApiError;
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{
    Cond, Doc, Item, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, from_json, from_jsons,
};

/// The user's list of trips of `api` (v2 trips are a list apart, as the project's are).
pub(crate) fn list_pk(project_id: &str, api: Api, user_id: &str) -> String {
    match api {
        Api::V1 => [project_id, "#TU#", user_id].concat(),
        Api::V2 => [project_id, "#TU2#", user_id].concat(),
    }
}

/// The marker that every trip of `api` of the project is entered in its user's list.
fn indexed_pk(project_id: &str, api: Api) -> String {
    match api {
        Api::V1 => [project_id, "#TU"].concat(),
        Api::V2 => [project_id, "#TU2"].concat(),
    }
}
const INDEXED_SK: &str = "~";

/// Trips read at once while entering them.
const BUILD_PAGE: usize = 200;
/// How long one list may spend entering trips (well inside API Gateway's 29 s).
const BUILD_BUDGET: Duration = Duration::from_secs(5);
/// Where entering stopped: the last trip id done.
const CURSOR_SK: &str = "cursor";
/// Attempts at entering one trip while writers change it.
const TRIES: usize = 20;

/// The puts that mark a new project's trips indexed (part of the transaction that makes it).
pub(crate) fn indexed_from_start(project_id: &str) -> Vec<WriteOp> {
    [Api::V1, Api::V2]
        .map(|api| WriteOp::Put { table: Table::Main, item: marker(project_id, api), cond: Cond::None })
        .into()
}

fn marker(project_id: &str, api: Api) -> Item {
    Item::from_iter([("pk".to_owned(), indexed_pk(project_id, api).into()), ("sk".to_owned(), INDEXED_SK.into())])
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
/// transaction that changes the trip. A trip from before the lists may have no entry yet: the
/// transaction then depends on its still having none.
pub(super) async fn move_ops(
    store: &dyn Store,
    project_id: &str,
    api: Api,
    trip_id: &str,
    from: Option<&str>,
    to: Option<&str>,
) -> Result<Vec<WriteOp>, StoreError> {
    let mut ops = Vec::new();
    if from == to {
        return Ok(ops);
    }
    if let Some(u) = from {
        let pk = list_pk(project_id, api, u);
        let entered = store.get_doc(Table::Main, &pk, trip_id).await?.is_some();
        let cond = if entered { Cond::Exists } else { Cond::NotExists };
        ops.push(WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: trip_id.to_owned(), cond });
        if entered && api == Api::V1 {
            ops.extend(list_pages::count_ops(Table::Main, &pk, trip_id, -1));
        }
    }
    if let Some(u) = to {
        ops.extend(add_ops(project_id, api, u, trip_id));
    }
    Ok(ops)
}

/// Whether the project's trips of `api` are all in their users' lists, entering them for up to
/// [`BUILD_BUDGET`] when not.
pub(super) async fn indexed(store: &dyn Store, project_id: &str, api: Api) -> Result<bool, StoreError> {
    Ok(store.get_doc(Table::Main, &indexed_pk(project_id, api), INDEXED_SK).await?.is_some()
        || enter_trips(store, project_id, api, BUILD_BUDGET, BUILD_PAGE).await?)
}

/// The page of `user_id`'s v1/v3 trips (without their events) as (id, stored JSON), newest
/// first, within the trip ids `range`; None while the project's older trips are still being
/// entered.
pub(super) async fn page(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    range: Option<(String, String)>,
    page: PageNumber,
) -> Result<Option<(Vec<(String, Doc)>, PageInfo)>, ApiError> {
    if !indexed(store, &p.project_id, Api::V1).await? {
        return Ok(None);
    }
    #[derive(Deserialize)]
    struct Entry {
        sk: String,
    }
    let pk = list_pk(&p.project_id, Api::V1, user_id);
    let (docs, info) = list_pages::page(store, Table::Main, &pk, range, page, Order::NewestFirst).await?;
    let entries: Vec<Entry> = from_jsons(&docs)?;
    let ids: Vec<String> = entries.into_iter().map(|e| e.sk).collect();
    Ok(Some((docs_at(store, p, Api::V1, ids).await?, info)))
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

/// Enter the project's trips in their users' lists, from where the last call stopped, `batch` at
/// a time for about `budget` (at least one batch); true once all are, and the project is marked
/// indexed. Runs beside writers: each entry is put only if absent and only if the trip is still
/// as read.
pub async fn enter_trips(
    store: &dyn Store,
    project_id: &str,
    api: Api,
    budget: Duration,
    batch: usize,
) -> Result<bool, StoreError> {
    let deadline = Instant::now() + budget;
    let ipk = indexed_pk(project_id, api);
    if store.get(Table::Main, &ipk, INDEXED_SK).await?.is_some() {
        return Ok(true);
    }
    let mut batches = 0;
    #[derive(Deserialize)]
    struct Brief {
        id: String,
        user_id: Option<String>,
        version: u64,
    }
    let tpk = trips_pk(project_id, api);
    let mut after =
        store.get(Table::Main, &ipk, CURSOR_SK).await?.and_then(|c| c.get("after")?.as_str().map(str::to_owned));
    loop {
        if batches > 0 && Instant::now() >= deadline {
            let mut cursor =
                Item::from_iter([("pk".to_owned(), ipk.as_str().into()), ("sk".to_owned(), CURSOR_SK.into())]);
            cursor.insert("after".into(), after.unwrap_or_default().into());
            store.put(Table::Main, cursor, Cond::None).await?;
            return Ok(false);
        }
        batches += 1;
        let q = Query::new(&tpk, SkRange::All).after(after).limit(batch.max(1));
        let page = store.query(Table::Main, &q).await?;
        for item in page.items {
            let mut brief: Brief = from_item(item)?;
            for attempt in 0.. {
                let Some(user) = &brief.user_id else { break };
                let mut ops = add_ops(project_id, api, user, &brief.id);
                ops.push(WriteOp::Check {
                    table: Table::Main,
                    pk: tpk.clone(),
                    sk: brief.id.clone(),
                    cond: Cond::Equals("version", brief.version.into()),
                });
                match store.transact(ops).await {
                    Ok(()) => break,
                    Err(StoreError::ConditionFailed) if attempt < TRIES => {
                        // Entered already (a writer did), or the trip changed: read it again.
                        match store.get_doc(Table::Main, &tpk, &brief.id).await? {
                            Some(d) => brief = from_json(&d)?,
                            None => break,
                        }
                        if let Some(u) = &brief.user_id
                            && store.get_doc(Table::Main, &list_pk(project_id, api, u), &brief.id).await?.is_some()
                        {
                            break;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        match page.last_sk {
            Some(last) => after = Some(last),
            None => break,
        }
    }
    match store.put(Table::Main, marker(project_id, api), Cond::NotExists).await {
        Ok(()) | Err(StoreError::ConditionFailed) => {}
        Err(e) => return Err(e),
    }
    store.delete(Table::Main, &ipk, CURSOR_SK, Cond::None).await?;
    Ok(true)
}
