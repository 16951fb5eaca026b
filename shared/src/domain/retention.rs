//! Retention: a project's `retention_days` (project settings) removes its locations and geofence
//! events recorded longer ago than that. Two mechanisms, so that both backends keep the promise:
//!
//! - **TTL attribute.** While a project has retention, every location and event item is written
//!   with [`TTL_ATTRIBUTE`] (epoch seconds: recorded time plus the retention). On AWS the tables
//!   enable DynamoDB TTL on it (template.yaml), which deletes expired items in the background,
//!   typically within a few days as AWS documents, at no write cost. The setting is read at ingest
//!   through a per-process cache of [`CACHE_SECONDS`], so on Lambda a change reaches items
//!   written by other instances within that delay (in `waymark serve` at once: the PUT refreshes
//!   the cache of the process that serves everything).
//! - **Sweeper.** [`sweep`] deletes what TTL does not cover: items written before the project
//!   set retention (no attribute), items whose retention was shortened since, and everything in
//!   the embedded store (redb has no TTL). `waymark serve` runs it every [`SWEEP_SECONDS`]; on
//!   AWS the processor function runs it on its one-minute schedule. Each run deletes at most
//!   [`RUN_BUDGET`] items, so a run stays short whatever the backlog; a project whose backlog is
//!   larger continues where it stopped (a cursor item per project).
//!
//! The sweeper does not scan: projects with retention are listed in a small registry
//! (`RETENTION`, one item per project, written with the setting), users come from the
//! project's user lists (current and deleted), locations are a key range of each user's
//! partition (ids are time-ordered), and events a key range of the project-wide events list,
//! each of whose items names the fence and user copies to delete with it.
//!
//! Derived figures do not expire with the fixes: a trip record keeps its distance, duration and
//! elevation gain (its summary answers them once the fixes may be gone, and a late fix does not
//! recompute them from what remains: see `trips`), and insights read stays, never locations.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::geofences::events::{events_pk, fence_events_pk, user_events_pk};
use super::locations::locations_pk;
use super::{settings, users};
use crate::auth::Project;
use crate::error::ApiError;
use crate::ids::id_at;
use crate::store::{Cond, Item, Query, SkRange, Store, Table, from_item, key_of, to_item};
use crate::time::Timestamp;

/// The numeric attribute (epoch seconds) DynamoDB TTL is enabled on, in both tables.
pub const TTL_ATTRIBUTE: &str = "expires_at";
/// How long a process trusts a project's `retention_days` read at ingest (seconds).
pub const CACHE_SECONDS: u64 = 60;
/// How often `waymark serve` runs the sweeper (seconds); the processor's schedule on AWS is the
/// same minute.
pub const SWEEP_SECONDS: u64 = 60;
/// Most items one sweeper run deletes (an event counts as its three copies): at one run a minute,
/// up to 300,000 items an hour.
pub const RUN_BUDGET: usize = 5_000;
/// Items read and deleted per step.
const PAGE: usize = 500;
/// Users listed per read of a project's user list.
const USERS_PAGE: usize = 100;

const REGISTRY_PK: &str = "RETENTION";
const CURSOR_PK: &str = "RETENTION#CURSOR";

/// A project's entry in the sweeper's registry. A project that went back to keeping for ever
/// keeps its entry with `retention_days: null` (a put, like every settings write).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Registered {
    project_id: String,
    retention_days: Option<u32>,
}

/// Where a project's sweep stopped: which user list (0 current, 1 deleted) and the last user
/// whose expired fixes are all gone.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Cursor {
    list: usize,
    after: Option<String>,
}

/// The registry item for `p` with this retention (written with the setting).
pub(crate) fn registry_item(p: &Project, days: Option<u32>) -> Result<Item, ApiError> {
    let r = Registered { project_id: p.project_id.clone(), retention_days: days };
    Ok(to_item(REGISTRY_PK, &p.project_id, &r)?)
}

