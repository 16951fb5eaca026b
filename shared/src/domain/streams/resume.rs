//! Resuming a stream: the stored messages after the last id a client saw, in id order (which is
//! the order of each user's events: docs/streams.md), page by page. A resume id older than the
//! project's retention is refused (its messages may be gone): the client learns it rather than
//! silently missing events.

use super::StreamMessage;
use crate::domain::history_pages::merged;
use crate::domain::webhooks::outbox::{Message, OUTBOX_SHARDS, messages_pk};
use crate::error::{ApiError, Kind};
use crate::ids::{is_id, time_of};
use crate::paging::Order;
use crate::project::Project;
use crate::store::{Query, SkRange, Store, Table, from_jsons};
use crate::time::Timestamp;

/// Messages read per store query while resuming.
pub const PAGE: usize = 500;

/// Check a resume id (`field` names where it came from: `Last-Event-ID`, `since`): an id, and
/// not older than what the project keeps. A resume id older than retention is `Kind::Gone`.
pub async fn check(store: &dyn Store, p: &Project, field: &str, after: &str) -> Result<(), ApiError> {
    let at = time_of(after)
        .filter(|_| is_id(after))
        .ok_or_else(|| ApiError::field(field, format!("'{after}' is not an event id (24 hexadecimal characters)")))?;
    if let Some(days) = crate::domain::settings::retention_days(store, &p.project_id).await? {
        let cutoff = crate::expiry::cutoff(days, Timestamp::now());
        if at < cutoff.0 {
            return Err(ApiError::new(
                Kind::Gone,
                format!(
                    "{field}: event '{after}' is older than this project's retention of {days} days, so events after \
                     it may be gone; read the events API for what is kept, then open the stream without a resume id"
                ),
            ));
        }
    }
    Ok(())
}

/// Up to [`PAGE`] stored messages with ids after `after`, in id order (fewer: the end): the
/// first [`PAGE`] of every outbox shard's, merged.
pub async fn page(store: &dyn Store, p: &Project, after: &str) -> Result<Vec<StreamMessage>, ApiError> {
    let qs: Vec<Query> = (0..OUTBOX_SHARDS)
        .map(|s| Query::new(messages_pk(&p.project_id, s), SkRange::All).after(Some(after.to_owned())).limit(PAGE))
        .collect();
    let mut docs = merged::merge(store.query_docs_many(Table::Main, &qs).await?, Order::OldestFirst)?;
    docs.truncate(PAGE);
    // Reads leave out what is past its TTL (see `store`).
    Ok(from_jsons::<Message>(&docs)?.iter().map(StreamMessage::of).collect())
}
