//! Geofence events from ingested locations, and the events list.
//!
//! For a user whose `geofence_events` flag is on, each newly stored location (in `recorded_at`
//! order) is tested against the fences indexed in its cell that are enabled, inside their active
//! window and apply to the user (everyone, the user, or one of the user's groups):
//! - `motion:geofence:entry` when the user is inside a fence they were not inside;
//! - `motion:geofence:exit` when they are no longer inside one they were inside;
//! - `motion:geofence:dwell` once per visit after [`DWELL_SECONDS`] inside.
//!
//! The fences a user is inside are stored in one item per user (`<project>#GS#<user>`, sort key
//! [`STATE_SK`]: a pass rewrites it once, not one item per event) and written in the events
//! processor's transaction (see `pipeline::processor`), which only evaluates fixes past
//! the user's processing watermark: a late fix (older than what was already evaluated) is stored
//! but fires nothing, so events never go back in time; a batch split in two fires what the whole
//! batch fires, and a re-sent batch fires nothing. Fixes less accurate than [`MAX_ACCURACY_M`]
//! are not evaluated. Event ids are derived from the fix, fence and kind, so evaluating the same
//! fixes twice (after a crash) writes nothing new.
//!
//! Each event is written three times, so every list reads its own partitions: by project
//! (`<project>#E#<shard>`), by fence (`<project>#FE#<fence>#<shard>`, also what `counts.events`
//! counts), both sharded by a hash of the user, and by user (`<project>#UE#<user>`);
//! `<project>#FU#<fence>` holds one item per user who caused an event there (`counts.users`). Retention (`pipeline::retention`) removes all three copies.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Geofence, in_cell, index};
use crate::domain::list_pages::list_page_in;
use crate::domain::locations::Location;
use crate::domain::users::User;
use crate::domain::{groups, history_pages};
use crate::error::ApiError;
use crate::ids::{id_at, id_range};
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{Cond, Doc, Item, SkRange, Store, StoreError, Table, WriteOp, from_item, from_json, to_item};
use crate::time::{DateRange, Timestamp};

/// Seconds inside a fence after which a dwell event is recorded (once per visit).
pub const DWELL_SECONDS: i64 = 300;
/// Fixes less accurate than this (meters) are not evaluated.
pub const MAX_ACCURACY_M: f64 = 100.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeofenceEvent {
    pub id: String,
    pub user_id: String,
    pub user_description: Option<String>,
    pub geofence_id: String,
    pub geofence_description: Option<String>,
    pub location_id: String,
    pub event_type: String,
    pub recorded_at: Timestamp,
    pub created_at: Timestamp,
    pub is_deleted: bool,
}

/// A user inside a fence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Inside {
    geofence_id: String,
    since: Timestamp,
    dwell_fired: bool,
}

/// Sort key of the user's state: `-` (before any fence id; fence ids are hex), then a chunk
/// number when it holds more than [`STATE_CHUNK`] fences (`-1`, `-2`, ...).
const STATE_SK: &str = "-";
/// Fences per state item: a user inside many overlapping fences stays far below the item limit.
const STATE_CHUNK: usize = 1000;

/// One state item: the fences the user is inside, by fence id.
#[derive(Debug, Default, Serialize, Deserialize)]
struct InsideSet {
    inside: Vec<Inside>,
}

fn state_sk(chunk: usize) -> String {
    if chunk == 0 { STATE_SK.to_owned() } else { format!("{STATE_SK}{chunk}") }
}

pub(crate) fn state_pk(pid: &str, uid: &str) -> String {
    [pid, "#GS#", uid].concat()
}
/// Shards of the project's events list, by a hash of the user: each takes 1/32 of a project's
/// events (docs/architecture.md, "Partitions"); the list pages over all, merged.
pub const EVENT_SHARDS: u32 = 32;
/// Shards of one fence's events, by a hash of the user: at about 6 write units an event (the
/// event and its counts), 8 shards take 1,300 events a second at one fence.
pub const FENCE_EVENT_SHARDS: u32 = 8;

