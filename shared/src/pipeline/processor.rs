//! The events processor: everything derived from a user's stored locations (last location,
//! trips, geofence states and events, stays, moving fences, webhook messages), exactly once.
//! A pass reads the fixes past the user's watermark and writes the *facts* put-if-absent (keys
//! derived from the fixes, so a second pass writes nothing new), then commits the *states*, the
//! version-checked watermark and the removal of the batch marks it covered in one transaction:
//! a crash anywhere leaves the watermark, and the next pass redoes the range. A pass stops before
//! the oldest fix of a batch still being stored ([`BatchMark::holds`]). See docs/events.md.

use serde_json::json;

use super::marks::{BatchMark, OwnMark, SHARDS, marks_pk, shard_of};
use crate::domain::geofences::{self, events as fence_events, moving};
use crate::domain::locations::{Location, latest_acceptable, locations_pk};
use crate::domain::sequence::{self, Watermark};
use crate::domain::{insights, trips, users, webhooks};
use crate::error::ApiError;
use crate::ids::id_at;
use crate::project::{KeyKind, Project};
use crate::store::{
    Cond, Item, MAX_TRANSACT_OPS, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, from_jsons,
};
use crate::time::Timestamp;
use tracing::Instrument;

/// Most fixes one pass takes.
pub const PASS_FIXES: usize = 500;
/// How often `waymark serve` sweeps for unfinished work (seconds).
pub const SWEEP_SECONDS: u64 = 2;
/// What [`process_user`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Processed {
    pub fixes: usize,
    /// Whether webhook messages were queued (only then is the delivery worker woken).
    pub queued: bool,
    /// With [`process_own`]: whether the request's own batch mark is gone (its fixes derived),
    /// so it needs no rewrite as stored.
    pub own_cleared: bool,
}

/// Process everything of the user that is past the watermark or marked.
pub async fn process_user(store: &dyn Store, p: &Project, user_id: &str) -> Result<Processed, ApiError> {
    process_own(store, p, user_id, None, None).await
}

/// [`process_user`] by the request that stored a batch, whose mark (`own`, still `stored:
/// false` in the store) its passes take as stored: a pass that derives the whole batch removes
/// the mark, and the rewrite that said "stored" (a write unit a batch) is not made. A pass
/// stopped before the batch's end (another batch still being stored, or being derived by its
/// own request) leaves it: the caller then marks it stored and runs again (`pipeline::ingest`).
/// `user`: the record as that request read it, for the first try of the first pass (see
/// [`users::require_for_ingest`]); every other try reads it strongly.
pub async fn process_own(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    own: Option<&OwnMark>,
    mut user: Option<users::User>,
) -> Result<Processed, ApiError> {
    let mut total = Processed::default();
    for _ in 0..1000 {
        let (done, step) = match pass(store, p, user_id, own, user.take()).await? {
            Pass::Done(s) => (true, s),
            Pass::More(s) => (false, s),
        };
        total.fixes += step.fixes;
        total.queued |= step.queued;
        total.own_cleared = step.own_cleared;
        if done {
            break;
        }
    }
    // Inside a request's span when ingest runs the pass, so the line names its request.
    tracing::debug!(user_id, fixes = total.fixes, queued = total.queued, "processor pass");
    Ok(total)
}

fn sk_of(item: &Item) -> &str {
    item.get("sk").and_then(|v| v.as_str()).unwrap_or_default()
}

enum Pass {
    Done(Processed),
    More(Processed),
}

