//! The outbox: messages written in the same step as the events they carry, and per endpoint a
//! pending index that the worker ([`super::deliver`]) works through and a delivery log it
//! writes. Pending entries sort by user, then event, so the head of each user's run is the one
//! to send next. A delivery enters the log when the worker first takes it up (its first attempt,
//! or parked while its endpoint is disabled), written once for a delivery that succeeds at once
//! where a record put at enqueue and rewritten by the attempt wrote it twice. All keys derive
//! from the event id, so writing the same events twice (a re-run after a crash) adds nothing;
//! the worker skips a pending entry whose delivery is already final. The keys: `#WM`, `#WL`,
//! `#WP` and `WORK#` in docs/architecture.md.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Endpoint, HookEvent};
use crate::domain::history_pages::merged;
use crate::domain::history_pages::{self, NewEntry};
use crate::error::ApiError;
use crate::ids::id_range;
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{
    Cond, Item, SkRange, Store, StoreError, TTL_ATTRIBUTE, Table, WriteOp, from_item, from_jsons, key_of, to_item,
};
use crate::time::{DateRange, Timestamp};

/// Shards of the work index, for the whole deployment: a mark per endpoint and outbox shard.
pub const WORK_SHARDS: u32 = 32;
/// Most events one replay request re-sends.
pub const MAX_REPLAY: usize = 1000;
/// Most attempts kept in a delivery's log (the newest).
pub const MAX_ATTEMPTS_KEPT: usize = 50;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub event_type: String,
    pub user_id: Option<String>,
    /// The JSON body sent, as bytes on the wire (stored deflated on DynamoDB: `stored_body`).
    #[serde(deserialize_with = "super::stored_body::deserialize")]
    pub body: String,
    pub created_at: Timestamp,
    /// The retention's TTL (`pipeline::retention`): the message, its deliveries and pending
    /// entries expire together, so an expired event is neither listed nor sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// The request that caused it (`x-request-id`), logged with every delivery attempt; never
    /// sent to the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Delivered,
    Failed,
}

impl Status {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        serde_json::from_value(Value::String(s.to_owned()))
            .map_err(|_| ApiError::field("status", format!("'{s}' is not one of pending, delivered, failed")))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub at: Timestamp,
    /// The receiver's HTTP status, when it answered.
    pub status_code: Option<u16>,
    /// Why there was no answer (timeout, refused address, connection error).
    pub error: Option<String>,
    pub latency_ms: u64,
    /// The start of the receiver's response body (truncated).
    pub response: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delivery {
    pub webhook_id: String,
    pub event_id: String,
    pub event_type: String,
    pub user_id: Option<String>,
    pub status: Status,
    pub attempts: Vec<Attempt>,
    /// Attempts of the current round (reset by a replay); the retry schedule counts these.
    #[serde(default)]
    pub round_attempts: usize,
    /// Replays so far: an attempt that started in an earlier round decides nothing.
    #[serde(default)]
    pub round: u64,
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Its message's TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// An entry of the pending index: one delivery, or a pass's run of one user's deliveries to one
/// endpoint, in order (`event_id`, then `more`). A pass at city density queues several a batch;
/// one entry put and deleted for all of them, not one each (two write units a delivery).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingRef {
    pub event_id: String,
    /// The run's later deliveries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<String>,
    pub next_attempt_at: Timestamp,
    /// Its message's TTL (a run's: its first message's, the earliest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// When a run was queued: one whose messages and delivery records are all gone long after
    /// (deleted by retention's sweeper, which deletes single entries by key, not runs) is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<Timestamp>,
    /// Its deliveries are in the log (parked behind one that waits, `deliver`): not again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parked: bool,
}

impl PendingRef {
    pub fn one(event_id: &str, next_attempt_at: Timestamp, expires_at: Option<i64>) -> Self {
        Self {
            event_id: event_id.to_owned(),
            more: Vec::new(),
            next_attempt_at,
            expires_at,
            queued_at: None,
            parked: false,
        }
    }

    /// Its deliveries' event ids, in order.
    pub fn ids(&self) -> Vec<String> {
        std::iter::once(self.event_id.clone()).chain(self.more.iter().cloned()).collect()
    }