/// The project's events list: the shard of `uid`'s events.
pub fn events_pk(pid: &str, uid: &str) -> String {
    format!("{pid}#E#{:02}", crate::ids::shard(uid, EVENT_SHARDS))
}
/// Every shard of the project's events list.
pub fn events_pks(pid: &str) -> Vec<String> {
    (0..EVENT_SHARDS).map(|s| format!("{pid}#E#{s:02}")).collect()
}
/// One fence's events: the shard of `uid`'s.
pub fn fence_events_pk(pid: &str, fid: &str, uid: &str) -> String {
    format!("{pid}#FE#{fid}#{}", crate::ids::shard(uid, FENCE_EVENT_SHARDS))
}
/// Every shard of one fence's events.
pub fn fence_events_pks(pid: &str, fid: &str) -> Vec<String> {
    (0..FENCE_EVENT_SHARDS).map(|s| format!("{pid}#FE#{fid}#{s}")).collect()
}
pub fn user_events_pk(pid: &str, uid: &str) -> String {
    [pid, "#UE#", uid].concat()
}
pub(crate) fn fence_users_pk(pid: &str, fid: &str) -> String {
    [pid, "#FU#", fid].concat()
}

/// What a range of new fixes does to one user's fences: the inside/outside states to write (in
/// the processor's transaction) and the events fired, each with the fence it concerns.
#[derive(Default)]
pub struct FencePlan {
    pub states: Vec<WriteOp>,
    pub events: Vec<(GeofenceEvent, Geofence)>,
}

/// A deterministic event id: `recorded_at`, then `seq` (the event's place among its fix's
/// events), then a hash of who, where and what, so evaluating the same fixes twice yields the
/// same ids and the events of one fix list (and go to webhooks) in order.
pub(crate) fn event_id(at: Timestamp, seq: u64, parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    let low = u64::from_be_bytes([0, 0, 0, d[0], d[1], d[2], d[3], d[4]]) & ((1 << 36) - 1);
    id_at(at.0, (seq.min(4095) << 36) | low)
}

/// `seq` of a geofence event in [`event_id`]: exits, then entries, then dwells (docs/events.md),
/// whether the fence is static or moving. Static and moving fences are evaluated apart, so a
/// count of the events of a fix would interleave them; the kind alone gives one order for all.
/// Events of one kind on one fix are ordered by their hash.
pub(crate) fn fix_order(kind: &str) -> u64 {
    match kind {
        "motion:geofence:exit" => 1,
        "motion:geofence:entry" => 2,
        _ => 3,
    }
}

/// Evaluate `fixes` (new, past the processor's watermark, in `recorded_at` order) for `user`.
pub async fn plan(store: &dyn Store, p: &Project, user: &User, fixes: &[Location]) -> Result<FencePlan, ApiError> {
    let user_id = user.id.as_str();
    if !user.geofence_events {
        return Ok(FencePlan::default());
    }
    let fixes: Vec<&Location> =
        fixes.iter().filter(|l| l.horizontal_accuracy.or(l.accuracy).is_none_or(|a| a <= MAX_ACCURACY_M)).collect();
    if fixes.is_empty() {
        return Ok(FencePlan::default());
    }
    let user_groups = groups::groups_of_eventually(store, p, user_id).await?;
    // The state items (`-`, `-1`, ...).
    let (mut before, mut stored) = (BTreeMap::new(), Vec::new());
    for item in
        store.query(Table::Main, &crate::store::Query::new(state_pk(&p.project_id, user_id), SkRange::All)).await?.items
    {
        stored.push(item.get("sk").and_then(Value::as_str).unwrap_or_default().to_owned());
        before.extend(from_item::<InsideSet>(item)?.inside.into_iter().map(|i| (i.geofence_id.clone(), i)));
    }
    let mut inside = before.clone();
    // Shared, not copied: a cell holds a hundred fences at city density, metadata and all.
    let mut cells: HashMap<String, Vec<Arc<Geofence>>> = HashMap::new();
    let mut known: HashMap<String, Arc<Geofence>> = HashMap::new();
    let mut fired: Vec<(GeofenceEvent, Geofence)> = Vec::new();
    let now = Timestamp::now();
    for fix in fixes {
        let cell = index::cell_of(fix.coordinates)?;
        if !cells.contains_key(&cell) {
            let fences: Vec<Arc<Geofence>> = in_cell(store, p, &cell).await?.into_iter().map(Arc::new).collect();
            for g in &fences {
                known.insert(g.id.clone(), Arc::clone(g));
            }
            cells.insert(cell.clone(), fences);
        }
        let now_in: Vec<&Geofence> = cells[&cell]
            .iter()
            .map(Arc::as_ref)
            .filter(|g| g.active_at(fix.recorded_at) && g.applies_to(user_id, &user_groups))
            .filter(|g| g.shape().contains(fix.coordinates))
            .collect();
        let mut event = |g: &Geofence, kind: &str| {
            let e = GeofenceEvent {
                id: event_id(fix.recorded_at, fix_order(kind), &[user_id, &g.id, kind, &fix.id]),
                user_id: user_id.to_owned(),
                user_description: user.description.clone(),
                geofence_id: g.id.clone(),
                geofence_description: g.description.clone(),
                location_id: fix.id.clone(),
                event_type: kind.to_owned(),
                recorded_at: fix.recorded_at,
                created_at: now,
                is_deleted: false,
            };
            fired.push((e, g.clone()));
        };
        // Exits first (a fence left), then entries, then dwells of those still inside: the order
        // docs/events.md documents, kept in the ids by `fix_order`.
        let left: Vec<String> = inside.keys().filter(|id| !now_in.iter().any(|g| &&g.id == id)).cloned().collect();
        for id in left {
            inside.remove(&id);
            let g = match known.get(&id) {
                Some(g) => Arc::clone(g),
                None => match super::get(store, p, &id).await {
                    Ok(g) => Arc::new(g),
                    Err(_) => continue, // the fence is gone: nothing to report
                },
            };
            event(&g, "motion:geofence:exit");
        }
        let mut dwells = Vec::new();
        for g in &now_in {
            match inside.get_mut(&g.id) {
                None => {
                    inside.insert(
                        g.id.clone(),
                        Inside { geofence_id: g.id.clone(), since: fix.recorded_at, dwell_fired: false },
                    );
                    event(g, "motion:geofence:entry");
                }
                Some(st) if !st.dwell_fired && (fix.recorded_at.0 - st.since.0).num_seconds() >= DWELL_SECONDS => {
                    st.dwell_fired = true;
                    dwells.push(*g);
                }
                Some(_) => {}
            }
        }
        for g in dwells {
            event(g, "motion:geofence:dwell");
        }
    }
    Ok(FencePlan { states: state_ops(&state_pk(&p.project_id, user_id), &before, &inside, &stored)?, events: fired })
}