async fn pass(
    store: &dyn Store,
    p: &Project,
    user_id: &str,
    own: Option<&OwnMark>,
    mut read: Option<users::User>,
) -> Result<Pass, ApiError> {
    let mpk = marks_pk(shard_of(&p.project_id, user_id));
    for _ in 0..20 {
        let wm = read_watermark(store, p, user_id).await?;
        let now = Timestamp::now();
        let (mut marks, mut blocking): (Vec<(Item, BatchMark)>, Vec<_>) = (Vec::new(), Vec::new());
        for item in store
            .query(Table::Main, &Query::new(&mpk, SkRange::Prefix(format!("{}#{user_id}#", p.project_id))))
            .await?
            .items
        {
            let Ok(mut b) = from_item::<BatchMark>(item.clone()) else { continue };
            if let Some(o) = own.filter(|o| o.is(sk_of(&item), &b)) {
                (b.stored, b.since, b.until) = (true, o.since, o.until);
            }
            if b.holds(store, now).await? { blocking.push((item, b)) } else { marks.push((item, b)) }
        }
        // Past the watermark, not in the future (a fix stored before the clock rule existed waits
        // until its time comes rather than pinning the watermark), and before any batch still
        // being stored.
        let mut hi = latest_acceptable().0;
        if let Some(since) = blocking.iter().map(|(_, b)| b.since.0).min() {
            hi = hi.min(since - chrono::Duration::milliseconds(1));
        }
        let hi = id_at(hi, u64::MAX);
        // The request's own read (eventually consistent) on the first try past a first
        // watermark, a strong read otherwise. A stale record is harmless: an erasure's first
        // step marks the watermark (read strongly above) and bumps it (a pass that read it
        // before fails its commit and tries again); a user with no watermark yet, or none any
        // more (an erasure finished), is read strongly, so a record erased meanwhile writes no
        // fact. A concurrent update's fields reach the next batch's messages.
        let handed = read.take().filter(|_| wm.version > 0);
        let user = match handed {
            _ if wm.erasing => None,
            Some(u) => Some(u),
            None => users::record(store, p, user_id).await?,
        };
        let Some(user) = user else {
            // Erased (or being erased): nothing to derive, and no watermark to write, which would
            // bring back an item naming a user who must leave none. Fixes here were stored by an
            // ingest that passed its user check before the erasure began: they go too.
            super::erasure::drop_orphan_history(store, &p.project_id, user_id).await?;
            for (m, _) in marks.iter().chain(&blocking) {
                let sk = m.get("sk").and_then(|v| v.as_str()).unwrap_or_default();
                store.delete(Table::Main, &mpk, sk, Cond::None).await?;
            }
            return Ok(Pass::Done(Processed { own_cleared: true, ..Processed::default() }));
        };
        let start = start_of(&wm, &user);
        // The latest location: the watermark's, or the record's for a user no pass has moved
        // since it left the record.
        let before = wm.latest.clone().or_else(|| user.last_location_update.clone());
        let q = Query::new(locations_pk(&p.project_id, user_id), SkRange::Between("0".repeat(24), hi))
            .after(start.last_id.clone())
            .limit(PASS_FIXES + 1);
        // Decoded straight from the stored documents; one past the pass says whether there is more.
        let mut fixes: Vec<Location> = from_jsons(&store.query_docs(Table::Locations, &q).await?)?;
        // A batch marked after the marks above were read (or still being stored then) may have
        // put only some of its fixes in this read: its mark precedes its fixes, so it is among the
        // marks now. Derived now, its fixes stored after this read would come late and fire no
        // geofence events (an entry a fix later, seen under DynamoDB's faults); this pass stops
        // before it, and the batch's own request derives it.
        let seen: std::collections::HashSet<&str> = marks.iter().chain(&blocking).map(|(m, _)| sk_of(m)).collect();
        let newer = store
            .query(Table::Main, &Query::new(&mpk, SkRange::Prefix(format!("{}#{user_id}#", p.project_id))))
            .await?
            .items
            .into_iter()
            .filter(|m| !seen.contains(sk_of(m)))
            .filter_map(|m| from_item::<BatchMark>(m).ok())
            .map(|b| b.since)
            .min();
        let cut = newer.is_some_and(|since| fixes.iter().any(|f| f.recorded_at >= since));
        if let Some(since) = newer {
            fixes.retain(|f| f.recorded_at < since);
        }
        let truncated_at = fixes.get(PASS_FIXES).map(|f| f.recorded_at);
        let more = truncated_at.is_some() && blocking.is_empty() && !cut;
        fixes.truncate(PASS_FIXES);
        // Up to where this pass derives every fix: a mark ending at or past it is left. Its
        // batch is derived by the pass of the batch that stops this one, unless that pass, its
        // own request's, took this batch for one still being stored and stopped before it too.
        let stop = blocking.iter().map(|(_, b)| b.since).chain(newer).chain(truncated_at).min();
        let covered = |b: &BatchMark| stop.is_none_or(|t| b.until < t);
        // The request's own mark, unless it is gone (or no longer its own: re-sent meanwhile).
        let own_here = own.is_some_and(|o| marks.iter().any(|(m, b)| o.is(sk_of(m), b)));
        if fixes.is_empty() && marks.is_empty() {
            return Ok(Pass::Done(Processed { own_cleared: true, ..Processed::default() }));
        }
        // Late: batches reaching back before the watermark (their fixes were not in the range).
        let late: Vec<(Timestamp, Timestamp)> = marks
            .iter()
            .filter(|(_, m)| start.last_at.is_some_and(|w| m.since < w))
            .map(|(_, m)| (m.since, m.until))
            .collect();
        // Outside the request that stored the batch (the stream-fed processor, the sweep), what
        // the pass causes records that request (the first batch's, when it derives several), so
        // a batch is followed from its request to its deliveries in the logs there too.
        let newest = fixes.last().filter(|n| before.as_ref().is_none_or(|b| n.recorded_at > b.recorded_at)).cloned();
        let planned = plan(store, p, &user, &fixes, &late, before.as_ref(), newest.as_ref());
        let Plan { facts, counted, marks: work_marks, mut states, counted_in_states, messages } =
            match marks.iter().find_map(|(_, m)| m.request_id.clone()) {
                Some(id) if crate::request_id::current().is_none() => {
                    let span = tracing::info_span!("pass", request_id = %id);
                    crate::request_id::scope(id, planned.instrument(span)).await?
                }
                _ => planned.await?,
            };
        // The states were read one by one after the watermark. Had another pass committed in
        // between, they would be newer than the watermark, and facts derived from the mix would
        // be wrong (an exit before its entry). A watermark unchanged after the reads proves the
        // snapshot consistent (the commit is one transaction and reads are strongly consistent).
        if read_watermark(store, p, user_id).await?.version != wm.version {
            continue;
        }
        // Unsynced: the transaction below commits synced and makes them durable with it; a pass
        // that stops before it leaves facts no watermark names, which it puts again (and counts
        // once). The counted ones and the rest in one store call.
        let _synced_below =
            crate::domain::history_pages::put_new_counted_with(store, Table::Main, counted, facts).await?;
        // Outbox work marks after the facts they announce, as plain puts: in the commit below
        // each cost twice (a transaction's price), and a mark is only a hint (the worker finds
        // the pending entries and checks each against its delivery). The facts are there
        // whether or not the commit follows, and a pass redone writes the same ones again.
        let queued = !work_marks.is_empty();
        for mark in work_marks {
            if let WriteOp::Put { table, item, cond } = mark {
                let _synced_below = store.put_unsynced(table, item, cond).await?;
            }
        }
        let last = fixes.last();
        let next = Watermark {
            last_id: last.map(|l| l.id.clone()).or(start.last_id),
            last_at: last.map(|l| l.recorded_at).or(start.last_at),
            version: wm.version + 1,
            latest: newest.or(before),
            erasing: false,
        };
        let mut commit = vec![sequence::put(p, user_id, &next, &wm)?];
        if wm.version == 0 {
            // The first watermark of a user: nothing an erasure could have bumped yet, so the
            // record it was derived for must still be there (an erasure deletes it, then the
            // watermark: a later pass's version check fails on either).
            commit.push(WriteOp::Check {
                table: Table::Main,
                pk: users::users_pk(&p.project_id),
                sk: user.id.clone(),
                cond: Cond::Equals("version", user.version.into()),
            });
        }
        let mut step = Processed { fixes: fixes.len(), queued, own_cleared: !own_here };
        // States and watermark together when they fit one transaction; otherwise the states go
        // first (rare: a fix that changes more than ~90 items) and the watermark commits last.
        // Trip events' copies among the states are counted in their users' lists around it.
        let one = states.len() + commit.len() <= MAX_TRANSACT_OPS;
        let write = async {
            if one {
                states.extend(commit);
                return store.transact(states).await;
            }
            for chunk in states.chunks(MAX_TRANSACT_OPS) {
                store.transact(chunk.to_vec()).await?;
            }
            store.transact(commit).await
        };
        let result = crate::domain::history_pages::counting(store, Table::Main, &counted_in_states, one, write).await;
        match result {
            Ok(()) => {
                // A mark goes only with the pass that reaches the end of the log (a batch of
                // more than PASS_FIXES fixes needs several passes, and a crash between them must
                // leave the mark for the sweep), and after the commit, not in it, where each
                // delete cost twice: a mark left by a crash or a failed delete costs the sweep
                // a pass that finds nothing new, and one rewritten since it was read (a re-sent
                // batch) stays for its own pass.
                if !more {
                    step.own_cleared |= drop_marks(store, &mpk, marks.iter().filter(|(_, b)| covered(b)), own).await;
                }
                // Committed: live streams get the messages now (a redone pass sends them again
                // with the same ids; subscribers skip ids they have sent).
                crate::domain::streams::connections::publish(store, &p.project_id, &messages).await;
                return Ok(if more { Pass::More(step) } else { Pass::Done(step) });
            }
            // Another pass (or a user update) got in first: read again and redo.
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("user_id: this user's locations are being processed by other requests; retry"))
}

/// Remove the batch marks a committed pass covered, each only if it is still as read. Returns
/// whether `own` was among them and is gone.
async fn drop_marks<'a>(
    store: &dyn Store,
    mpk: &str,
    marks: impl Iterator<Item = &'a (Item, BatchMark)>,
    own: Option<&OwnMark>,
) -> bool {
    let mut own_gone = false;
    for (m, b) in marks {
        let nonce = m.get("nonce").cloned().unwrap_or_default();
        let gone = match store.delete_unsynced(Table::Main, mpk, sk_of(m), Cond::Equals("nonce", nonce)).await {
            // The delete is made durable by a later synced commit. A mark rewritten since it
            // was read belongs to a re-sent batch, whose request takes care of it.
            Ok(_) | Err(StoreError::ConditionFailed) => true,
            Err(e) => {
                tracing::warn!(error = %e, "batch mark left for the sweep");
                false
            }
        };
        own_gone |= gone && own.is_some_and(|o| o.is(sk_of(m), b));
    }
    own_gone
}