type Cache = HashMap<String, (Instant, Option<u32>)>;
static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

/// Note a project's retention as just read or written.
pub(crate) fn remember(project_id: &str, days: Option<u32>) {
    let mut c = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    // Bounded: a process that has seen very many projects starts over (one read each).
    if c.len() > 10_000 {
        c.clear();
    }
    c.insert(project_id.to_owned(), (Instant::now(), days));
}

/// A project's `retention_days`, read at most once per [`CACHE_SECONDS`] per process.
pub async fn days(store: &dyn Store, project_id: &str) -> Result<Option<u32>, ApiError> {
    let cached = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(project_id).copied();
    if let Some((_, d)) = cached.filter(|(at, _)| at.elapsed() < Duration::from_secs(CACHE_SECONDS)) {
        return Ok(d);
    }
    let d = settings::get(store, project_id).await?.retention_days;
    remember(project_id, d);
    Ok(d)
}

/// Put the TTL attribute on an item recorded at `at`, when the project keeps things `days`.
pub fn stamp(item: &mut Item, at: Timestamp, days: Option<u32>) {
    if let Some(d) = days {
        item.insert(TTL_ATTRIBUTE.into(), json!(at.0.timestamp() + i64::from(d) * 86_400));
    }
}

/// The oldest time kept now with `days` of retention: what was recorded before it has expired.
pub fn cutoff(days: u32, now: Timestamp) -> Timestamp {
    Timestamp(now.0 - chrono::Duration::days(i64::from(days)))
}

/// Whether things recorded at `since` may have expired in this project (so figures computed
/// from its fixes now would be computed from part of them).
pub async fn may_have_expired(store: &dyn Store, project_id: &str, since: Timestamp) -> Result<bool, ApiError> {
    Ok(days(store, project_id).await?.is_some_and(|d| since < cutoff(d, Timestamp::now())))
}

/// What one sweeper run did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Projects with retention visited.
    pub projects: usize,
    /// Users whose expired fixes are all gone.
    pub users: usize,
    pub locations: usize,
    /// Events removed (each from its three lists).
    pub events: usize,
    /// Items deleted in all.
    pub items: usize,
    /// Whether the run got through every project (else the budget ran out first).
    pub finished: bool,
}

/// One sweeper run over every project with retention, deleting at most `budget` items; `now`
/// decides what has expired.
pub async fn sweep(store: &dyn Store, budget: usize, now: Timestamp) -> Result<Swept, ApiError> {
    let mut out = Swept::default();
    let mut after = None;
    loop {
        let q = Query::new(REGISTRY_PK, SkRange::All).after(after).limit(USERS_PAGE);
        let page = store.query(Table::Main, &q).await?;
        for item in page.items {
            let r: Registered = from_item(item)?;
            let Some(days) = r.retention_days else { continue };
            if out.items >= budget {
                return Ok(out);
            }
            sweep_project(store, &r.project_id, cutoff(days, now), budget, &mut out).await?;
        }
        match page.last_sk {
            Some(sk) => after = Some(sk),
            None => break,
        }
    }
    out.finished = out.items < budget;
    Ok(out)
}

/// What [`sweep`] does for one project, with its current retention (nothing without one).
pub async fn sweep_one(store: &dyn Store, project_id: &str, budget: usize, now: Timestamp) -> Result<Swept, ApiError> {
    let mut out = Swept::default();
    if let Some(d) = settings::get(store, project_id).await?.retention_days {
        sweep_project(store, project_id, cutoff(d, now), budget, &mut out).await?;
    }
    out.finished = out.items < budget;
    Ok(out)
}

/// The key range of ids recorded before `cutoff`.
fn expired(cutoff: Timestamp) -> SkRange {
    SkRange::Between("0".repeat(24), id_at(cutoff.0 - chrono::Duration::milliseconds(1), u64::MAX))
}

#[derive(Deserialize)]
struct EventKeys {
    id: String,
    user_id: String,
    geofence_id: String,
}

