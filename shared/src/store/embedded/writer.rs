//! The embedded store's writes, committed in groups: redb takes one write transaction at a time
//! and each commit costs (pages written and checksummed, a sync when durable), which was half the
//! server's time (docs/measurements.md). Writes queue; one leader applies all that is queued in
//! one transaction, in queue order, and commits once, synced when any write must be durable.
//! Each write does whatever can fail before it changes anything (see [`Failed`]), so its failure
//! leaves the group's other changes standing; redb failing aborts the whole group.
//! See docs/architecture.md, "A request".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use redb::{Database, Durability, WriteTransaction};

use super::backend;
use crate::store::StoreError;

/// Why a write failed: before it changed anything (its group's other writes stand) or after (the
/// group is aborted). `?` on a [`StoreError`] says after, the safe assumption.
pub(super) enum Failed {
    Before(StoreError),
    After(StoreError),
}

impl From<StoreError> for Failed {
    fn from(e: StoreError) -> Self {
        Failed::After(e)
    }
}

/// What a write answers once its group's outcome is known.
type Answer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A queued write, applied in the group's transaction (or told why there is none). Returns its
/// answer, and an error when it may have left part of its changes: the group is then aborted.
type Apply = Box<dyn FnOnce(Result<&WriteTransaction, StoreError>) -> (Answer, Option<StoreError>) + Send>;

struct Job {
    durable: bool,
    apply: Apply,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// Whether a leader is applying groups; new writes then only queue.
    leading: bool,
}

/// The writes' queue and counters, apart from the database: a leader holds the database only
/// while it applies a group, so once the last write is answered, dropping the store closes the
/// file at once (a test reopens it right after).
#[derive(Default)]
struct Writes {
    queue: Mutex<Queue>,
    /// Groups committed so far, in commit order.
    committed: AtomicU64,
    /// The newest group known durable (redb makes every commit before a synced one durable
    /// with it).
    synced: AtomicU64,
}

impl Writes {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The database and its writes.
pub(super) struct Db {
    db: Database,
    writes: Arc<Writes>,
}

impl std::ops::Deref for Db {
    type Target = Database;
    fn deref(&self) -> &Database {
        &self.db
    }
}

impl Db {
    pub(super) fn new(db: Database) -> Self {
        Self { db, writes: Arc::default() }
    }

    /// Run `f` in the next group's write transaction and return what it returned once the group
    /// has committed (and synced, when `durable`). `f` says whether it failed before changing
    /// anything ([`Failed`]): a failed condition, a stored item that cannot be read.
    pub(super) async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        durable: bool,
        f: impl FnOnce(&WriteTransaction) -> Result<T, Failed> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.write_then(durable, f, |_| {}).await
    }

    /// [`Db::write`], with `mark` called on the leader around the group's commit: `mark(true)`
    /// when the group applies this write (before the commit), `mark(false)` once the group's
    /// outcome is known (after it), before the write returns: even when the writer stopped
    /// waiting for it (a request dropped), which code after the `await` would miss.
    pub(super) async fn write_then<T: Send + 'static>(
        self: &Arc<Self>,
        durable: bool,
        f: impl FnOnce(&WriteTransaction) -> Result<T, Failed> + Send + 'static,
        mark: impl Fn(bool) + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let apply: Apply = Box::new(move |txn| {
            mark(true);
            let answered = |r: Result<T, StoreError>| -> Answer {
                Box::new(move |group: Result<(), StoreError>| {
                    mark(false);
                    let _ = tx.send(group.and(r));
                })
            };
            match txn.map_err(Failed::Before).and_then(f) {
                Ok(v) => (answered(Ok(v)), None),
                // Nothing written: the group's other changes stand.
                Err(Failed::Before(e)) => (answered(Err(e)), None),
                Err(Failed::After(e)) => (answered(Err(e.clone())), Some(e)),
            }
        });
        let first = {
            let mut q = self.writes.queue();
            q.jobs.push(Job { durable, apply });
            !std::mem::replace(&mut q.leading, true)
        };
        if first {
            // Armed before the spawn: a leader that never runs (no thread could be started, the
            // runtime shutting down) must not leave the queue waiting for it.
            let resign = Resign { writes: self.writes.clone(), done: false };
            let db = Arc::downgrade(self);
            tokio::task::spawn_blocking(move || lead(&db, resign));
        }
        rx.await.map_err(|_| StoreError::Backend("the write's group was dropped".into()))?
    }

    /// A position after every write that has returned.
    pub(super) fn written(&self) -> u64 {
        self.writes.committed.load(Ordering::SeqCst)
    }

    /// The newest position known durable.
    #[cfg(test)]
    pub(super) fn synced(&self) -> u64 {
        self.writes.synced.load(Ordering::SeqCst)
    }

    /// Make every group through `through` durable: by a synced group, unless one since has.
    pub(super) async fn flush(self: &Arc<Self>, through: u64) -> Result<(), StoreError> {
        if self.writes.synced.load(Ordering::SeqCst) >= through {
            return Ok(());
        }
        self.write(true, |_| Ok::<_, Failed>(())).await
    }
}

