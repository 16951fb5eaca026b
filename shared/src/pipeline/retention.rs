//! Retention: a project's `retention_days` (project settings) removes its locations and geofence
//! events recorded longer ago than that. Two mechanisms, so that both backends keep the promise:
//!
//! - **TTL attribute.** While a project has retention, every location and event item is written
//!   with [`TTL_ATTRIBUTE`] (epoch seconds: recorded time plus the retention). On AWS the tables
//!   enable DynamoDB TTL on it (template.yaml), which deletes expired items in the background,
//!   typically within a few days as AWS documents, at no write cost. The setting is read at ingest
//!   through the per-process settings cache ([`settings::CACHE_SECONDS`](crate::domain::settings::CACHE_SECONDS)), so on Lambda a change reaches items
//!   written by other instances within that delay (in `waymark serve` at once: the PUT refreshes
//!   the cache of the process that serves everything).
//! - **Sweeper.** [`sweep`] deletes what TTL does not cover: items written before the project
//!   set retention (no attribute), items whose retention was shortened since, and everything in
//!   the embedded store (redb has no TTL). `waymark serve` runs it every [`SWEEP_SECONDS`]; on
//!   AWS the processor function runs it on its one-minute schedule. Each run is bounded three
//!   ways ([`Budget`]): items deleted, queries made (a registry of many projects with many users
//!   costs a query per user even when nothing has expired) and a deadline. Where a run stops is
//!   stored (one cursor item: project, phase, user), so the next run, in this process or
//!   after a restart, continues there, and every project and user is reached in turn however
//!   large the registry. Concurrent runs are harmless: deletes are idempotent and the cursor is
//!   last-writer-wins.
//!
//! The sweeper does not scan: projects with retention are listed in a small registry
//! (`RETENTION`, one item per project, written with the setting), users come from the
//! project's user list, locations and the user's index of trip events
//! are a key range of each user's partition (ids are time-ordered), geofence events a key range
//! of the project-wide events list, each of whose items names the fence and user copies to
//! delete with it, and webhook messages a key range of the project's messages, each deleted with
//! its delivery and pending entry at every endpoint.
//!
//! Reads never show an item whose [`TTL_ATTRIBUTE`] has passed, on either store, although TTL
//! and the sweeper remove it later (see `store`): a list, an export or a trip's route is the same
//! before and after the deletion.
//!
//! Derived figures do not expire with the fixes: a trip record keeps its distance, duration and
//! elevation gain (its summary answers them once the fixes may be gone, and a late fix does not
//! recompute them from what remains: see `trips`), and insights read stays, never locations.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::domain::geofences::events::{events_pks, fence_events_pk, user_events_pk};
use crate::domain::locations::locations_pk;
use crate::domain::webhooks::{endpoints_pk, outbox};
use crate::domain::{settings, trips, users};
use crate::error::ApiError;
use crate::ids::id_at;

use crate::store::{Cond, Page, Query, SkRange, Store, Table, from_item, key_of, to_item};
use crate::time::Timestamp;

/// How often `waymark serve` runs the sweeper (seconds); the processor's schedule on AWS is the
/// same minute.
pub const SWEEP_SECONDS: u64 = 60;
/// Most items one sweeper run deletes (an event counts as its three copies): at one run a minute,
/// up to 300,000 items an hour.
pub const RUN_BUDGET: usize = 5_000;
/// Most queries one run makes: a user with nothing expired costs one, so a registry of 100,000
/// users is gone through in about 50 runs (under an hour), at 2,000 small reads a minute.
pub const RUN_QUERIES: usize = 2_000;
/// Longest a run works: well inside the processor function's timeout (120 s, of which the
/// erasure sweep may take 60) and the minute between runs.
pub const RUN_TIME: Duration = Duration::from_secs(20);
/// Items read and deleted per step.
const PAGE: usize = 500;
/// Users listed per read of a project's user list; registry entries per read of the registry.
const USERS_PAGE: usize = 100;

const CURSOR_PK: &str = "RETENTION#CURSOR";
const CURSOR_SK: &str = "-";

/// Where the sweeper stopped: in which project (registry order), at which phase of it (see
/// [`PHASES`]) and, in a user list, after which user (the last whose expired items are all gone).
/// Each phase done is kept, so a run too small for a whole project still moves on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Cursor {
    project: Option<String>,
    phase: usize,
    after: Option<String>,
}

/// A project's phases: geofence events, webhook messages, users.
const PHASES: usize = 3;