    /// The entry as the rest of its run from `ids[i]` on (`ids` its [`Self::ids`]), next tried at
    /// `next_attempt_at`.
    pub fn rest(&self, ids: &[String], i: usize, next_attempt_at: Timestamp) -> Self {
        Self { event_id: ids[i].clone(), more: ids[i + 1..].to_vec(), next_attempt_at, ..self.clone() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkMark {
    pub project_id: String,
    pub account_id: String,
    pub webhook_id: String,
    /// The outbox shard ([`user_shard`]) whose pending entries it points at.
    pub shard: u32,
    /// Changed by every enqueue, so the worker removes the mark only if nothing came since.
    pub nonce: String,
}

/// Shards of a project's outbox lists (its messages, and per endpoint the delivery log, the
/// pending index and the work marks), by a hash of the user: each takes 1/32 of a project's
/// events, so none caps a project's ingest (docs/architecture.md, "Partitions"). A user's
/// messages, deliveries and pending entries share one shard; readers of a whole list merge all.
pub const OUTBOX_SHARDS: u32 = 32;

/// The shard of a user's outbox entries; events of no user (a webhook test) go to shard 0.
pub fn user_shard(user_id: Option<&str>) -> u32 {
    user_id.map_or(0, |u| crate::ids::shard(u, OUTBOX_SHARDS))
}
pub(crate) fn messages_pk(pid: &str, shard: u32) -> String {
    format!("{pid}#WM#{shard:02}")
}
pub(crate) fn log_pk(pid: &str, wh: &str, shard: u32) -> String {
    format!("{pid}#WL#{wh}#{shard:02}")
}
pub(crate) fn pending_pk(pid: &str, wh: &str, shard: u32) -> String {
    format!("{pid}#WP#{wh}#{shard:02}")
}
/// Every shard's key of a list (`pk` of one shard).
pub(crate) fn all_shards(pk: impl Fn(u32) -> String) -> Vec<String> {
    (0..OUTBOX_SHARDS).map(pk).collect()
}
pub(crate) fn pending_sk(user_id: Option<&str>, event_id: &str) -> String {
    format!("{}#{event_id}", user_id.unwrap_or("-"))
}
/// A run's key: after its first event, a hash of all of them. Runs are facts, written
/// put-if-absent: two passes over the same fixes (a version race, a pass redone after a crash)
/// that derive runs of different lengths from the same first event keep both, and the worker
/// skips the deliveries already final, where one key would have kept only the first run written.
pub(crate) fn run_sk(user_id: Option<&str>, ids: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for id in ids {
        h.update(id.as_bytes());
        h.update(b",");
    }
    format!(
        "{}#{}#{}",
        user_id.unwrap_or("-"),
        ids.first().copied().unwrap_or_default(),
        hex::encode(&h.finalize()[..6])
    )
}
pub(crate) fn work_pk(shard: u32) -> String {
    format!("WORK#{shard}")
}
/// A work mark's sort key: the endpoint and the outbox shard it has work in.
pub(crate) fn work_sk(pid: &str, wh: &str, outbox_shard: u32) -> String {
    format!("{pid}#{wh}#{outbox_shard:02}")
}
/// Any shard will do (the worker reads them all); spreading marks spreads their writes.
fn shard_of(mark_sk: &str) -> u32 {
    crate::ids::shard(mark_sk, WORK_SHARDS)
}

/// The body of a message: `{id, type, created_at, project_id, data}`.
pub fn body(p: &Project, e: &HookEvent) -> String {
    json!({
        "id": e.id, "type": e.kind, "created_at": e.created_at.format(None),
        "project_id": p.project_id, "data": e.data,
    })
    .to_string()
}

fn message(p: &Project, e: &HookEvent, retention_days: Option<u32>) -> Message {
    Message {
        id: e.id.clone(),
        event_type: e.kind.to_owned(),
        user_id: e.user_id.clone(),
        body: body(p, e),
        created_at: e.created_at,
        expires_at: crate::expiry::expiry_of(&e.id, retention_days),
        request_id: crate::request_id::current(),
    }
}

/// A delivery as it enters the log: pending since `queued_at`, no attempt yet.
pub(super) fn new_delivery(wh: &str, m: &Message, queued_at: Timestamp, now: Timestamp) -> Delivery {
    Delivery {
        webhook_id: wh.to_owned(),
        event_id: m.id.clone(),
        event_type: m.event_type.clone(),
        user_id: m.user_id.clone(),
        status: Status::Pending,
        attempts: Vec::new(),
        round_attempts: 0,
        round: 0,
        next_attempt_at: Some(now),
        created_at: queued_at,
        updated_at: now,
        expires_at: m.expires_at,
    }
}

pub(super) fn work_mark(p: &Project, wh: &str, shard: u32) -> Result<WriteOp, ApiError> {
    let mark = WorkMark {
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        webhook_id: wh.to_owned(),
        shard,
        nonce: crate::ids::random_hex(8),
    };
    let sk = work_sk(&p.project_id, wh, shard);
    let item = to_item(&work_pk(shard_of(&sk)), &sk, &mark)?;
    Ok(WriteOp::Put { table: Table::Main, item, cond: Cond::None })
}

/// The items that put events in the outbox (see [`enqueue`]).
#[derive(Default)]
pub struct Enqueued {
    /// Messages and pending entries: write them put-if-absent.
    pub facts: Vec<Item>,
    /// Work marks: plain puts, after them.
    pub marks: Vec<WriteOp>,
    /// The messages among `facts`, for live streams once they are committed.
    pub messages: Vec<Message>,
}

/// The items that put `events` in the outbox: one message per event, whether or not an endpoint
/// listens (live streams resume from the messages, `domain::streams`), and for every endpoint
/// that wants some a pending entry per user (the worker logs each delivery as it takes it up).
/// With the project's `retention_days`, they expire with the events they carry.
/// `compact`: bodies stored deflated (a store billed by the kilobyte, `stored_body`).
pub fn enqueue(
    p: &Project,
    subs: &[Endpoint],
    events: &[HookEvent],
    retention_days: Option<u32>,
    compact: bool,
) -> Result<Enqueued, ApiError> {
    let now = Timestamp::now();
    let mut out = Enqueued::default();
    let pid = &p.project_id;
    for e in events {
        let m = message(p, e, retention_days);
        let pk = messages_pk(pid, user_shard(m.user_id.as_deref()));
        let item = if compact {
            to_item(&pk, &m.id, &Message { body: super::stored_body::encode(&m.body), ..m.clone() })?
        } else {
            to_item(&pk, &m.id, &m)?
        };
        out.facts.push(item);
        out.messages.push(m);
    }
    for ep in subs {
        let mut shards = std::collections::BTreeSet::new();
        // Each user's deliveries, in event order, become one pending entry.
        let mut runs: std::collections::BTreeMap<Option<&str>, Vec<&Message>> = Default::default();
        for m in out.messages.iter().filter(|m| ep.wants(&m.event_type)) {
            runs.entry(m.user_id.as_deref()).or_default().push(m);
            shards.insert(user_shard(m.user_id.as_deref()));
        }
        for (user, mut run) in runs {
            run.sort_by(|a, b| a.id.cmp(&b.id));
            let ppk = pending_pk(pid, &ep.id, user_shard(user));
            let first = run[0];
            let r = PendingRef::one(&first.id, now, run.iter().filter_map(|m| m.expires_at).min());
            let (sk, r) = if run.len() == 1 {
                // Alone, under its own key, which retention's sweeper deletes with its message.
                (pending_sk(user, &first.id), r)
            } else {
                let ids: Vec<&str> = run.iter().map(|m| m.id.as_str()).collect();
                let more = ids[1..].iter().map(|s| (*s).to_owned()).collect();
                (run_sk(user, &ids), PendingRef { more, queued_at: Some(now), ..r })
            };
            out.facts.push(to_item(&ppk, &sk, &r)?);
        }
        for shard in shards {
            out.marks.push(work_mark(p, &ep.id, shard)?);
        }
    }
    Ok(out)
}

/// The same as plain puts, for a transaction that also creates the events (fresh ids), and the
/// messages among them.
pub fn enqueue_ops(
    p: &Project,
    subs: &[Endpoint],
    events: &[HookEvent],
    retention_days: Option<u32>,
    compact: bool,
) -> Result<(Vec<WriteOp>, Vec<Message>), ApiError> {
    let Enqueued { facts, marks, messages } = enqueue(p, subs, events, retention_days, compact)?;
    let mut ops: Vec<WriteOp> =
        facts.into_iter().map(|item| WriteOp::Put { table: Table::Main, item, cond: Cond::None }).collect();
    ops.extend(marks);
    Ok((ops, messages))
}

/// A log entry as `history_pages` counts it.
fn new_entry(item: &Item) -> Result<NewEntry, StoreError> {
    let (pk, id) = key_of(item)?;
    Ok(NewEntry { pk, id, ttl: item.get(TTL_ATTRIBUTE).and_then(Value::as_i64) })
}

/// Write `events` to the outbox outside a transaction (idempotent). Returns the messages.
pub async fn write(
    store: &dyn Store,
    p: &Project,
    subs: &[Endpoint],
    events: &[HookEvent],
) -> Result<Vec<Message>, ApiError> {
    let days = crate::domain::settings::retention_days(store, &p.project_id).await?;
    let Enqueued { facts, marks, messages } = enqueue(p, subs, events, days, store.bills_by_kilobyte())?;
    if !facts.is_empty() {
        store.put_new(Table::Main, facts).await?;
    }
    if !marks.is_empty() {
        store.transact(marks).await?;
    }
    Ok(messages)
}

/// One page of an endpoint's deliveries, in event order (oldest first), optionally of one status.
pub async fn deliveries(
    store: &dyn Store,
    p: &Project,
    wh: &str,
    status: Option<Status>,
    page: PageNumber,
) -> Result<(Vec<Delivery>, PageInfo), ApiError> {
    let pks = all_shards(|s| log_pk(&p.project_id, wh, s));
    let Some(status) = status else {
        // Each shard keeps its own counts (`history_pages`): page N reads about what page 1 does.
        let (lo, hi) = crate::ids::all_ids();
        let (docs, info) = merged::page(store, Table::Main, &pks, &lo, &hi, page, Order::OldestFirst).await?;
        return Ok((from_jsons(&docs)?, info));
    };
    // One status: filtered, so the whole log is read (a delivery's status changes as it is sent).
    let docs = merged::query_all(store, Table::Main, &pks, &history_pages::fixes(), None, Order::OldestFirst).await?;
    let kept: Vec<Delivery> = from_jsons::<Delivery>(&docs)?.into_iter().filter(|d| d.status == status).collect();
    let info = PageInfo::new(page, kept.len());
    Ok((kept.into_iter().skip(page.offset()).take(crate::paging::PAGE_SIZE).collect(), info))
}

pub fn delivery_json(d: &Delivery) -> Value {
    json!({
        "event_id": d.event_id, "event_type": d.event_type, "user_id": d.user_id,
        "status": d.status, "next_attempt_at": d.next_attempt_at.map(|t| t.format(None)),
        "created_at": d.created_at.format(None), "updated_at": d.updated_at.format(None),
        "attempts": d.attempts.iter().map(|a| json!({
            "at": a.at.format(None), "status_code": a.status_code, "error": a.error,
            "latency_ms": a.latency_ms, "response": a.response,
        })).collect::<Vec<_>>(),
    })
}

/// Queue `m` again for `endpoint`: its delivery (made if the log has none) back to pending, with
/// a pending entry and a work mark. The delivery is written on the condition that it is as read
/// (a delivery the retention sweeper or an erasure deleted meanwhile is not brought back
/// uncounted); a new one is counted in the log's counts (`history_pages`) as it is written.
async fn replay_one(
    store: &dyn Store,
    p: &Project,
    endpoint: &Endpoint,
    m: &Message,
    now: Timestamp,
) -> Result<(), ApiError> {
    let shard = user_shard(m.user_id.as_deref());
    let lpk = log_pk(&p.project_id, &endpoint.id, shard);
    for _ in 0..5 {
        let (mut d, cond, is_new) = match store.get(Table::Main, &lpk, &m.id).await? {
            Some(item) => {
                let read_at = item.get("updated_at").cloned().unwrap_or_default();
                (from_item::<Delivery>(item)?, Cond::Equals("updated_at", read_at), false)
            }
            // New to the log: not taken up yet, or the endpoint was made after the event.
            None => (new_delivery(&endpoint.id, m, now, now), Cond::NotExists, true),
        };
        d.status = Status::Pending;
        d.round_attempts = 0;
        d.round += 1;
        d.next_attempt_at = Some(now);
        d.updated_at = later(now, d.updated_at);
        let r = PendingRef::one(&m.id, now, m.expires_at);
        let pending =
            to_item(&pending_pk(&p.project_id, &endpoint.id, shard), &pending_sk(m.user_id.as_deref(), &m.id), &r)?;
        let log = to_item(&lpk, &m.id, &d)?;
        let new = if is_new { vec![new_entry(&log)?] } else { Vec::new() };
        let ops = vec![
            WriteOp::Put { table: Table::Main, item: log, cond },
            WriteOp::Put { table: Table::Main, item: pending, cond: Cond::None },
            work_mark(p, &endpoint.id, shard)?,
        ];
        match history_pages::counting(store, Table::Main, &new, true, store.transact(ops)).await {
            Ok(()) => return Ok(()),
            // Written by someone else since it was read (an attempt, a replay, a delete).
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(format!("event_ids: the delivery of '{}' is being changed by other requests; retry", m.id)))
}

/// What to replay: a time range (of event ids) or a list of event ids.
pub enum ReplaySet {
    Range(DateRange),
    Ids(Vec<String>),
}

/// Send these messages to `endpoint` again (same ids, same bodies). Returns how many.
/// `now`, or just after `before` if the clock has not moved past it: a record's `updated_at`
/// changes on every write, so writers can check that nobody wrote it since they read it.
pub(super) fn later(now: Timestamp, before: Timestamp) -> Timestamp {
    if now > before { now } else { Timestamp(before.0 + chrono::Duration::milliseconds(1)) }
}

pub async fn replay(store: &dyn Store, p: &Project, endpoint: &Endpoint, set: ReplaySet) -> Result<usize, ApiError> {
    let mpks = all_shards(|s| messages_pk(&p.project_id, s));
    let messages: Vec<Message> = match set {
        ReplaySet::Range(r) => {
            let (lo, hi) = id_range(&r);
            let range = SkRange::Between(lo, hi);
            let docs =
                merged::query_all(store, Table::Main, &mpks, &range, Some(MAX_REPLAY + 1), Order::OldestFirst).await?;
            if docs.len() > MAX_REPLAY {
                return Err(ApiError::field(
                    "since",
                    format!("the range holds more than {MAX_REPLAY} events; narrow it"),
                ));
            }
            from_jsons(&docs)?
        }
        ReplaySet::Ids(ids) => {
            // The ids name no user, so no shard: each shard is asked for all of them at once.
            let mut found: Vec<Option<Message>> = vec![None; ids.len()];
            for pk in &mpks {
                for (i, doc) in store.get_docs(Table::Main, pk, &ids).await?.into_iter().enumerate() {
                    if let Some(doc) = doc {
                        found[i] = Some(crate::store::from_json(&doc)?);
                    }
                }
            }
            let mut out = Vec::with_capacity(ids.len());
            for (i, (id, m)) in ids.iter().zip(found).enumerate() {
                out.push(m.ok_or_else(|| {
                    ApiError::not_found(format!("event_ids[{i}]: no webhook message '{id}' in this project"))
                })?);
            }
            out
        }
    };
    let now = Timestamp::now();
    let wanted: Vec<&Message> = messages.iter().filter(|m| endpoint.wants(&m.event_type)).collect();
    for m in &wanted {
        replay_one(store, p, endpoint, m, now).await?;
    }
    Ok(wanted.len())
}
