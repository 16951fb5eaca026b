//! Erasure of a user: the user record and everything derived from them, so that no item of either
//! table holds their id afterwards (privacy law's right to erasure).
//!
//! Order, and why:
//! 1. One transaction removes the user record (`<project>#U`), moves the user's watermark on (so
//!    a processing pass under way fails its commit) and writes an erasure marker at `ERASE`,
//!    sort key `<project>#<user>`. From then on every read and every ingest of the user is a
//!    404, since they all start from the user record; the marker (and the watermark, until the
//!    processor step) is all that is left that names them.
//! 2. Steps, each idempotent (deletes without conditions; derived keys), in bounded batches of at
//!    most [`PAGE`] keys, deleted with [`Store::delete_many`] (no transaction: it would double
//!    the write cost, and a step cut short is simply run again). Trips come first so their tracking links die
//!    first; per-user partitions are drained; project-wide partitions that hold the user inside
//!    items (trips, geofence scopes, moving fences, webhook messages) are paged with a cursor
//!    kept in the marker, so a resumed erasure does not read them again from the start.
//! 3. The marker goes last. A crash anywhere leaves the marker, and the next DELETE of the user
//!    or the next sweep ([`sweep`]) resumes at the step the marker names.
//!
//! A call works until its deadline: the API gives it [`REQUEST_BUDGET`] (below API Gateway's
//! 29 s) and answers 202 when the erasure is not finished by then; the sweep finishes it.
//!
//! An ingest that passed its user check just before the erasure may store fixes after the
//! locations step: its processing pass finds no user and deletes them ([`drop_orphan_history`]).
//!
//! Not erased: the user id inside webhook attempts' `response` text (what a receiver answered),
//! and the user id in events of a trip that belonged to the user once but was reassigned to
//! another user before the erasure (those events stay with that trip).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::marks;
use crate::domain::geofences::{self, Geofence, events as fence_events, index, moving};
use crate::domain::sequence::{self, Watermark};
use crate::domain::trips::{self, Api, events as trip_events};
use crate::domain::users::{self, User, check_user_id};
use crate::domain::{groups, history_pages, insights, locations, webhooks};
use crate::error::ApiError;
use crate::project::Project;
use crate::store::{Cond, Item, Page, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, key_of, to_item};
use crate::time::Timestamp;

/// Partition of the erasure markers: one partition for every project, so the sweep finds
/// unfinished erasures with one Query (erasures are rare; this is never a hot partition).
pub const MARKERS_PK: &str = "ERASE";
/// How long a DELETE request erases before answering 202 (API Gateway cuts at 29 s).
pub const REQUEST_BUDGET: Duration = Duration::from_secs(20);
/// Items read per page.
const PAGE: usize = 500;

/// Progress of one erasure, stored in its marker.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Marker {
    project_id: String,
    account_id: String,
    user_id: String,
    /// The cell of the user's latest position (the moving-fence index), kept from the record.
    cell: Option<String>,
    started_at: Timestamp,
    /// Steps done so far (see [`STEPS`]).
    step: usize,
    /// Where the current step's page of a project-wide partition resumes.
    cursor: Option<String>,
    /// Items deleted or rewritten so far.
    items: u64,
}

/// The answer of [`erase`].
#[derive(Debug, Clone)]
pub struct Erasure {
    pub user_id: String,
    /// Every step done and the marker gone; otherwise the sweep (or another DELETE) finishes.
    pub complete: bool,
    /// Items deleted or rewritten by this erasure so far.
    pub items: u64,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    IndexedTrips,
    ProjectTrips(Api),
    DeletedTrips,
    Locations,
    Processor,
    GeofenceEvents,
    Groups,
    Insights,
    Moving,
    Geofences,
    DeletedGeofences,
    Webhooks,
    Leftovers,
}

/// In order: trips (their tracking links) first, the marker after the last.
const STEPS: [Step; 14] = [
    Step::IndexedTrips,
    Step::ProjectTrips(Api::V1),
    Step::ProjectTrips(Api::V2),
    Step::DeletedTrips,
    Step::Locations,
    Step::Processor,
    Step::GeofenceEvents,
    Step::Groups,
    Step::Insights,
    Step::Moving,
    Step::Geofences,
    Step::DeletedGeofences,
    Step::Webhooks,
    Step::Leftovers,
];

fn marker_sk(pid: &str, uid: &str) -> String {
    format!("{pid}#{uid}")
}