/// A leader's resignation: on a normal return it has resigned under the queue's lock (and another
/// may lead by then); otherwise (a panic in redb, a leader that never ran) the jobs still queued
/// are dropped, their writers told so, and the next write takes the lead.
struct Resign {
    writes: Arc<Writes>,
    done: bool,
}

impl Drop for Resign {
    fn drop(&mut self) {
        if !self.done {
            let mut q = self.writes.queue();
            q.jobs.clear();
            q.leading = false;
        }
    }
}

/// Apply and commit groups until the queue is empty.
fn lead(db: &Weak<Db>, mut resign: Resign) {
    let writes = resign.writes.clone();
    loop {
        let jobs = {
            let mut q = writes.queue();
            if q.jobs.is_empty() {
                q.leading = false;
                resign.done = true;
                return;
            }
            std::mem::take(&mut q.jobs)
        };
        // Queued writes have writers waiting, who hold the store; when they gave up and the
        // store is gone, so are their writes.
        let Some(db) = db.upgrade() else { return };
        let (answers, outcome, rest) = commit_group(&db, &writes, jobs);
        drop(db);
        if !rest.is_empty() {
            writes.queue().jobs.splice(0..0, rest);
        }
        for answer in answers {
            answer(outcome.clone());
        }
    }
}

/// Apply `jobs` in one transaction and commit it: the answers of those applied, the group's
/// outcome, and the jobs left unapplied when one failed.
fn commit_group(db: &Db, writes: &Writes, jobs: Vec<Job>) -> (Vec<Answer>, Result<(), StoreError>, Vec<Job>) {
    let durable = jobs.iter().any(|j| j.durable);
    let begun = db.db.begin_write().map_err(backend).and_then(|mut txn| {
        txn.set_durability(if durable { Durability::Immediate } else { Durability::None }).map_err(backend)?;
        Ok(txn)
    });
    let txn = match begun {
        Ok(txn) => txn,
        Err(e) => {
            let answers = jobs.into_iter().map(|job| (job.apply)(Err(e.clone())).0).collect();
            return (answers, Err(e), Vec::new());
        }
    };
    let (mut answers, mut failed) = (Vec::with_capacity(jobs.len()), None);
    let mut jobs = jobs.into_iter();
    for job in jobs.by_ref() {
        let (answer, error) = (job.apply)(Ok(&txn));
        answers.push(answer);
        if error.is_some() {
            failed = error;
            break;
        }
    }
    let outcome = match failed {
        Some(e) => {
            let _ = txn.abort();
            Err(e)
        }
        // Only the leader commits, so numbering here keeps commit order.
        None => txn.commit().map_err(backend).map(|()| {
            let seq = writes.committed.fetch_add(1, Ordering::SeqCst) + 1;
            if durable {
                writes.synced.store(seq, Ordering::SeqCst);
            }
        }),
    };
    (answers, outcome, jobs.collect())
}