/// Where a pass starts: the watermark, or for a user with history from before the processor
/// existed (no watermark yet), the newest fix that the old in-request derivation had covered.
/// Replaying that history against today's states would fire events again. A last location in
/// the future (the old code let one pin it) is not trusted: that user starts from the beginning.
fn start_of(wm: &Watermark, user: &users::User) -> Watermark {
    if wm.version > 0 || wm.last_id.is_some() {
        return wm.clone();
    }
    let last = user.last_location_update.as_ref().filter(|l| l.recorded_at <= latest_acceptable());
    Watermark {
        last_id: last.map(|l| l.id.clone()),
        last_at: last.map(|l| l.recorded_at),
        version: 0,
        latest: None,
        erasing: false,
    }
}

async fn read_watermark(store: &dyn Store, p: &Project, user_id: &str) -> Result<Watermark, ApiError> {
    sequence::read(store, p, user_id).await
}

#[derive(Default)]
struct Plan {
    facts: Vec<Item>,
    /// Facts in lists paged by their own counts (`history_pages`: the geofence event lists, the
    /// webhook delivery logs).
    counted: Vec<Item>,
    /// Outbox work marks (plain puts, committed after the facts).
    marks: Vec<WriteOp>,
    states: Vec<WriteOp>,
    /// Entries of counted lists among `states` (trip events' copies in their users' lists).
    counted_in_states: Vec<crate::domain::history_pages::NewEntry>,
    /// The outbox messages among `facts`, for live streams once the pass commits.
    messages: Vec<webhooks::outbox::Message>,
}

