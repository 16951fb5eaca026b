//! Delivery: the worker that sends pending messages, signed as the Standard Webhooks
//! specification says, and retries them on [`DEFAULT_SCHEDULE`] (or a 429's or 503's
//! `Retry-After`). Per endpoint and user a message is sent only once the ones before it are
//! delivered or failed. Every address is resolved and checked here, at each delivery (against
//! DNS rebinding), unless `WAYMARK_WEBHOOK_ALLOW_PRIVATE=1`. See docs/events.md, "Webhooks".

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use futures::StreamExt;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::logbook::NewRecords;
use super::outbox::{
    Attempt, Delivery, MAX_ATTEMPTS_KEPT, Message, PendingRef, Status, WORK_SHARDS, WorkMark, log_pk, messages_pk,
    new_delivery, pending_pk, work_pk, work_sk,
};
use super::{Endpoint, is_public};
use crate::error::ApiError;
use crate::project::{KeyKind, Project};
use crate::store::{Cond, Item, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;

pub const USER_AGENT: &str = concat!("Waymark-Webhooks/", env!("CARGO_PKG_VERSION"));
/// Seconds to wait after each failed attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (eight
/// attempts over about 27.6 hours).
pub const DEFAULT_SCHEDULE: &[u64] = &[5, 300, 1800, 7200, 18000, 36000, 36000];
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
/// Five days of nothing but failures disable an endpoint.
pub const DEFAULT_DISABLE_AFTER_SECONDS: u64 = 5 * 24 * 3600;
/// Longest `Retry-After` honoured.
const MAX_RETRY_AFTER_SECONDS: u64 = 24 * 3600;
/// How long the record of an attempt the receiver accepted is written again while the store is
/// throttled or failing, past the store's own retry budget: giving up would send the message
/// again (a duplicate that no crash or replay explains).
const RECORD_PATIENCE: Duration = Duration::from_secs(30);
/// Most characters of a receiver's response kept in the log.
const RESPONSE_KEPT: usize = 1000;
/// Users served at once per endpoint.
const PARALLEL_USERS: usize = 8;
/// Pending deliveries of one user read (and at most attempted) in one pass.
pub const RUN_PER_PASS: usize = 50;
/// How long the worker lets new messages gather after being woken.
const COALESCE: Duration = Duration::from_millis(5);
/// The longest nap with nothing due. Whatever queues a message in this process wakes the worker
/// (ingest, trip requests, replays, tests, the sweep), and the pass returns when its next retry
/// is due, so the poll only bounds how late work of another writer is seen: a query of each
/// of the [`WORK_SHARDS`] a poll (32 read units a second at a 1 s poll, a fix's cost many times
/// over at a sparse load), where the Lambda sender is woken by the stream and once a minute.
const IDLE_POLL: Duration = Duration::from_secs(10);
/// A pending run whose messages are gone this long after it was queued was left by retention's
/// sweeper (a pass that stored messages redoes them within minutes).
const ORPHAN_RUN_SECONDS: i64 = 24 * 3600;
/// The nap after a pass that failed (a store fault): its work is tried again soon.
const AFTER_ERROR: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub schedule: Vec<Duration>,
    pub timeout: Duration,
    pub disable_after: Duration,
    pub allow_private: bool,
}

impl DeliveryConfig {
    /// Defaults, overridden by `WAYMARK_WEBHOOK_RETRY_SCHEDULE` (comma-separated seconds),
    /// `WAYMARK_WEBHOOK_TIMEOUT_SECONDS`, `WAYMARK_WEBHOOK_DISABLE_AFTER_SECONDS` and
    /// `WAYMARK_WEBHOOK_ALLOW_PRIVATE=1`.
    pub fn from_env(env: &crate::config::Env) -> Self {
        let schedule = env
            .get("WAYMARK_WEBHOOK_RETRY_SCHEDULE")
            .map(|s| s.split(',').filter_map(|x| x.trim().parse::<f64>().ok()).map(Duration::from_secs_f64).collect())
            .unwrap_or_else(|| DEFAULT_SCHEDULE.iter().map(|s| Duration::from_secs(*s)).collect());
        Self {
            schedule,
            timeout: env.seconds("WAYMARK_WEBHOOK_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_SECONDS),
            disable_after: env.seconds("WAYMARK_WEBHOOK_DISABLE_AFTER_SECONDS", DEFAULT_DISABLE_AFTER_SECONDS),
            allow_private: super::allow_private(env),
        }
    }
}

/// The `webhook-signature` value for one secret (`whsec_<base64 key>`).
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> Option<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64.decode(secret.strip_prefix("whsec_")?).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    Some(format!("v1,{}", b64.encode(mac.finalize().into_bytes())))
}