/// What a step did before it returned.
enum Run {
    Done,
    /// Out of time; `cursor` is where a project-wide page resumes.
    Paused(Option<String>),
}

struct Ctx<'a> {
    store: &'a dyn Store,
    pid: String,
    uid: String,
    deadline: Instant,
    items: u64,
}

impl Ctx<'_> {
    fn out_of_time(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// One conditional transaction (at most [`crate::store::MAX_TRANSACT_OPS`] ops); `false` when a concurrent
    /// change beat it (the caller leaves it for the next run, which reads the item again).
    async fn write_checked(&mut self, ops: Vec<WriteOp>) -> Result<bool, ApiError> {
        let n = ops.len() as u64;
        match self.store.transact(ops).await {
            Ok(()) => {
                self.items += n;
                Ok(true)
            }
            Err(StoreError::ConditionFailed) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Unconditional deletes, each on its own ([`Store::delete_many`]): a transaction would cost
    /// twice the writes and gain nothing, since every step can be run again.
    async fn delete_keys(&mut self, table: Table, keys: Vec<(String, String)>) -> Result<(), ApiError> {
        let n = keys.len() as u64;
        self.store.delete_many(table, keys).await?;
        self.items += n;
        Ok(())
    }

    /// The next page of `pk` in `range` from `after`, expired items included; `None` when time
    /// is up.
    async fn next_page(
        &self,
        table: Table,
        pk: &str,
        range: &SkRange,
        after: &Option<String>,
    ) -> Result<Option<Page>, ApiError> {
        if self.out_of_time() {
            return Ok(None);
        }
        let q = Query::new(pk, range.clone()).with_expired().limit(PAGE).after(after.clone());
        Ok(Some(self.store.query(table, &q).await?))
    }

    /// Delete the items of `pk` in `range` that `keep` selects, page by page, until none is
    /// left or time is up (then `false`).
    async fn drain(
        &mut self,
        table: Table,
        pk: &str,
        range: SkRange,
        pick: impl Fn(&Item) -> bool,
    ) -> Result<bool, ApiError> {
        let mut after = None;
        loop {
            let Some(page) = self.next_page(table, pk, &range, &after).await? else { return Ok(false) };
            let keys = page.items.iter().filter(|i| pick(i)).map(key_of).collect::<Result<_, _>>()?;
            self.delete_keys(table, keys).await?;
            match page.last_sk {
                Some(sk) => after = Some(sk),
                None => return Ok(true),
            }
        }
    }
}

fn str_of<'a>(item: &'a Item, attr: &str) -> &'a str {
    item.get(attr).and_then(Value::as_str).unwrap_or_default()
}

fn all(_: &Item) -> bool {
    true
}

/// Erase `user_id` of the project, or resume its erasure, working until `deadline`. A user who
/// is neither live nor being erased is a 404 (an erasure already finished leaves nothing).
pub async fn erase(store: &dyn Store, p: &Project, user_id: &str, deadline: Instant) -> Result<Erasure, ApiError> {
    check_user_id("user_id", user_id)?;
    let marker = start(store, p, user_id).await?;
    run(store, marker, deadline).await
}

/// Unfinished erasures of every project, each worked on until `deadline` (the sweep of `waymark
/// serve` and of the scheduled processor on AWS). Returns how many it finished.
pub async fn sweep(store: &dyn Store, deadline: Instant) -> Result<usize, ApiError> {
    let items = store.query(Table::Main, &Query::new(MARKERS_PK, SkRange::All).limit(100)).await?.items;
    let mut done = 0;
    for item in items {
        if Instant::now() >= deadline {
            break;
        }
        if run(store, from_item(item)?, deadline).await?.complete {
            done += 1;
        }
    }
    Ok(done)
}

/// Whether the user's erasure has begun and not finished.
pub async fn in_progress(store: &dyn Store, project_id: &str, user_id: &str) -> Result<bool, StoreError> {
    Ok(store.get(Table::Main, MARKERS_PK, &marker_sk(project_id, user_id)).await?.is_some())
}