/// Ask every module what `fixes` (new, in order) and late fixes in the `late` ranges change.
/// `before` is the user's latest location when the pass began, `newest` the pass's fix that
/// replaces it (kept in the watermark: see `domain::sequence`).
async fn plan(
    store: &dyn Store,
    p: &Project,
    user: &users::User,
    fixes: &[Location],
    late: &[(Timestamp, Timestamp)],
    before: Option<&Location>,
    newest: Option<&Location>,
) -> Result<Plan, ApiError> {
    // Messages are built whether or not an endpoint listens: live streams resume from them.
    let subs = webhooks::subscriptions(store, p).await?;
    let (mut facts, mut counted) = (Vec::new(), Vec::new());
    let mut states = Vec::new();
    let mut hooks = Vec::new();
    let mut user_after = user.clone();
    user_after.last_location_update = newest.or(before).cloned();
    let trips = trips::plan_progress(store, p, user, fixes, late, true).await?;
    states.extend(trips.states);
    let counted_in_states = trips.counted;
    hooks.extend(trips.hooks);
    if !fixes.is_empty() {
        let fences = fence_events::plan(store, p, user, fixes).await?;
        states.extend(fences.states);
        let events: Vec<_> = fences.events.iter().map(|(e, _)| e.clone()).collect();
        let items = fence_events::event_items(p, &events, expiry(store, p, &events).await?)?;
        counted.extend(items.copies);
        facts.extend(items.pairs);
        hooks
            .extend(fences.events.iter().map(|(e, g)| fence_hook(e, user, geofences::geofence_json(g, "geofence_id"))));
        let stays = insights::plan(store, p, &user.id, fixes).await?;
        states.push(stays.run);
        states.extend(stays.aggregate);
        facts.extend(stays.stays);
    }
    if let Some(n) = newest {
        states.extend(moving::reindex_ops(p, &user_after, n, before)?);
        let m = moving::plan(store, p, &user_after, n).await?;
        states.extend(m.states);
        let events: Vec<_> = m.events.iter().map(|(e, _)| e.clone()).collect();
        let items = fence_events::event_items(p, &events, expiry(store, p, &events).await?)?;
        counted.extend(items.copies);
        facts.extend(items.pairs);
        hooks.extend(m.events.iter().map(|(e, g)| fence_hook(e, user, moving::moving_json(g))));
    }
    hooks.extend(fixes.last().map(|n| location_hook(user, n)));
    let days = crate::domain::settings::retention_days(store, &p.project_id).await?;
    let out = webhooks::outbox::enqueue(p, &subs, &hooks, days, store.bills_by_kilobyte())?;
    facts.extend(out.facts);
    Ok(Plan { facts, counted, marks: out.marks, states, counted_in_states, messages: out.messages })
}

