//! A user's sequence: the watermark (`<project>#PW#<user>`), the newest fix whose derived work
//! (events, messages) is done. The processor moves it past each pass; a trip control moves it
//! past the control's own place, so that every message of a user, a control's included, has a
//! larger id than the ones before it, whatever order fixes and controls arrive in (a fix
//! recorded before a control and sent after it is late, as an offline batch is: stored and
//! counted in trip figures, no events). Streams and webhooks then resume exactly per user.
//!
//! The watermark also keeps the user's latest location (`latest`): every pass writes this item,
//! in the user's own partition, so the latest fix costs no write of its own. It lived on the user
//! record, in the project's users list, where every pass of every user rewrote it: that one
//! partition capped a project at about 4,800 fixes a second (docs/architecture.md, "Partitions").

use serde::{Deserialize, Serialize};

use super::locations::Location;
use crate::error::ApiError;
use crate::project::Project;
use crate::store::{Cond, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, from_json, to_item};
use crate::time::Timestamp;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Watermark {
    /// Sort key of the newest fix processed, or above every fix of a control's millisecond.
    pub last_id: Option<String>,
    pub last_at: Option<Timestamp>,
    pub version: u64,
    /// The newest fix by recorded time that a pass has taken: the user's `last_location_update`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<Location>,
    /// Written by an erasure's first step with the record's removal: a pass that reads it finds
    /// no user, whatever record it was handed (`pipeline::processor`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub erasing: bool,
}

/// Key of a user's watermark.
pub fn pk(pid: &str, uid: &str) -> String {
    [pid, "#PW#", uid].concat()
}

pub async fn read(store: &dyn Store, p: &Project, user_id: &str) -> Result<Watermark, ApiError> {
    let item = store.get(Table::Main, &pk(&p.project_id, user_id), "-").await?;
    Ok(item.map(from_item).transpose()?.unwrap_or_default())
}

/// The latest locations of these users, in their order (None for a user no pass has moved since
/// the location left the user record): one read of each user's own partition.
pub async fn latest_of(store: &dyn Store, p: &Project, user_ids: &[&str]) -> Result<Vec<Option<Location>>, ApiError> {
    let qs: Vec<Query> =
        user_ids.iter().map(|u| Query::new(pk(&p.project_id, u), SkRange::Between("-".into(), "-".into()))).collect();
    let docs = store.query_docs_many(Table::Main, &qs).await?;
    docs.into_iter()
        .map(|d| match d.first() {
            Some(doc) => Ok(from_json::<Watermark>(doc)?.latest),
            None => Ok(None),
        })
        .collect()
}

/// The put of `next` over `read` (the watermark as it was read): fails with ConditionFailed
/// when another pass or control moved it meanwhile.
pub fn put(p: &Project, user_id: &str, next: &Watermark, read: &Watermark) -> Result<WriteOp, StoreError> {
    Ok(WriteOp::Put {
        table: Table::Main,
        item: to_item(&pk(&p.project_id, user_id), "-", next)?,
        cond: if read.version == 0 { Cond::NotExists } else { Cond::Equals("version", read.version.into()) },
    })
}

/// Where a control at `at` goes in the user's sequence: at `at`, or just after the newest fix
/// already processed when that is later (its messages are out: nothing may come before them).
pub fn place(wm: &Watermark, at: Timestamp) -> Timestamp {
    match wm.last_at {
        Some(l) if l >= at => Timestamp(l.0 + chrono::Duration::milliseconds(1)),
        _ => at,
    }
}

/// The watermark past a control placed at `t`: fixes recorded up to `t` (its millisecond
/// included) are behind it.
pub fn past(wm: &Watermark, t: Timestamp) -> Watermark {
    let id = crate::ids::id_at(t.0, u64::MAX);
    Watermark {
        last_id: Some(wm.last_id.clone().filter(|l| *l > id).unwrap_or(id)),
        last_at: Some(wm.last_at.filter(|l| *l > t).unwrap_or(t)),
        version: wm.version + 1,
        latest: wm.latest.clone(),
        erasing: wm.erasing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(ms: i64) -> Timestamp {
        Timestamp(chrono::DateTime::from_timestamp_millis(ms).unwrap())
    }

    #[test]
    fn a_control_goes_after_what_is_out_and_moves_the_watermark_past_itself() {
        let fix = crate::ids::id_at(ts(1_000).0, 77);
        let wm = Watermark { last_id: Some(fix.clone()), last_at: Some(ts(1_000)), version: 3, ..Watermark::default() };
        // Later than the newest fix: at its own time.
        assert_eq!(place(&wm, ts(5_000)), ts(5_000));
        // Before it (a start dated back): just after it.
        assert_eq!(place(&wm, ts(500)), ts(1_001));
        let next = past(&wm, ts(5_000));
        assert_eq!(next.version, 4);
        assert!(next.last_id.as_deref().unwrap() > crate::ids::id_at(ts(5_000).0, u64::MAX - 1).as_str());
        assert!(next.last_id.as_deref().unwrap() < crate::ids::id_at(ts(5_001).0, 0).as_str());
        // Never back.
        let back = past(
            &Watermark {
                last_at: Some(ts(9_000)),
                last_id: Some(crate::ids::id_at(ts(9_000).0, 1)),
                version: 1,
                ..Watermark::default()
            },
            ts(5_000),
        );
        assert_eq!(back.last_at, Some(ts(9_000)));
    }
}