/// Resolves names and keeps only public addresses (unless private ones are allowed), so a name
/// that resolves to an internal address at delivery time is refused.
struct PublicOnly {
    allow_private: bool,
}

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let ok: Vec<SocketAddr> = addrs.into_iter().filter(|a| allow || is_public(a.ip())).collect();
            if ok.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(ok.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

enum Outcome {
    /// Delivered, or failed for good: the next message of the user may go.
    Final,
    /// Waiting for a retry (or for its records to be written): the user's later messages wait.
    Wait(Timestamp),
}

pub struct Worker {
    store: Arc<dyn Store>,
    cfg: DeliveryConfig,
    client: reqwest::Client,
}

impl Worker {
    pub fn new(store: Arc<dyn Store>, cfg: DeliveryConfig) -> Result<Self, String> {
        let tls = crate::tls::rustls_config().map_err(|e| format!("webhook client TLS: {e}"))?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .user_agent(USER_AGENT)
            .timeout(cfg.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(PublicOnly { allow_private: cfg.allow_private }))
            .build()
            .map_err(|e| format!("webhook client: {e}"))?;
        Ok(Self { store, cfg, client })
    }

    /// Serve forever: work whatever is due, then sleep until woken (new messages) or until the
    /// next retry is due (at most [`IDLE_POLL`]; [`AFTER_ERROR`] after a failed pass).
    pub async fn run(self, wake: Arc<tokio::sync::Notify>) {
        loop {
            let (next, longest) = match self.run_once().await {
                Ok(n) => (n, IDLE_POLL),
                Err(e) => {
                    tracing::warn!(error = %e.msg, "webhook delivery pass failed");
                    (None, AFTER_ERROR)
                }
            };
            let now = Timestamp::now();
            let nap = next.map_or(longest, |t| (t.0 - now.0).to_std().unwrap_or(Duration::ZERO)).min(longest);
            tokio::select! {
                // Let a burst of ingests land first: one pass then sends all their messages
                // instead of a pass (a scan of the work marks) per batch.
                _ = wake.notified() => tokio::time::sleep(COALESCE).await,
                _ = tokio::time::sleep(nap) => {}
            }
        }
    }

    /// One pass over every endpoint with pending deliveries. Returns when the next retry is due.
    pub async fn run_once(&self) -> Result<Option<Timestamp>, ApiError> {
        self.run_shards(0..WORK_SHARDS).await
    }

    /// [`Self::run_shards`] again while work is due at once (a user's run cut at
    /// [`RUN_PER_PASS`]), until `deadline`: what an invocation of the Lambda sender does, which
    /// has no loop of its own around it.
    pub async fn drain(&self, shards: &[u32], deadline: Instant) -> Result<Option<Timestamp>, ApiError> {
        loop {
            let next = self.run_shards(shards.iter().copied()).await?;
            if next.is_none_or(|t| t > Timestamp::now()) || Instant::now() >= deadline {
                return Ok(next);
            }
        }
    }

    /// [`Self::run_once`] over the endpoints whose work marks are in `shards` (those a stream
    /// batch wrote to: a query of each, and none for a batch that names none).
    pub async fn run_shards(&self, shards: impl IntoIterator<Item = u32>) -> Result<Option<Timestamp>, ApiError> {
        let mut next: Option<Timestamp> = None;
        for shard in shards {
            let marks = self.store.query(Table::Main, &Query::new(work_pk(shard), SkRange::All)).await?.items;
            for item in marks {
                let mark: WorkMark = from_item(item)?;
                if let Some(t) = self.work_endpoint(shard, &mark).await? {
                    next = Some(next.map_or(t, |n: Timestamp| n.min(t)));
                }
            }
        }
        Ok(next)
    }

    async fn work_endpoint(&self, shard: u32, mark: &WorkMark) -> Result<Option<Timestamp>, ApiError> {
        let store = self.store.as_ref();
        let p =
            Project { project_id: mark.project_id.clone(), account_id: mark.account_id.clone(), kind: KeyKind::Secret };
        let mark_sk = work_sk(&mark.project_id, &mark.webhook_id, mark.shard);
        let drop_mark = || async {
            match store
                .delete(Table::Main, &work_pk(shard), &mark_sk, Cond::Equals("nonce", mark.nonce.clone().into()))
                .await
            {
                Ok(()) | Err(StoreError::ConditionFailed) => Ok::<_, ApiError>(None),
                Err(e) => Err(e.into()),
            }
        };
        let endpoint = match super::get(store, &p, &mark.webhook_id).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => return drop_mark().await,
            Err(e) => return Err(e),
        };
        let ppk = pending_pk(&p.project_id, &endpoint.id, mark.shard);
        if !endpoint.enabled {
            // What waits for it goes in its log, once: enabling it again puts marks back. A
            // message still being written keeps the mark for the next look.
            if !super::logbook::park(store, &p, &endpoint.id, mark.shard, &ppk).await? {
                return Ok(None);
            }
            return drop_mark().await;
        }
        let runs = heads(store, &ppk).await?;
        if runs.is_empty() {
            return drop_mark().await;
        }
        let results: Vec<(Result<Option<Timestamp>, ApiError>, bool, usize)> =
            futures::stream::iter(runs.into_values())
                .map(|run| self.work_run(&p, &endpoint, mark.shard, run))
                .buffer_unordered(PARALLEL_USERS)
                .collect()
                .await;
        let mut next: Option<Timestamp> = None;
        let (mut ok, mut failed) = (false, 0);
        for (r, any_ok, fails) in results {
            ok |= any_ok;
            failed += fails;
            if let Some(t) = r? {
                next = Some(next.map_or(t, |n: Timestamp| n.min(t)));
            }
        }
        self.track_health(&p, &endpoint, ok, failed).await?;
        Ok(next)
    }

    /// Send one user's pending messages in order until one has to wait (at most [`RUN_PER_PASS`]:
    /// the rest go in the next pass, which comes at once).
    async fn work_run(
        &self,
        p: &Project,
        ep: &Endpoint,
        shard: u32,
        run: Vec<(String, PendingRef)>,
    ) -> (Result<Option<Timestamp>, ApiError>, bool, usize) {
        let user = run.first().and_then(|(sk, _)| sk.split('#').next()).filter(|u| *u != "-").map(str::to_owned);
        let ids = run.iter().flat_map(|(_, r)| r.ids()).collect();
        let mut log = NewRecords::new(log_pk(&p.project_id, &ep.id, shard), ids);
        let (result, any_ok, fails) = self.work_run_logged(p, ep, shard, run, &mut log).await;
        match log.close(self.store.as_ref(), p, user.as_deref()).await {
            Ok(()) => (result, any_ok, fails),
            Err(e) => (Err(e), any_ok, fails),
        }
    }

    /// [`Self::work_run`], the log's new records in `log`.
    async fn work_run_logged(
        &self,
        p: &Project,
        ep: &Endpoint,
        shard: u32,
        run: Vec<(String, PendingRef)>,
        log: &mut NewRecords,
    ) -> (Result<Option<Timestamp>, ApiError>, bool, usize) {
        let (mut any_ok, mut fails) = (false, 0);
        // A run cut at RUN_PER_PASS has more behind it: the next pass is due now.
        let more = (run.len() >= RUN_PER_PASS).then(Timestamp::now);
        let mut sent = 0;
        for k in 0..run.len() {
            let (sk, r) = (&run[k].0, &run[k].1);
            if r.next_attempt_at > Timestamp::now() {
                let parked = self.park_behind(p, ep, shard, run[k..].to_vec()).await;
                return (parked.map(|()| Some(r.next_attempt_at)), any_ok, fails);
            }
            let ids = r.ids();
            for i in 0..ids.len() {
                if sent >= RUN_PER_PASS {
                    // Cut here: the rest of the entry waits for the next pass, which is due now
                    // (its deliveries already final are not looked at again).
                    let cut = async {
                        let rest = to_item(
                            &pending_pk(&p.project_id, &ep.id, shard),
                            sk,
                            &r.rest(&ids, i, r.next_attempt_at),
                        )?;
                        Ok::<_, ApiError>(self.store.put(Table::Main, rest, Cond::None).await?)
                    };
                    let cut = if i > 0 { cut.await } else { Ok(()) };
                    return (cut.map(|()| Some(Timestamp::now())), any_ok, fails);
                }
                sent += 1;
                match self.attempt(p, ep, shard, sk, r, i, log).await {
                    Ok((Outcome::Final, delivered)) => {
                        any_ok |= delivered;
                        fails += usize::from(!delivered);
                    }
                    Ok((Outcome::Wait(t), _)) => {
                        // The entry as the attempt left it, and the run's later ones.
                        let behind =
                            std::iter::once((sk.clone(), r.rest(&ids, i, t))).chain(run[k + 1..].iter().cloned());
                        let parked = self.park_behind(p, ep, shard, behind.collect()).await;
                        return (parked.map(|()| Some(t)), any_ok, fails + 1);
                    }
                    Err(e) => return (Err(e), any_ok, fails),
                }
            }
        }
        (Ok(more), any_ok, fails)
    }

    /// A user's deliveries wait behind one that waits for a retry: those of `entries` (pending
    /// entries as stored now) that the log does not show yet are logged pending (parked), once:
    /// the entries are marked so. A receiver that is down costs a write a delivery, as before
    /// the log was written at first attempt; one that takes them at once costs none.
    async fn park_behind(
        &self,
        p: &Project,
        ep: &Endpoint,
        shard: u32,
        entries: Vec<(String, PendingRef)>,
    ) -> Result<(), ApiError> {
        let store = self.store.as_ref();
        let entries: Vec<(String, PendingRef)> = entries.into_iter().filter(|(_, r)| !r.parked).collect();
        let Some((first, _)) = entries.first() else { return Ok(()) };
        let user = first.split('#').next().filter(|u| *u != "-");
        let ids: Vec<String> = entries.iter().flat_map(|(_, r)| r.ids()).collect();
        if !super::logbook::park_ids(store, p, &ep.id, shard, user, ids).await? {
            // Some message is not written yet: parked again at the next wait.
            return Ok(());
        }
        let ppk = pending_pk(&p.project_id, &ep.id, shard);
        for (sk, r) in entries {
            let item = to_item(&ppk, &sk, &PendingRef { parked: true, ..r })?;
            // Exists: an entry finished or erased meanwhile is not brought back.
            match store.put(Table::Main, item, Cond::Exists).await {
                Ok(()) | Err(StoreError::ConditionFailed) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// One attempt at delivery `i` of pending entry `sk` (`r`, its [`PendingRef::ids`]); returns what it means for
    /// the run and whether it succeeded. The entry goes with its last delivery made final; a
    /// delivery that waits rewrites it as the run from that delivery on. A delivery the log
    /// does not hold yet enters it with this attempt (counted in `log`).
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        p: &Project,
        ep: &Endpoint,
        shard: u32,
        sk: &str,
        r: &PendingRef,
        i: usize,
        log: &mut NewRecords,
    ) -> Result<(Outcome, bool), ApiError> {
        let store = self.store.as_ref();
        let ids = r.ids();
        let event_id = ids[i].as_str();
        let last = i + 1 == ids.len();
        let lpk = log_pk(&p.project_id, &ep.id, shard);
        let ppk = pending_pk(&p.project_id, &ep.id, shard);
        let drop_ref = WriteOp::Delete { table: Table::Main, pk: ppk.clone(), sk: sk.to_owned(), cond: Cond::None };
        let ppk_ref = ppk.as_str();
        let done = |delivered: bool| async move {
            if last {
                store.delete(Table::Main, ppk_ref, sk, Cond::None).await?;
            }
            Ok::<_, ApiError>((Outcome::Final, delivered))
        };
        // The message read eventually consistent (half a read unit): only an erasure's redaction
        // rewrites one (a body read a moment before it may still name the erased user), and one
        // not seen yet waits a second like one not written yet. The record is read strongly: a
        // stale one could send again what was just delivered.
        let mq = Query::new(messages_pk(&p.project_id, shard), SkRange::Between(event_id.into(), event_id.into()));
        let (logged, Some(m)) = (
            store.get(Table::Main, &lpk, event_id).await?,
            store.query(Table::Main, &mq.limit(1).eventual()).await?.items.pop(),
        ) else {
            // A run queued long ago whose message is gone was swept by retention (which deletes
            // single entries with their messages, not runs): nothing is left to send.
            if r.queued_at.is_some_and(|q| (Timestamp::now().0 - q.0).num_seconds() > ORPHAN_RUN_SECONDS) {
                return done(false).await;
            }
            // Written by a step still under way (or re-run after a crash): wait for it.
            return Ok((Outcome::Wait(Timestamp(Timestamp::now().0 + chrono::Duration::seconds(1))), false));
        };
        let m: Message = from_item(m)?;
        // Not in the log yet: this attempt is its first, and its record the log's first entry.
        let mut is_new = logged.is_none();
        let d: Delivery = match logged {
            Some(d) => from_item(d)?,
            None => new_delivery(&ep.id, &m, r.queued_at.unwrap_or(r.next_attempt_at), Timestamp::now()),
        };
        if d.status != Status::Pending {
            return done(d.status == Status::Delivered).await;
        }
        if is_new {
            log.register(store).await?;
        }
        let now = Timestamp::now();
        let (attempt, retry_after) = self.send(ep, &m, now).await;
        let success = attempt.status_code.is_some_and(|s| (200..300).contains(&s));
        tracing::info!(
            request_id = m.request_id.as_deref().unwrap_or("-"), event_id = %m.id, webhook_id = %ep.id,
            status = ?attempt.status_code, error = attempt.error.as_deref().unwrap_or(""), "webhook attempt"
        );
        // The record is written back only if nobody wrote it meanwhile (`updated_at` moves on
        // every write). Another worker may have attempted the same message, or a replay may have
        // come: then the attempt is added to the record as it is now, and decides nothing a
        // replay asked for after it started.
        let round = d.round;
        let mut current = d;
        for _ in 0..5 {
            let read_at = serde_json::to_value(current.updated_at).map_err(ApiError::internal)?;
            let mut d = current.clone();
            let decides = d.round == round && d.status == Status::Pending;
            let outcome = if decides {
                self.apply(&mut d, attempt.clone(), success, retry_after)
            } else {
                log_attempt(&mut d, attempt.clone());
                d.updated_at = super::outbox::later(Timestamp::now(), d.updated_at);
                // The record decides (delivered elsewhere, or replayed: sent again).
                Outcome::Wait(Timestamp::now())
            };
            let cond = if is_new { Cond::NotExists } else { Cond::Equals("updated_at", read_at) };
            let record_item = to_item(&lpk, event_id, &d)?;
            let pending = match &outcome {
                _ if !decides => None,
                Outcome::Final if last => Some(drop_ref.clone()),
                Outcome::Final => None,
                Outcome::Wait(at) => {
                    let next = to_item(&ppk, sk, &r.rest(&ids, i, *at))?;
                    Some(WriteOp::Put { table: Table::Main, item: next, cond: Cond::None })
                }
            };
            match record(store, (record_item, cond), pending, success).await {
                Ok(()) => {
                    if is_new {
                        log.stored(&d);
                    }
                    return Ok((outcome, success));
                }
                Err(StoreError::ConditionFailed) => {
                    let Some(item) = store.get(Table::Main, &lpk, event_id).await? else { break };
                    current = from_item(item)?;
                    // Our own write, its answer lost (on DynamoDB the transaction's token makes
                    // that a success; this is the check where it did not).
                    if current.attempts.iter().any(|a| a.at == attempt.at) {
                        if is_new {
                            log.stored(&d);
                        }
                        return Ok((Outcome::Wait(Timestamp::now()), success));
                    }
                    // Another worker logged it first: rewrite the record as it is now.
                    is_new = false;
                }
                Err(e) => {
                    if is_new {
                        log.unknown();
                    }
                    return Err(e.into());
                }
            }
        }
        // Written over and over by others: the record as it is decides the next step.
        Ok((Outcome::Wait(Timestamp::now()), success))
    }

    /// An attempt's outcome on a pending record of the current round: delivered, failed for
    /// good, or the next attempt's time.
    fn apply(&self, d: &mut Delivery, attempt: Attempt, success: bool, retry_after: Option<Duration>) -> Outcome {
        log_attempt(d, attempt);
        d.round_attempts += 1;
        d.updated_at = super::outbox::later(Timestamp::now(), d.updated_at);
        if success {
            d.status = Status::Delivered;
            d.next_attempt_at = None;
            Outcome::Final
        } else if d.round_attempts > self.cfg.schedule.len() {
            d.status = Status::Failed;
            d.next_attempt_at = None;
            Outcome::Final
        } else {
            let planned = self.cfg.schedule[d.round_attempts - 1].mul_f64(0.8 + 0.4 * rand::random::<f64>());
            let wait = retry_after.unwrap_or(planned);
            let at =
                Timestamp(d.updated_at.0 + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::hours(24)));
            d.next_attempt_at = Some(at);
            Outcome::Wait(at)
        }
    }

    /// POST the message; the attempt as logged, and `Retry-After` when a 429 or 503 gave one.
    async fn send(&self, ep: &Endpoint, m: &Message, now: Timestamp) -> (Attempt, Option<Duration>) {
        let ts = now.0.timestamp();
        let signatures: Vec<String> =
            ep.signing_secrets(now).into_iter().filter_map(|s| sign(s, &m.id, ts, &m.body)).collect();
        let started = Instant::now();
        let mut attempt = Attempt { at: now, status_code: None, error: None, latency_ms: 0, response: None };
        // IP literals never reach the resolver: check the URL itself at every delivery too.
        if let Err(e) = super::check_url("url", &ep.url, self.cfg.allow_private) {
            attempt.error = Some(e.msg);
            return (attempt, None);
        }
        let res = self
            .client
            .post(&ep.url)
            .header("content-type", "application/json")
            .header("webhook-id", &m.id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signatures.join(" "))
            .body(m.body.clone())
            .send()
            .await;
        let mut retry_after = None;
        match res {
            Ok(res) => {
                let status = res.status().as_u16();
                attempt.status_code = Some(status);
                if status == 429 || status == 503 {
                    retry_after = res
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(|s| Duration::from_secs(s.min(MAX_RETRY_AFTER_SECONDS)));
                }
                if let Ok(text) = res.text().await {
                    attempt.response = Some(text.chars().take(RESPONSE_KEPT).collect());
                }
            }
            Err(e) => {
                attempt.error = Some(if e.is_timeout() {
                    format!("timed out after {} s", self.cfg.timeout.as_secs_f64())
                } else if e.is_connect() {
                    "could not connect".to_owned()
                } else {
                    "request failed".to_owned()
                });
            }
        }
        attempt.latency_ms = started.elapsed().as_millis() as u64;
        (attempt, retry_after)
    }

    /// Remember when an endpoint started failing; disable it after the configured period.
    async fn track_health(&self, p: &Project, ep: &Endpoint, ok: bool, failed: usize) -> Result<(), ApiError> {
        let now = Timestamp::now();
        if ok && ep.failing_since.is_some() {
            super::modify(self.store.as_ref(), p, &ep.id, |e| {
                e.failing_since = None;
                Ok(())
            })
            .await?;
        } else if !ok && failed > 0 {
            let since = ep.failing_since.unwrap_or(now);
            let disable = (now.0 - since.0).to_std().unwrap_or_default() >= self.cfg.disable_after;
            if ep.failing_since.is_none() || disable {
                let hours = self.cfg.disable_after.as_secs_f64() / 3600.0;
                super::modify(self.store.as_ref(), p, &ep.id, |e| {
                    e.failing_since.get_or_insert(since);
                    if disable {
                        e.enabled = false;
                        e.disabled_reason = Some(format!("every delivery attempt failed for {hours} hours"));
                    }
                    Ok(())
                })
                .await?;
            }
        }
        Ok(())
    }
}

/// Add an attempt to the log, keeping the newest [`MAX_ATTEMPTS_KEPT`].
fn log_attempt(d: &mut Delivery, attempt: Attempt) {
    d.attempts.push(attempt);
    if d.attempts.len() > MAX_ATTEMPTS_KEPT {
        d.attempts.remove(0);
    }
}

/// The head of every user's run of pending deliveries, at most [`RUN_PER_PASS`] each, in event
/// order. Pending references sort by user, then event: a skip scan reads each user's first ones
/// and jumps past the rest (`<user>#~` sorts after every `<user>#<event id>`), so one user's
/// backlog never hides another user's (a single read of the first 1,000 did: after a burst of
/// restarts, users of high ids waited for minutes).
async fn heads(store: &dyn Store, ppk: &str) -> Result<BTreeMap<String, Vec<(String, PendingRef)>>, ApiError> {
    let mut runs: BTreeMap<String, Vec<(String, PendingRef)>> = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let page =
            store.query(Table::Main, &Query::new(ppk, SkRange::All).after(after.take()).limit(RUN_PER_PASS)).await?;
        let mut last_user = None;
        for item in page.items {
            let sk = item.get("sk").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            let user = sk.split('#').next().unwrap_or("-").to_owned();
            runs.entry(user.clone()).or_default().push((sk, from_item::<PendingRef>(item)?));
            last_user = Some(user);
        }
        match (page.last_sk, last_user) {
            (Some(_), Some(user)) => after = Some(format!("{user}#~")),
            _ => return Ok(runs),
        }
    }
}