/// The bounds of one sweeper run.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Most items deleted.
    pub items: usize,
    /// Most queries made.
    pub queries: usize,
    /// When the run stops, whatever is left.
    pub deadline: Instant,
}

impl Budget {
    /// The bounds of a scheduled run, from now.
    pub fn run() -> Self {
        Self { items: RUN_BUDGET, queries: RUN_QUERIES, deadline: Instant::now() + RUN_TIME }
    }
    /// At most `items` deletions, no other bound (tests, measurements).
    pub fn items(items: usize) -> Self {
        Self { items, queries: usize::MAX, deadline: Instant::now() + Duration::from_secs(3600) }
    }
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
    /// Queries made.
    pub queries: usize,
    /// Whether the run went round every project (else a bound stopped it, and the stored cursor
    /// says where the next run continues).
    pub finished: bool,
}

/// One run's state: its bounds, what it did, and the store.
struct Run<'a> {
    store: &'a dyn Store,
    budget: Budget,
    now: Timestamp,
    out: Swept,
}

impl Run<'_> {
    fn spent(&self) -> bool {
        self.out.items >= self.budget.items
            || self.out.queries >= self.budget.queries
            || Instant::now() >= self.budget.deadline
    }

    /// A query, counted; expired items included (they are what the sweeper is for).
    async fn query(&mut self, table: Table, q: Query) -> Result<Page, ApiError> {
        self.out.queries += 1;
        Ok(self.store.query(table, &q.with_expired()).await?)
    }
}

/// One sweeper run over the projects with retention, from where the last run stopped, within
/// `budget`; `now` decides what has expired.
pub async fn sweep(store: &dyn Store, budget: Budget, now: Timestamp) -> Result<Swept, ApiError> {
    let saved: Option<Cursor> = store.get(Table::Main, CURSOR_PK, CURSOR_SK).await?.map(from_item).transpose()?;
    let mut pos = saved.clone().unwrap_or_default();
    let mut run = Run { store, budget, now, out: Swept::default() };
    let first = pos.project.clone();
    let stopped = 'lap: {
        // The project the last run stopped in, from where it stopped.
        if let Some(pid) = &first
            && let Some(item) = store.get(Table::Main, settings::RETENTION_REGISTRY_PK, pid).await?
            && !run.project(&from_item(item)?, &mut pos).await?
        {
            break 'lap true;
        }
        // Then those after it, and round again to those before it.
        let (mut after, mut wrapped) = (first.clone(), first.is_none());
        loop {
            if run.spent() {
                break 'lap true;
            }
            let page = run
                .query(
                    Table::Main,
                    Query::new(settings::RETENTION_REGISTRY_PK, SkRange::All).after(after).limit(USERS_PAGE),
                )
                .await?;
            for item in page.items {
                let r: settings::Registered = from_item(item)?;
                if wrapped && first.as_ref().is_some_and(|f| r.project_id >= *f) {
                    break 'lap false;
                }
                pos = Cursor { project: Some(r.project_id.clone()), phase: 0, after: None };
                if !run.project(&r, &mut pos).await? {
                    break 'lap true;
                }
            }
            after = page.last_sk;
            if after.is_none() {
                if wrapped {
                    break 'lap false;
                }
                wrapped = true;
            }
        }
    };
    if stopped {
        if saved.as_ref() != Some(&pos) {
            store.put(Table::Main, to_item(CURSOR_PK, CURSOR_SK, &pos)?, Cond::None).await?;
        }
    } else {
        // A whole lap: the next run starts from the beginning.
        run.out.finished = true;
        if saved.is_some() {
            store.delete(Table::Main, CURSOR_PK, CURSOR_SK, Cond::None).await?;
        }
    }
    Ok(run.out)
}

/// One pass over one project with its current retention (nothing without one), from its start
/// and within `budget`, without the stored cursor (tests and measurements).
pub async fn sweep_one(store: &dyn Store, project_id: &str, budget: Budget, now: Timestamp) -> Result<Swept, ApiError> {
    let mut run = Run { store, budget, now, out: Swept::default() };
    let r = settings::Registered {
        project_id: project_id.to_owned(),
        retention_days: settings::get(store, project_id).await?.retention_days,
    };
    let mut pos = Cursor::default();
    run.out.finished = run.project(&r, &mut pos).await?;
    Ok(run.out)
}

/// The shard a sharded phase goes on from: its cursor's `after` (0 at the phase's start).
fn next_shard(after: &Option<String>) -> usize {
    after.as_deref().and_then(|a| a.parse().ok()).unwrap_or(0)
}