/// Delete the location history of a user who has no record: fixes that an ingest request stored
/// after the erasure's locations step (it had passed its user check before the erasure began).
/// The events processor calls it when it finds such fixes, so none outlives the erasure.
pub async fn drop_orphan_history(store: &dyn Store, project_id: &str, user_id: &str) -> Result<(), ApiError> {
    let deadline = Instant::now() + REQUEST_BUDGET;
    let mut cx = Ctx { store, pid: project_id.to_owned(), uid: user_id.to_owned(), deadline, items: 0 };
    let pk = locations::locations_pk(project_id, user_id);
    cx.drain(Table::Locations, &pk, SkRange::All, all).await?;
    if cx.items > 0 {
        tracing::info!(user_id, items = cx.items, "deleted fixes stored for an erased user");
    }
    Ok(())
}

/// The marker of an erasure under way, or a new one written with the user record's removal.
async fn start(store: &dyn Store, p: &Project, user_id: &str) -> Result<Marker, ApiError> {
    let msk = marker_sk(&p.project_id, user_id);
    for _ in 0..20 {
        if let Some(item) = store.get(Table::Main, MARKERS_PK, &msk).await? {
            return Ok(from_item(item)?);
        }
        let pk = users::users_pk(&p.project_id);
        let Some(item) = store.get(Table::Main, &pk, user_id).await? else {
            return Err(ApiError::not_found(format!("user_id: no user '{user_id}' in this project")));
        };
        let user: User = from_item(item)?;
        let wm = sequence::read(store, p, user_id).await?;
        let latest = wm.latest.as_ref().or(user.last_location_update.as_ref());
        let marker = Marker {
            project_id: p.project_id.clone(),
            account_id: p.account_id.clone(),
            user_id: user.id.clone(),
            cell: latest.and_then(|l| index::cell_of(l.coordinates).ok()),
            started_at: Timestamp::now(),
            step: 0,
            cursor: None,
            items: 1,
        };
        // The user leaves the list's page counts with the record.
        let mut ops = vec![
            WriteOp::Put { table: Table::Main, item: to_item(MARKERS_PK, &msk, &marker)?, cond: Cond::NotExists },
            WriteOp::Delete {
                table: Table::Main,
                pk: pk.clone(),
                sk: user.id.clone(),
                cond: Cond::Equals("version", user.version.into()),
            },
        ];
        ops.extend(crate::domain::list_pages::count_ops(Table::Main, &pk, &user.id, -1));
        // A pass under way read the watermark before this: moved here, its commit fails (passes
        // write the watermark, not the record), and the pass finds no user when it reads again:
        // the watermark says so, whatever record the pass was handed by its request.
        let erasing = Watermark { version: wm.version + 1, erasing: true, ..wm.clone() };
        ops.push(sequence::put(p, user_id, &erasing, &wm)?);
        match store.transact(ops).await {
            Ok(()) => return Ok(marker),
            // The user changed, or another request began the erasure: read again.
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("user_id: the user is being changed by other requests; retry"))
}

async fn run(store: &dyn Store, mut m: Marker, deadline: Instant) -> Result<Erasure, ApiError> {
    let msk = marker_sk(&m.project_id, &m.user_id);
    let mut cx = Ctx { store, pid: m.project_id.clone(), uid: m.user_id.clone(), deadline, items: 0 };
    while m.step < STEPS.len() {
        let paused = match step(&mut cx, STEPS[m.step], m.cell.as_deref(), m.cursor.clone()).await? {
            Run::Done => {
                m.step += 1;
                m.cursor = None;
                false
            }
            Run::Paused(cursor) => {
                m.cursor = cursor;
                true
            }
        };
        let base = m.items;
        m.items = base + cx.items;
        cx.items = 0;
        // Exists: a concurrent request that finished (and removed the marker) is not undone.
        match store.put(Table::Main, to_item(MARKERS_PK, &msk, &m)?, Cond::Exists).await {
            Ok(()) => {}
            Err(StoreError::ConditionFailed) => {
                return Ok(Erasure { user_id: m.user_id, complete: true, items: m.items });
            }
            Err(e) => return Err(e.into()),
        }
        if paused || cx.out_of_time() {
            return Ok(Erasure { user_id: m.user_id, complete: false, items: m.items });
        }
    }
    store.delete(Table::Main, MARKERS_PK, &msk, Cond::None).await?;
    tracing::info!(user_id = %m.user_id, items = m.items, "user erased");
    Ok(Erasure { user_id: m.user_id, complete: true, items: m.items + 1 })
}

async fn step(cx: &mut Ctx<'_>, s: Step, cell: Option<&str>, cursor: Option<String>) -> Result<Run, ApiError> {
    let (pid, uid) = (cx.pid.clone(), cx.uid.clone());
    let finished = |done: bool| if done { Run::Done } else { Run::Paused(None) };
    Ok(match s {
        Step::IndexedTrips => finished(indexed_trips(cx).await?),
        Step::ProjectTrips(api) => project_trips(cx, &trips::trips_pk(&pid, api), cursor).await?,
        Step::DeletedTrips => project_trips(cx, &trips::deleted_pk(&pid), cursor).await?,
        Step::Locations => {
            finished(cx.drain(Table::Locations, &locations::locations_pk(&pid, &uid), SkRange::All, all).await?)
        }
        Step::Processor => {
            let marks = marks::marks_pk(marks::shard_of(&pid, &uid));
            let done = cx.drain(Table::Main, &marks, SkRange::Prefix(format!("{pid}#{uid}#")), all).await?;
            cx.delete_keys(Table::Main, vec![(marks::watermark_pk(&pid, &uid), "-".into())]).await?;
            finished(done)
        }
        Step::GeofenceEvents => finished(geofence_events(cx).await?),
        Step::Groups => finished(memberships(cx).await?),
        Step::Insights => {
            let a = cx.drain(Table::Main, &insights::stays::stays_pk(&pid, &uid), SkRange::All, all).await?;
            let b = cx.drain(Table::Main, &insights::stays::run_pk(&pid, &uid), SkRange::All, all).await?;
            let c = cx.drain(Table::Main, &insights::aggregate::aggregate_pk(&pid, &uid), SkRange::All, all).await?;
            finished(a && b && c)
        }
        Step::Moving => {
            if let Some(c) = cell {
                cx.delete_keys(Table::Main, vec![(moving::user_cell_pk(&pid, c), uid.clone())]).await?;
            }
            let a = moving_fences(cx, &moving::fences_pk(&pid), true).await?;
            let b = moving_fences(cx, &moving::deleted_pk(&pid), false).await?;
            finished(a && b)
        }
        Step::Geofences => scoped_fences(cx, &geofences::fences_pk(&pid), true, cursor).await?,
        Step::DeletedGeofences => scoped_fences(cx, &geofences::deleted_pk(&pid), false, cursor).await?,
        Step::Webhooks => webhook_messages(cx, cursor).await?,
        Step::Leftovers => {
            // Index entries whose trip was gone already (deleted before the user, or never found).
            let a = cx.drain(Table::Main, &trip_events::user_events_pk(&pid, &uid), SkRange::All, all).await?;
            let b = cx.drain(Table::Main, &trips::user_trips_pk(&pid, &uid), SkRange::All, all).await?;
            let c = cx.drain(Table::Main, &fence_events::state_pk(&pid, &uid), SkRange::All, all).await?;
            // The user's lists of trips and the v1/v3 list's counts.
            let (v1, v2) = (trips::by_user::list_pk(&pid, Api::V1, &uid), trips::by_user::list_pk(&pid, Api::V2, &uid));
            let d = cx.drain(Table::Main, &v1, SkRange::All, all).await?;
            let e = cx.drain(Table::Main, &crate::domain::list_pages::counts_pk(&v1), SkRange::All, all).await?;
            let f = cx.drain(Table::Main, &v2, SkRange::All, all).await?;
            finished(a && b && c && d && e && f)
        }
    })
}

/// Erase one trip: its tracking link first (dead at once), its events and their copies in users'
/// indexes, the user's started-trips entry, and the record last (what finds it again on a retry).
async fn erase_trip(cx: &mut Ctx<'_>, pk: &str, trip: &Item) -> Result<(), ApiError> {
    let trip_id = key_of(trip)?.1;
    let token = str_of(trip, "tracking_token");
    if !token.is_empty() {
        cx.delete_keys(Table::Main, vec![(trips::tracking_pk(token), "-".into())]).await?;
    }
    let epk = trips::events_pk(&cx.pid, &trip_id);
    let events = cx.store.query(Table::Main, &Query::new(&epk, SkRange::All).with_expired()).await?.items;
    let mut keys = Vec::with_capacity(events.len() * 2 + 2);
    for e in &events {
        let owner = str_of(e, "user_id");
        if !owner.is_empty() {
            keys.push((trip_events::user_events_pk(&cx.pid, owner), str_of(e, "id").to_owned()));
        }
    }
    // Copies in users' trip-events lists, which page by their own counts (`history_pages`): a
    // trip given to another user before it started keeps copies in its first user's list.
    let change = history_pages::deleting(cx.store, Table::Main, &keys).await?;
    keys.extend(events.iter().map(key_of).collect::<Result<Vec<_>, _>>()?);
    keys.push((trips::user_trips_pk(&cx.pid, &cx.uid), trip_id.clone()));
    for api in [Api::V1, Api::V2] {
        keys.push((trips::by_user::list_pk(&cx.pid, api, &cx.uid), trip_id.clone()));
    }
    cx.delete_keys(Table::Main, keys).await?;
    change.done(cx.store).await?;
    if pk == trips::trips_pk(&cx.pid, Api::V1) {
        // Counted out of the v1/v3 list's pages with it.
        crate::domain::list_pages::remove(cx.store, Table::Main, pk, &trip_id).await?;
        cx.items += 1;
        return Ok(());
    }
    cx.delete_keys(Table::Main, vec![(pk.to_owned(), trip_id)]).await
}

/// The trips the user's own indexes name (started trips, trips with events): found without
/// reading the project's trips, so their links die in the first moments of the erasure.
async fn indexed_trips(cx: &mut Ctx<'_>) -> Result<bool, ApiError> {
    let (pid, uid) = (cx.pid.clone(), cx.uid.clone());
    let mut ids = BTreeSet::new();
    for pk in [trips::user_trips_pk(&pid, &uid), trip_events::user_events_pk(&pid, &uid)] {
        let items = cx.store.query(Table::Main, &Query::new(&pk, SkRange::All).with_expired()).await?.items;
        ids.extend(items.iter().map(|i| i.get("trip_id").and_then(Value::as_str).unwrap_or_default().to_owned()));
    }
    ids.remove("");
    for id in ids {
        if cx.out_of_time() {
            return Ok(false);
        }
        for pk in [trips::trips_pk(&pid, Api::V1), trips::trips_pk(&pid, Api::V2), trips::deleted_pk(&pid)] {
            if let Some(t) = cx.store.get(Table::Main, &pk, &id).await?
                && str_of(&t, "user_id") == uid
            {
                erase_trip(cx, &pk, &t).await?;
            }
        }
    }
    Ok(true)
}

/// The user's trips in a project-wide trips partition (trips created without starting, assigned
/// later), paged from `cursor`.
async fn project_trips(cx: &mut Ctx<'_>, pk: &str, mut cursor: Option<String>) -> Result<Run, ApiError> {
    loop {
        let Some(page) = cx.next_page(Table::Main, pk, &SkRange::All, &cursor).await? else {
            return Ok(Run::Paused(cursor));
        };
        let uid = cx.uid.clone();
        for t in page.items.iter().filter(|t| str_of(t, "user_id") == uid) {
            erase_trip(cx, pk, t).await?;
        }
        match page.last_sk {
            Some(sk) => cursor = Some(sk),
            None => return Ok(Run::Done),
        }
    }
}

/// Each geofence event is stored three times: the project's and the fence's copies go first,
/// the user's copy (what finds them on a retry) after; then who-was-at-the-fence entries.
async fn geofence_events(cx: &mut Ctx<'_>) -> Result<bool, ApiError> {
    let upk = fence_events::user_events_pk(&cx.pid, &cx.uid);
    loop {
        // From the start each time: what the last page found is deleted by now. The events' id
        // range: the user's list keeps its counts beside them, dropped with it at the end.
        let Some(page) = cx.next_page(Table::Main, &upk, &history_pages::fixes(), &None).await? else {
            return Ok(false);
        };
        let items = page.items;
        if items.is_empty() {
            return cx.drain(Table::Main, &upk, SkRange::All, all).await;
        }
        let mut fences = BTreeSet::new();
        let mut copies = Vec::new();
        for e in &items {
            let (id, fid) = (key_of(e)?.1, str_of(e, "geofence_id").to_owned());
            let (pid, uid) = (&cx.pid, &cx.uid);
            for pk in [fence_events::events_pk(pid, uid), fence_events::fence_events_pk(pid, &fid, uid)] {
                copies.push((pk, id.clone()));
            }
            fences.insert(fid);
        }
        // The project's and the fences' lists must not count them (`history_pages`).
        let change = history_pages::deleting(cx.store, Table::Main, &copies).await?;
        copies.extend(fences.iter().map(|f| (fence_events::fence_users_pk(&cx.pid, f), cx.uid.clone())));
        cx.delete_keys(Table::Main, copies).await?;
        change.done(cx.store).await?;
        let own = items.iter().map(key_of).collect::<Result<_, _>>()?;
        cx.delete_keys(Table::Main, own).await?;
    }
}

/// Both directions of each membership: the group's entry first, the user's (what finds it) after.
async fn memberships(cx: &mut Ctx<'_>) -> Result<bool, ApiError> {
    let upk = groups::groups_of_pk(&cx.pid, &cx.uid);
    let items = cx.store.query(Table::Main, &Query::new(&upk, SkRange::All).with_expired()).await?.items;
    let members = items
        .iter()
        .map(|g| Ok((groups::members_pk(&cx.pid, &key_of(g)?.1), cx.uid.clone())))
        .collect::<Result<_, StoreError>>()?;
    cx.delete_keys(Table::Main, members).await?;
    let own = items.iter().map(key_of).collect::<Result<_, _>>()?;
    cx.delete_keys(Table::Main, own).await?;
    Ok(true)
}

/// Moving fences (tens per project, read whole): pair states that name the user go; a fence that
/// follows the user stops following them, and one that followed only them is erased with its
/// states (it existed only to watch this user).
async fn moving_fences(cx: &mut Ctx<'_>, pk: &str, live: bool) -> Result<bool, ApiError> {
    let done = moving_fences_of(cx, pk, live).await;
    // This instance's passes read the fences again (they lose the erased user here).
    moving::fences_changed(&cx.pid);
    done
}

async fn moving_fences_of(cx: &mut Ctx<'_>, pk: &str, live: bool) -> Result<bool, ApiError> {
    let items = cx.store.query(Table::Main, &Query::new(pk, SkRange::All).with_expired()).await?.items;
    let uid = cx.uid.clone();
    let (lead, tail) = (format!("{uid}#"), format!("#{uid}"));
    for item in items {
        if cx.out_of_time() {
            return Ok(false);
        }
        let mut g: moving::MovingGeofence = from_item(item)?;
        let spk = moving::pair_pk(&cx.pid, &g.id);
        if !g.users.contains(&uid) {
            cx.drain(Table::Main, &spk, SkRange::All, |i| {
                let sk = str_of(i, "sk");
                sk.starts_with(&lead) || sk.ends_with(&tail)
            })
            .await?;
            continue;
        }
        g.users.retain(|u| *u != uid);
        if g.users.is_empty() {
            cx.drain(Table::Main, &spk, SkRange::All, all).await?;
            if live {
                // Counted out of the list's pages with it.
                crate::domain::list_pages::remove(cx.store, Table::Main, pk, &g.id).await?;
                cx.items += 1;
            } else {
                cx.delete_keys(Table::Main, vec![(pk.to_owned(), g.id.clone())]).await?;
            }
            continue;
        }
        cx.drain(Table::Main, &spk, SkRange::All, |i| {
            let sk = str_of(i, "sk");
            sk.starts_with(&lead) || sk.ends_with(&tail)
        })
        .await?;
        let expected = g.version;
        g.version += 1;
        g.updated_at = Timestamp::now();
        let cond = if live { Cond::Equals("version", expected.into()) } else { Cond::None };
        // A concurrent update of the fence: the next run (retry or sweep) reads it again.
        if !cx.write_checked(vec![WriteOp::Put { table: Table::Main, item: to_item(pk, &g.id, &g)?, cond }]).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Geofences scoped to the user stop naming them. A fence scoped to nobody else would apply to
/// everyone, so it is disabled instead of widened (the customer decides what it becomes).
async fn scoped_fences(cx: &mut Ctx<'_>, pk: &str, live: bool, mut cursor: Option<String>) -> Result<Run, ApiError> {
    loop {
        let Some(page) = cx.next_page(Table::Main, pk, &SkRange::All, &cursor).await? else {
            return Ok(Run::Paused(cursor));
        };
        for item in page.items {
            let mut g: Geofence = from_item(item)?;
            if !g.user_ids.contains(&cx.uid) {
                continue;
            }
            g.user_ids.retain(|u| *u != cx.uid);
            if g.user_ids.is_empty() && g.group_ids.is_empty() {
                g.is_enabled = false;
            }
            let expected = g.version;
            g.version += 1;
            g.updated_at = Timestamp::now();
            let ops = if live {
                geofences::write_ops(&g, Cond::Equals("version", expected.into()))?
            } else {
                vec![WriteOp::Put { table: Table::Main, item: to_item(pk, &g.id, &g)?, cond: Cond::None }]
            };
            if !cx.write_checked(ops).await? {
                // Changed meanwhile: this page again on the next run.
                return Ok(Run::Paused(cursor));
            }
        }
        match page.last_sk {
            Some(sk) => cursor = Some(sk),
            None => return Ok(Run::Done),
        }
    }
}

/// Webhook messages are per project (in shards), with the user inside: the user's own messages go
/// with their delivery log and pending entries at every endpoint (message last: it finds them on
/// a retry); another user's message that mentions the user (a moving fence that followed them)
/// keeps its place in the log with the id redacted from its body.
async fn webhook_messages(cx: &mut Ctx<'_>, cursor: Option<String>) -> Result<Run, ApiError> {
    let pid = cx.pid.clone();
    let endpoints: Vec<String> = cx
        .store
        .query(Table::Main, &Query::new(webhooks::endpoints_pk(&pid), SkRange::All).with_expired())
        .await?
        .items
        .iter()
        .map(|i| key_of(i).map(|(_, sk)| sk))
        .collect::<Result<_, _>>()?;
    // The cursor is where a run stopped: `<shard>/<sort key>` (or `<shard>/` at a shard's start).
    let (first, mut after) = match cursor.as_deref().and_then(|c| c.split_once('/')) {
        Some((shard, sk)) => (shard.parse().unwrap_or(0), Some(sk.to_owned()).filter(|s| !s.is_empty())),
        None => (0, None),
    };
    let at = |shard: u32, sk: &Option<String>| Some(format!("{shard:02}/{}", sk.as_deref().unwrap_or_default()));
    let own_shard = webhooks::outbox::user_shard(Some(&cx.uid));
    for shard in first..webhooks::outbox::OUTBOX_SHARDS {
        let mpk = webhooks::outbox::messages_pk(&pid, shard);
        loop {
            let Some(page) = cx.next_page(Table::Main, &mpk, &SkRange::All, &after).await? else {
                return Ok(Run::Paused(at(shard, &after)));
            };
            let (mut logged, mut refs) = (Vec::new(), Vec::new());
            let mut own = Vec::new();
            let mut redacted = Vec::new();
            for mut m in page.items {
                let id = key_of(&m)?.1;
                if str_of(&m, "user_id") == cx.uid {
                    for wh in &endpoints {
                        logged.push((webhooks::outbox::log_pk(&pid, wh, shard), id.clone()));
                        refs.push((webhooks::outbox::pending_pk(&pid, wh, shard), format!("{}#{id}", cx.uid)));
                    }
                    own.push((mpk.clone(), id));
                } else {
                    // Bodies may be stored deflated (`webhooks::stored_body`): redacted in the form they have.
                    let body = webhooks::stored_body::decode(str_of(&m, "body")).map_err(ApiError::internal)?;
                    if body.contains(cx.uid.as_str()) {
                        let redacted_body = body.replace(cx.uid.as_str(), "erased");
                        let body = webhooks::stored_body::encode_like(str_of(&m, "body"), &redacted_body);
                        m.insert("body".into(), body.into());
                        redacted.push(m);
                    }
                }
            }
            // The endpoints' delivery logs page by their own counts (`history_pages`): not of these.
            let change = history_pages::deleting(cx.store, Table::Main, &logged).await?;
            refs.extend(logged);
            cx.delete_keys(Table::Main, refs).await?;
            change.done(cx.store).await?;
            cx.delete_keys(Table::Main, own).await?;
            for m in redacted {
                // Exists: a message gone meanwhile (its own user erased) is not brought back.
                cx.write_checked(vec![WriteOp::Put { table: Table::Main, item: m, cond: Cond::Exists }]).await?;
            }
            match page.last_sk {
                Some(sk) => after = Some(sk),
                None => break,
            }
        }
        after = None;
    }
    // Pending entries whose message was already gone.
    for wh in &endpoints {
        let prefix = SkRange::Prefix(format!("{}#", cx.uid));
        if !cx.drain(Table::Main, &webhooks::outbox::pending_pk(&pid, wh, own_shard), prefix, all).await? {
            // Past every shard's messages: the next run goes straight to these.
            return Ok(Run::Paused(at(webhooks::outbox::OUTBOX_SHARDS, &None)));
        }
    }
    Ok(Run::Done)
}
