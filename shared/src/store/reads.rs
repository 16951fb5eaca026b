//! What a request read from the store, for answers kept whole (crate `local`'s memo): each
//! partition with the position it had when the read began, and the earliest expiry of the items
//! read. The embedded store notes them ([`EmbeddedStore`](super::EmbeddedStore), whose writes
//! move the positions) while a request runs under [`recorded`]; a read it cannot follow that way
//! (a count, a long read, a scan) marks the request [`untracked`], and the DynamoDB store
//! follows nothing.
//!
//! A request's reads are only half of what its answer depends on: the handler says the rest
//! ([`pure`]) when its answer is a function of what it read and the request alone (not of the
//! clock, nor of a cache outside the store); code that reads those says so ([`untracked`]).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use super::Table;

/// A partition read and its position when the read began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dep {
    pub table: Table,
    /// The partition's hash, as the embedded store keeps positions.
    pub part: u64,
    pub at: u64,
}

#[derive(Debug, Default)]
struct Noted {
    deps: Vec<Dep>,
    /// The earliest expiry (epoch seconds) of the items read.
    expires: Option<f64>,
    untracked: bool,
    pure: bool,
}

/// The reads of one request.
#[derive(Debug, Default)]
pub struct Reads(Mutex<Noted>);

/// What [`recorded`] found: the partitions the answer depends on and its earliest expiry, when
/// every read was followed and the handler said its answer depends on nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct Followed {
    pub deps: Vec<Dep>,
    pub expires: Option<f64>,
}

impl Followed {
    /// Whether an item read has expired since.
    pub fn expired(&self) -> bool {
        self.expires.is_some_and(|e| e <= super::epoch_now() as f64)
    }
}

tokio::task_local! {
    static READS: Arc<Reads>;
}

/// Run `f` noting its reads: its output, and the reads if they can be followed.
pub async fn recorded<F: Future>(f: F) -> (F::Output, Option<Followed>) {
    let reads = Arc::new(Reads::default());
    let out = READS.scope(reads.clone(), f).await;
    let n = std::mem::take(&mut *reads.0.lock().unwrap_or_else(PoisonError::into_inner));
    let followed = (n.pure && !n.untracked).then_some(Followed { deps: n.deps, expires: n.expires });
    (out, followed)
}

fn with(f: impl FnOnce(&mut Noted)) {
    let _ = READS.try_with(|r| f(&mut r.0.lock().unwrap_or_else(PoisonError::into_inner)));
}

/// Whether the running request notes its reads (the store skips the work otherwise).
pub fn recording() -> bool {
    READS.try_with(|_| ()).is_ok()
}

/// The request read partition `part` of `table` as it was at position `at`.
pub(crate) fn note(table: Table, part: u64, at: u64) {
    with(|n| {
        let dep = Dep { table, part, at };
        if !n.deps.contains(&dep) {
            n.deps.push(dep);
        }
    });
}

/// The request read an item that expires at `expires` (epoch seconds).
pub(crate) fn note_expiry(expires: Option<f64>) {
    if let Some(e) = expires {
        with(|n| n.expires = Some(n.expires.map_or(e, |x| x.min(e))));
    }
}

/// The answer depends on something its reads do not show: the time it is made (an ETA under
/// way), a cache outside the store (a project's settings as a process keeps them), a read the
/// store does not follow (a count, a long read). Not kept, whatever the handler said.
pub fn untracked() {
    with(|n| n.untracked = true);
}

/// The handler's word: its answer is a function of the request and of what it read from the
/// store alone.
pub fn pure() {
    with(|n| n.pure = true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_are_followed_only_when_pure_and_all_tracked() {
        let (_, f) = recorded(async {
            note(Table::Main, 1, 5);
            note(Table::Main, 1, 5);
            note_expiry(Some(20.0));
            note_expiry(Some(10.0));
            pure();
        })
        .await;
        assert_eq!(f, Some(Followed { deps: vec![Dep { table: Table::Main, part: 1, at: 5 }], expires: Some(10.0) }));
        let (_, f) = recorded(async { note(Table::Main, 1, 5) }).await;
        assert_eq!(f, None, "not said pure");
        let (_, f) = recorded(async {
            pure();
            untracked();
        })
        .await;
        assert_eq!(f, None, "a read not followed");
        assert!(!recording(), "outside a request");
        note(Table::Main, 1, 1); // no request: nothing to note, no panic
    }
}