async fn sweep_project(
    store: &dyn Store,
    pid: &str,
    cutoff: Timestamp,
    budget: usize,
    out: &mut Swept,
) -> Result<(), ApiError> {
    out.projects += 1;
    let range = expired(cutoff);
    // Events: the project-wide list holds every event; its copy goes last, so a run cut short
    // leaves it to find the others again.
    while out.items < budget {
        let n = ((budget - out.items) / 3).clamp(1, PAGE);
        let page = store.query(Table::Main, &Query::new(events_pk(pid), range.clone()).limit(n)).await?;
        if page.items.is_empty() {
            break;
        }
        let events = page.items.into_iter().map(from_item::<EventKeys>).collect::<Result<Vec<_>, _>>()?;
        let copies = events
            .iter()
            .flat_map(|e| {
                [(fence_events_pk(pid, &e.geofence_id), e.id.clone()), (user_events_pk(pid, &e.user_id), e.id.clone())]
            })
            .collect();
        store.delete_many(Table::Main, copies).await?;
        store.delete_many(Table::Main, events.iter().map(|e| (events_pk(pid), e.id.clone())).collect()).await?;
        out.events += events.len();
        out.items += 3 * events.len();
        if page.last_sk.is_none() {
            break;
        }
    }
    // Locations: user by user, from where the last run stopped.
    let saved = store.get(Table::Main, CURSOR_PK, pid).await?;
    let start: Cursor = saved.clone().map(from_item).transpose()?.unwrap_or_default();
    let lists = [users::users_pk(pid), users::deleted_pk(pid)];
    for (li, list) in lists.iter().enumerate().skip(start.list) {
        let mut after = if li == start.list { start.after.clone() } else { None };
        loop {
            let page = store
                .query(Table::Main, &Query::new(list, SkRange::All).after(after.clone()).limit(USERS_PAGE))
                .await?;
            for u in &page.items {
                let (_, uid) = key_of(u)?;
                loop {
                    if out.items >= budget {
                        let c = Cursor { list: li, after };
                        store.put(Table::Main, to_item(CURSOR_PK, pid, &c)?, Cond::None).await?;
                        return Ok(());
                    }
                    let n = (budget - out.items).min(PAGE);
                    let q = Query::new(locations_pk(pid, &uid), range.clone()).limit(n);
                    let locs = store.query(Table::Locations, &q).await?;
                    let keys = locs.items.iter().map(key_of).collect::<Result<Vec<_>, _>>()?;
                    let done = locs.last_sk.is_none();
                    out.locations += keys.len();
                    out.items += keys.len();
                    let pk = locations_pk(pid, &uid);
                    super::history_pages::invalidate(store, &pk, keys.iter().map(|(_, sk)| sk.as_str())).await?;
                    store.delete_many(Table::Locations, keys).await?;
                    if done {
                        break;
                    }
                }
                out.users += 1;
                after = Some(uid);
            }
            if page.last_sk.is_none() {
                break;
            }
        }
    }
    if saved.is_some() {
        store.delete(Table::Main, CURSOR_PK, pid, Cond::None).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_adds_the_expiry_only_with_retention() {
        let at = Timestamp(chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap());
        let mut item = Item::new();
        stamp(&mut item, at, None);
        assert!(item.get(TTL_ATTRIBUTE).is_none());
        stamp(&mut item, at, Some(2));
        assert_eq!(item[TTL_ATTRIBUTE], json!(1_700_000_000 + 2 * 86_400));
    }

    #[test]
    fn the_expired_range_ends_just_before_the_cutoff() {
        let now = Timestamp(chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap());
        let c = cutoff(1, now);
        let SkRange::Between(_, hi) = expired(c) else { panic!() };
        assert!(id_at(c.0 - chrono::Duration::milliseconds(1), 0) <= hi);
        assert!(id_at(c.0, 0) > hi);
    }
}