/// The project's `retention_days` when there are events to stamp with it (read only then: most
/// passes fire none).
async fn expiry(
    store: &dyn Store,
    p: &Project,
    events: &[fence_events::GeofenceEvent],
) -> Result<Option<u32>, ApiError> {
    if events.is_empty() { Ok(None) } else { crate::domain::settings::retention_days(store, &p.project_id).await }
}

fn fence_hook(e: &fence_events::GeofenceEvent, user: &users::User, geofence: serde_json::Value) -> webhooks::HookEvent {
    let kind = match e.event_type.as_str() {
        "motion:geofence:exit" => "geofence.exit",
        "motion:geofence:dwell" => "geofence.dwell",
        _ => "geofence.entry",
    };
    let mut data = fence_events::event_json(e);
    data["user"] = webhooks::user_brief(Some(user), Some(&user.id));
    data["geofence"] = geofence;
    webhooks::HookEvent { id: e.id.clone(), kind, user_id: Some(user.id.clone()), created_at: e.created_at, data }
}

/// `location.updated` for a pass: keyed by its newest fix, so a redone pass has the same id.
fn location_hook(user: &users::User, newest: &Location) -> webhooks::HookEvent {
    let id = fence_events::event_id(newest.recorded_at, 0, &["location.updated", &newest.id]);
    let data = json!({
        "id": id, "user_id": user.id, "location": crate::domain::locations::location_json(newest, None),
        "user": webhooks::user_brief(Some(user), Some(&user.id)),
    });
    webhooks::HookEvent {
        id,
        kind: "location.updated",
        user_id: Some(user.id.clone()),
        created_at: Timestamp::now(),
        data,
    }
}

/// Finish every marked user's work (the sweep of `waymark serve`). Returns users processed.
pub async fn sweep(store: &dyn Store) -> Result<usize, ApiError> {
    Ok(sweep_queued(store).await?.0)
}

/// [`sweep`], also saying whether webhook messages were queued.
pub async fn sweep_queued(store: &dyn Store) -> Result<(usize, bool), ApiError> {
    let mut queued = false;
    let mut done = 0;
    for shard in 0..SHARDS {
        let marks = store.query(Table::Main, &Query::new(marks_pk(shard), SkRange::All).limit(1000)).await?.items;
        let mut users: Vec<(String, String, String)> = marks
            .into_iter()
            .filter_map(|m| from_item::<BatchMark>(m).ok())
            .map(|m| (m.project_id, m.account_id, m.user_id))
            .collect();
        users.sort();
        users.dedup();
        for (project_id, account_id, user_id) in users {
            let p = Project { project_id, account_id, kind: KeyKind::Secret };
            match process_user(store, &p, &user_id).await {
                Ok(r) => {
                    done += 1;
                    queued |= r.queued;
                }
                Err(e) => tracing::warn!(user_id, error = %e.msg, "sweep could not process a user"),
            }
        }
    }
    Ok((done, queued))
}