/// The writes that take the stored state from `before` (in items `stored`) to `after`: nothing
/// when unchanged, else the state items rewritten (empty: deleted).
fn state_ops(
    spk: &str,
    before: &BTreeMap<String, Inside>,
    after: &BTreeMap<String, Inside>,
    stored: &[String],
) -> Result<Vec<WriteOp>, ApiError> {
    if before == after {
        return Ok(Vec::new());
    }
    let all: Vec<&Inside> = after.values().collect();
    let mut ops = Vec::new();
    let mut written = std::collections::BTreeSet::new();
    for (n, chunk) in all.chunks(STATE_CHUNK).enumerate() {
        let set = InsideSet { inside: chunk.iter().map(|i| (*i).clone()).collect() };
        written.insert(state_sk(n));
        ops.push(WriteOp::Put { table: Table::Main, item: to_item(spk, &state_sk(n), &set)?, cond: Cond::None });
    }
    let gone = stored.iter().filter(|sk| !written.contains(*sk)).cloned();
    ops.extend(gone.map(|sk| WriteOp::Delete { table: Table::Main, pk: spk.to_owned(), sk, cond: Cond::None }));
    Ok(ops)
}

/// The items that record events: three copies of each (project, fence, user lists: paged by their
/// own counts, `history_pages`), and one per (fence, user) for `counts.users`, written by entry
/// events, once even when several share it. Facts with deterministic keys, written put-if-absent by the
/// processor. With the project's `retention_days`, each copy carries the TTL attribute
/// (`pipeline::retention`); the (fence, user) items are a count, not a record of when, and stay.
pub(crate) struct EventItems {
    pub copies: Vec<Item>,
    pub pairs: Vec<Item>,
}

