//! The worker's writes to an endpoint's delivery log (`#WL`): a delivery enters it when the
//! worker first takes it up, written once for a delivery that succeeds at its first attempt
//! (a record put at enqueue and rewritten by the attempt wrote it twice: about 0.8 write units a
//! fix at city density). The log pages by its own counts (`history_pages`), so the records a run
//! creates are counted: the run registers in their buckets before its first new record and
//! finishes with what it stored. And an erasure must not miss them: it deletes a user's log
//! entries by their messages' ids, so a record created just after that would outlive the user;
//! a run that created records reads the user's watermark afterwards and takes them out again if
//! the user is being erased.

use super::outbox::{Delivery, Message, log_pk, messages_pk, new_delivery};
use crate::domain::{history_pages, sequence, users};
use crate::error::ApiError;
use crate::project::Project;
use crate::store::{Query, SkRange, Store, StoreError, Table, from_item, key_of, to_item};
use crate::time::Timestamp;

/// The records one run of the worker (one user's deliveries to one endpoint) adds to the log.
pub(super) struct NewRecords {
    pk: String,
    /// The run's event ids: the buckets it registers in.
    ids: Vec<String>,
    writer: Option<history_pages::Writer>,
    stored: Vec<(String, Option<i64>)>,
    /// A write whose outcome is unknown: the buckets are left to be recounted.
    unknown: bool,
}

impl NewRecords {
    pub(super) fn new(pk: String, ids: Vec<String>) -> Self {
        Self { pk, ids, writer: None, stored: Vec::new(), unknown: false }
    }

    /// Before a new record's put: registered in the run's buckets, once a run.
    pub(super) async fn register(&mut self, store: &dyn Store) -> Result<(), StoreError> {
        if self.writer.is_none() {
            let ids: Vec<&str> = self.ids.iter().map(String::as_str).collect();
            self.writer = Some(history_pages::begin(store, Table::Main, &self.pk, &ids).await?);
        }
        Ok(())
    }

    /// A new record that was stored: its event id and TTL (`expires_at`).
    pub(super) fn stored(&mut self, d: &Delivery) {
        self.stored.push((d.event_id.clone(), d.expires_at));
    }

    /// A new record's put that may or may not have happened.
    pub(super) fn unknown(&mut self) {
        self.unknown = true;
    }

    /// After the run: the count finished and, when the run created records, the erasure check.
    pub(super) async fn close(self, store: &dyn Store, p: &Project, user_id: Option<&str>) -> Result<(), ApiError> {
        let Some(writer) = self.writer else { return Ok(()) };
        let stored = (!self.unknown).then_some(self.stored.as_slice());
        if let Err(e) = history_pages::finish(store, writer, stored).await {
            // The writer goes dead within a minute and its buckets are recounted.
            tracing::warn!(error = %e, "delivery log counts left to be recounted");
        }
        let Some(user) = user_id else { return Ok(()) };
        if self.stored.is_empty() && !self.unknown {
            return Ok(());
        }
        if erased(store, p, user).await? {
            let keys: Vec<(String, String)> = self.ids.iter().map(|id| (self.pk.clone(), id.clone())).collect();
            take_out(store, keys).await?;
        }
        Ok(())
    }
}

/// Whether `user` is being erased or is gone. An erasure's first step removes the user record
/// and marks the watermark erasing in one transaction: a watermark read after a record's put
/// that is not so marked (or a user record still there) means the erasure, if any, comes later
/// and finds the record.
async fn erased(store: &dyn Store, p: &Project, user: &str) -> Result<bool, ApiError> {
    if let Some(item) = store.get(Table::Main, &sequence::pk(&p.project_id, user), "-").await? {
        return Ok(from_item::<sequence::Watermark>(item)?.erasing);
    }
    // No watermark (a user with trips and no fix yet, or past the erasure's last step).
    Ok(users::get(store, p, user).await?.is_none())
}

/// Delete log entries, counted as deletes (the log pages by its counts).
async fn take_out(store: &dyn Store, keys: Vec<(String, String)>) -> Result<(), ApiError> {
    let change = history_pages::deleting(store, Table::Main, &keys).await?;
    store.delete_many(Table::Main, keys).await?;
    change.done(store).await?;
    Ok(())
}

/// Log, as pending with no attempt, every delivery queued in `ppk` (one endpoint's pending
/// entries in one outbox shard) that the log does not hold yet: what the worker does for an
/// endpoint that is disabled, so that its log shows what waits for it. Returns whether all of
/// them are logged now (not when a message is still being written).
pub(super) async fn park(store: &dyn Store, p: &Project, wh: &str, shard: u32, ppk: &str) -> Result<bool, ApiError> {
    let (mut after, mut all) = (None, true);
    loop {
        let page = store.query(Table::Main, &Query::new(ppk, SkRange::All).after(after.take()).limit(200)).await?;
        let mut by_user: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for item in &page.items {
            let (_, sk) = key_of(item)?;
            let r: super::outbox::PendingRef = from_item(item.clone())?;
            by_user.entry(sk.split('#').next().unwrap_or("-").to_owned()).or_default().extend(r.ids());
        }
        for (user, ids) in by_user {
            all &= park_ids(store, p, wh, shard, Some(user.as_str()).filter(|u| *u != "-"), ids).await?;
        }
        match page.last_sk {
            Some(sk) => after = Some(sk),
            None => return Ok(all),
        }
    }
}

/// Log these deliveries of `user` (event ids) as pending with no attempt where the log does not
/// hold them yet (counted; taken out again if the user is being erased). Returns whether every
/// one is now logged (false when a message is not there yet, or the user is erased).
pub(super) async fn park_ids(
    store: &dyn Store,
    p: &Project,
    wh: &str,
    shard: u32,
    user: Option<&str>,
    ids: Vec<String>,
) -> Result<bool, ApiError> {
    let (lpk, mpk) = (log_pk(&p.project_id, wh, shard), messages_pk(&p.project_id, shard));
    let logged = store.get_docs(Table::Main, &lpk, &ids).await?;
    let missing: Vec<String> = ids.iter().zip(logged).filter(|(_, d)| d.is_none()).map(|(id, _)| id.clone()).collect();
    if missing.is_empty() {
        return Ok(true);
    }
    let now = Timestamp::now();
    let mut items = Vec::new();
    for doc in store.get_docs(Table::Main, &mpk, &missing).await?.into_iter().flatten() {
        let m: Message = crate::store::from_json(&doc)?;
        let d: Delivery = new_delivery(wh, &m, m.created_at, now);
        items.push(to_item(&lpk, &m.id, &d)?);
    }
    let all = items.len() == missing.len();
    let (stored, unsynced) = history_pages::put_new_counted(store, Table::Main, items).await?;
    unsynced.durable().await?;
    if let Some(uid) = user.filter(|_| stored.iter().any(|s| *s))
        && erased(store, p, uid).await?
    {
        take_out(store, missing.into_iter().map(|id| (lpk.clone(), id)).collect()).await?;
        return Ok(false);
    }
    Ok(all)
}