/// The key range of ids recorded before `cutoff`.
fn expired(cutoff: Timestamp) -> SkRange {
    SkRange::Between("0".repeat(24), id_at(cutoff.0 - chrono::Duration::milliseconds(1), u64::MAX))
}

#[derive(Deserialize)]
struct MessageKeys {
    id: String,
    user_id: Option<String>,
}

#[derive(Deserialize)]
struct EventKeys {
    id: String,
    user_id: String,
    geofence_id: String,
}

impl Run<'_> {
    /// Sweep one registered project from `pos`; `false` when a bound stopped it, with `pos`
    /// where to continue.
    async fn project(&mut self, r: &settings::Registered, pos: &mut Cursor) -> Result<bool, ApiError> {
        let Some(days) = r.retention_days else { return Ok(true) };
        let pid = r.project_id.as_str();
        let range = expired(crate::expiry::cutoff(days, self.now));
        if !self.spent() {
            self.out.projects += 1;
        }
        while pos.phase < PHASES {
            let done = match pos.phase {
                0 => self.geofence_events(pid, &range, &mut pos.after).await?,
                1 => self.webhook_messages(pid, &range, &mut pos.after).await?,
                _ => self.users(pid, &range, &mut pos.after).await?,
            };
            if !done {
                return Ok(false);
            }
            pos.phase += 1;
            pos.after = None;
        }
        Ok(true)
    }

    /// Geofence events: the project-wide list holds every event; its copy goes last, so a run
    /// cut short leaves it to find the others again.
    async fn geofence_events(
        &mut self,
        pid: &str,
        range: &SkRange,
        after: &mut Option<String>,
    ) -> Result<bool, ApiError> {
        // Shard by shard, the next one kept in the cursor.
        for (shard, epk) in events_pks(pid).iter().enumerate().skip(next_shard(after)) {
            if !self.geofence_events_in(pid, epk, range).await? {
                return Ok(false);
            }
            *after = Some((shard + 1).to_string());
        }
        Ok(true)
    }

    async fn geofence_events_in(&mut self, pid: &str, epk: &str, range: &SkRange) -> Result<bool, ApiError> {
        loop {
            if self.spent() {
                return Ok(false);
            }
            let n = ((self.budget.items - self.out.items) / 3).clamp(1, PAGE);
            let page = self.query(Table::Main, Query::new(epk, range.clone()).limit(n)).await?;
            let events = page.items.into_iter().map(from_item::<EventKeys>).collect::<Result<Vec<_>, _>>()?;
            let copies: Vec<(String, String)> = events
                .iter()
                .flat_map(|e| {
                    [
                        (fence_events_pk(pid, &e.geofence_id, &e.user_id), e.id.clone()),
                        (user_events_pk(pid, &e.user_id), e.id.clone()),
                    ]
                })
                .collect();
            let own: Vec<(String, String)> = events.iter().map(|e| (epk.to_owned(), e.id.clone())).collect();
            // The three lists' counts (`history_pages`) must not count them.
            let all: Vec<(String, String)> = copies.iter().chain(&own).cloned().collect();
            let change = crate::domain::history_pages::deleting(self.store, Table::Main, &all).await?;
            self.store.delete_many(Table::Main, copies).await?;
            self.store.delete_many(Table::Main, own).await?;
            change.done(self.store).await?;
            self.out.events += events.len();
            self.out.items += 3 * events.len();
            if page.last_sk.is_none() {
                return Ok(true);
            }
        }
    }

    /// Webhook messages, with each endpoint's delivery and pending entry; the message goes last,
    /// so a run cut short finds the others again.
    async fn webhook_messages(
        &mut self,
        pid: &str,
        range: &SkRange,
        after: &mut Option<String>,
    ) -> Result<bool, ApiError> {
        if self.spent() {
            return Ok(false);
        }
        let endpoints = self.query(Table::Main, Query::new(endpoints_pk(pid), SkRange::All)).await?.items;
        let endpoints = endpoints.iter().map(|e| key_of(e).map(|(_, sk)| sk)).collect::<Result<Vec<_>, _>>()?;
        // Shard by shard, the next one kept in the cursor.
        for shard in (0..outbox::OUTBOX_SHARDS).skip(next_shard(after)) {
            let mpk = outbox::messages_pk(pid, shard);
            loop {
                if self.spent() {
                    return Ok(false);
                }
                let n = ((self.budget.items - self.out.items) / (1 + 2 * endpoints.len())).clamp(1, PAGE);
                let page = self.query(Table::Main, Query::new(&mpk, range.clone()).limit(n)).await?;
                let msgs = page.items.into_iter().map(from_item::<MessageKeys>).collect::<Result<Vec<_>, _>>()?;
                let (mut logged, mut copies) = (Vec::new(), Vec::new());
                for (m, wh) in msgs.iter().flat_map(|m| endpoints.iter().map(move |wh| (m, wh))) {
                    logged.push((outbox::log_pk(pid, wh, shard), m.id.clone()));
                    let sk = outbox::pending_sk(m.user_id.as_deref(), &m.id);
                    copies.push((outbox::pending_pk(pid, wh, shard), sk));
                }
                // A pass's run of a user's deliveries is one pending entry, keyed by its first
                // message and a hash (`outbox::run_sk`): found by a read of the user's entries
                // up to the page's last message.
                for wh in &endpoints {
                    let users: BTreeSet<Option<&str>> = msgs.iter().map(|m| m.user_id.as_deref()).collect();
                    for u in users {
                        let ids: BTreeSet<&str> =
                            msgs.iter().filter(|m| m.user_id.as_deref() == u).map(|m| m.id.as_str()).collect();
                        let (Some(lo), Some(hi)) = (ids.first(), ids.last()) else { continue };
                        let ppk = outbox::pending_pk(pid, wh, shard);
                        let range =
                            SkRange::Between(outbox::pending_sk(u, lo), outbox::pending_sk(u, &format!("{hi}#~")));
                        for item in self.query(Table::Main, Query::new(&ppk, range)).await?.items {
                            let (_, sk) = key_of(&item)?;
                            if sk.split('#').nth(1).is_some_and(|first| ids.contains(first))
                                && sk.matches('#').count() == 2
                            {
                                copies.push((ppk.clone(), sk));
                            }
                        }
                    }
                }
                // The delivery logs page by their own counts (`history_pages`): not of these.
                let change = crate::domain::history_pages::deleting(self.store, Table::Main, &logged).await?;
                copies.extend(logged);
                self.out.items += copies.len() + msgs.len();
                self.store.delete_many(Table::Main, copies).await?;
                let own = msgs.iter().map(|m| (mpk.clone(), m.id.clone())).collect();
                self.store.delete_many(Table::Main, own).await?;
                change.done(self.store).await?;
                if page.last_sk.is_none() {
                    break;
                }
            }
            *after = Some((shard + 1).to_string());
        }
        Ok(true)
    }

    /// The project's users after `after`: each one's locations and index of trip events.
    /// `after` moves past each user once both are swept.
    async fn users(&mut self, pid: &str, range: &SkRange, after: &mut Option<String>) -> Result<bool, ApiError> {
        let list = users::users_pk(pid);
        loop {
            if self.spent() {
                return Ok(false);
            }
            let q = Query::new(&list, SkRange::All).after(after.clone()).limit(USERS_PAGE);
            let page = self.query(Table::Main, q).await?;
            for u in &page.items {
                let (_, uid) = key_of(u)?;
                let parts = [
                    (Table::Locations, locations_pk(pid, &uid)),
                    (Table::Main, trips::events::user_events_pk(pid, &uid)),
                ];
                for (table, pk) in parts {
                    loop {
                        if self.spent() {
                            return Ok(false);
                        }
                        let n = (self.budget.items - self.out.items).min(PAGE);
                        let got = self.query(table, Query::new(&pk, range.clone()).limit(n)).await?;
                        let keys = got.items.iter().map(key_of).collect::<Result<Vec<_>, _>>()?;
                        if table == Table::Locations {
                            self.out.locations += keys.len();
                        }
                        // Both lists page by their own counts (history_pages): not of these.
                        let change = crate::domain::history_pages::deleting(self.store, table, &keys).await?;
                        self.out.items += keys.len();
                        self.store.delete_many(table, keys).await?;
                        change.done(self.store).await?;
                        if got.last_sk.is_none() {
                            break;
                        }
                    }
                }
                self.out.users += 1;
                *after = Some(uid);
            }
            if page.last_sk.is_none() {
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expired_range_ends_just_before_the_cutoff() {
        let now = Timestamp(chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap());
        let c = crate::expiry::cutoff(1, now);
        let SkRange::Between(_, hi) = expired(c) else { panic!() };
        assert!(id_at(c.0 - chrono::Duration::milliseconds(1), 0) <= hi);
        assert!(id_at(c.0, 0) > hi);
    }
}