pub(crate) fn event_items(
    p: &Project,
    events: &[GeofenceEvent],
    retention_days: Option<u32>,
) -> Result<EventItems, ApiError> {
    let mut copies = Vec::with_capacity(events.len() * 3);
    let mut pairs = std::collections::BTreeSet::new();
    for e in events {
        for pk in [
            events_pk(&p.project_id, &e.user_id),
            fence_events_pk(&p.project_id, &e.geofence_id, &e.user_id),
            user_events_pk(&p.project_id, &e.user_id),
        ] {
            let mut item = to_item(&pk, &e.id, e)?;
            crate::expiry::stamp(&mut item, e.recorded_at, retention_days);
            copies.push(item);
        }
        // An exit or a dwell ends or marks a visit whose entry wrote the pair already (a fence
        // is in a user's state only by an entry event, and the pairs stay until an erasure takes
        // the state with them): a put-if-absent of an item that is there is still billed.
        if e.event_type.ends_with(":entry") {
            pairs.insert((e.geofence_id.clone(), e.user_id.clone()));
        }
    }
    let pairs = pairs
        .into_iter()
        .map(|(fence, user)| to_item(&fence_users_pk(&p.project_id, &fence), &user, &json!({"user_id": user})))
        .collect::<Result<_, _>>()?;
    Ok(EventItems { copies, pairs })
}

/// `{events, users}` of one fence.
pub async fn counts(store: &dyn Store, p: &Project, fid: &str) -> Result<Value, ApiError> {
    // From the list's own counts (`history_pages`), not by reading every event.
    let (lo, hi) = crate::ids::all_ids();
    let pks = fence_events_pks(&p.project_id, fid);
    let shards =
        futures::future::try_join_all(pks.iter().map(|pk| history_pages::count(store, Table::Main, pk, &lo, &hi)));
    let events: usize = shards.await?.into_iter().sum();
    let users = store.count(Table::Main, &fence_users_pk(&p.project_id, fid), &SkRange::All).await?;
    Ok(json!({"events": events, "users": users}))
}

/// Events recorded inside `range` (by `recorded_at`), optionally of one user and/or fence, one
/// page, as stored JSON documents (shown through [`view_json`]).
pub async fn list(
    store: &dyn Store,
    p: &Project,
    range: DateRange,
    user_id: Option<&str>,
    geofence_id: Option<&str>,
    page: PageNumber,
) -> Result<(Vec<Doc>, PageInfo), ApiError> {
    let (lo, hi) = id_range(&range);
    let pid = &p.project_id;
    let pks = match (geofence_id, user_id) {
        (Some(f), Some(u)) => {
            // A fence's events of one user: their shard, filtered, so its whole range is read.
            let keep = |e: &GeofenceEvent| e.user_id == u;
            let (pk, range) = (fence_events_pk(pid, f, u), SkRange::Between(lo, hi));
            return Ok(list_page_in(store, Table::Main, &pk, range, page, Some(&keep), Order::OldestFirst).await?);
        }
        (Some(f), None) => fence_events_pks(pid, f),
        (None, Some(u)) => vec![user_events_pk(pid, u)],
        (None, None) => events_pks(pid),
    };
    // Each list keeps its own counts (`history_pages`): page N reads about what page 1 does.
    Ok(history_pages::merged::page(store, Table::Main, &pks, &lo, &hi, page, Order::OldestFirst).await?)
}

/// A stored event as lists show it ([`EventView`]).
pub fn view_json(doc: &Doc) -> Result<Box<serde_json::value::RawValue>, StoreError> {
    crate::store::rendered("geofence event", &EventView::from(&from_json::<GeofenceEvent>(doc)?))
}

/// An event as lists and webhooks show it, serialised straight from the record; fields in
/// sorted order, as the JSON tree it replaces wrote them.
#[derive(Debug, Serialize)]
pub struct EventView<'a> {
    created_at: String,
    event_type: &'a str,
    geofence_description: &'a Option<String>,
    geofence_id: &'a str,
    id: &'a str,
    is_deleted: bool,
    location_id: &'a str,
    recorded_at: String,
    user_description: &'a Option<String>,
    user_id: &'a str,
}

impl<'a> From<&'a GeofenceEvent> for EventView<'a> {
    fn from(e: &'a GeofenceEvent) -> Self {
        Self {
            created_at: e.created_at.format(None),
            event_type: &e.event_type,
            geofence_description: &e.geofence_description,
            geofence_id: &e.geofence_id,
            id: &e.id,
            is_deleted: e.is_deleted,
            location_id: &e.location_id,
            recorded_at: e.recorded_at.format(None),
            user_description: &e.user_description,
            user_id: &e.user_id,
        }
    }
}

/// [`EventView`] as a value.
pub fn event_json(e: &GeofenceEvent) -> Value {
    // Only string keys: the conversion cannot fail.
    serde_json::to_value(EventView::from(e)).unwrap_or(Value::Null)
}