/// Writes an attempt's record, then its pending reference: two single writes, not one
/// transaction, which would cost twice the write units of both. The record is the truth and
/// the reference a hint the worker checks against it, so a failure between the two is
/// harmless: a final record's reference left behind is dropped unsent; a pending one's old
/// time brings its next attempt forward, once. After a delivered attempt a store that stays
/// unavailable is tried again for [`RECORD_PATIENCE`]; a failed attempt's record may be lost
/// (the attempt is then made again).
async fn record(
    store: &dyn Store,
    (item, cond): (Item, Cond),
    pending: Option<WriteOp>,
    delivered: bool,
) -> Result<(), StoreError> {
    let started = Instant::now();
    loop {
        match store.put(Table::Main, item.clone(), cond.clone()).await {
            Err(StoreError::Unavailable(cause)) if delivered && started.elapsed() < RECORD_PATIENCE => {
                tracing::warn!(%cause, "webhook delivered, its record not written yet; writing again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Ok(()) => break,
            other => return other,
        }
    }
    let done = match pending {
        Some(WriteOp::Delete { table, pk, sk, cond }) => store.delete(table, &pk, &sk, cond).await,
        Some(WriteOp::Put { table, item, cond }) => store.put(table, item, cond).await,
        Some(other) => store.transact(vec![other]).await,
        None => Ok(()),
    };
    match done {
        Err(e) if delivered => {
            tracing::warn!(error = %e, "webhook delivered and recorded; its pending reference is left for the worker to drop");
            Ok(())
        }
        other => other,
    }
}

/// Queue a `webhook.test` event for one endpoint (whatever types it subscribes to).
pub async fn send_test(store: &dyn Store, p: &Project, ep: &Endpoint) -> Result<String, ApiError> {
    let id = crate::ids::new_id();
    let e = super::HookEvent {
        id: id.clone(),
        kind: "webhook.test",
        user_id: None,
        created_at: Timestamp::now(),
        data: serde_json::json!({"webhook_id": ep.id, "message": "a test event from Waymark"}),
    };
    super::outbox::write(store, p, std::slice::from_ref(ep), &[e]).await?;
    Ok(id)
}
