//! A process's cache of records read from the store, each trusted for a fixed time after it was
//! read; past a number of entries it starts over. What a Lambda instance keeps between requests
//! (projects' settings, keys): another instance's change applies within the time, this
//! instance's own change replaces or removes its entry at once.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub struct TtlCache<K, V> {
    ttl: Duration,
    max: usize,
    map: Mutex<Option<HashMap<K, (Instant, V)>>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// Empty (usable in a `static`).
    pub const fn new(ttl: Duration, max: usize) -> Self {
        Self { ttl, max, map: Mutex::new(None) }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, Option<HashMap<K, (Instant, V)>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value, if put within the time.
    pub fn get(&self, k: &K) -> Option<V> {
        let map = self.map();
        let (at, v) = map.as_ref()?.get(k)?;
        (at.elapsed() < self.ttl).then(|| v.clone())
    }

    /// The value as just read or written.
    pub fn put(&self, k: K, v: V) {
        let mut map = self.map();
        let map = map.get_or_insert_with(HashMap::new);
        if map.len() >= self.max {
            map.clear();
        }
        map.insert(k, (Instant::now(), v));
    }

    /// Forget every entry `gone` names.
    pub fn forget(&self, gone: impl Fn(&K) -> bool) {
        if let Some(map) = self.map().as_mut() {
            map.retain(|k, _| !gone(k));
        }
    }
}

/// What every pass of a project reads and few requests write (its webhook endpoints, its moving
/// fences): kept per (store, project) for the cache's time, forgotten at once by a write on this
/// instance ([`Self::changed`]), and never kept from a read that began before such a write.
pub struct ProjectCache<V> {
    cache: TtlCache<(usize, String), V>,
    writes: AtomicU64,
}

impl<V: Clone> ProjectCache<V> {
    pub const fn new(ttl: Duration, max: usize) -> Self {
        Self { cache: TtlCache::new(ttl, max), writes: AtomicU64::new(0) }
    }

    /// The project's value from the cache, else from `read` (kept unless a write came meanwhile).
    /// `store` tells stores side by side in one process (tests) apart.
    pub async fn get_or<E, F: Future<Output = Result<V, E>>>(
        &self,
        store: usize,
        project: &str,
        read: impl FnOnce() -> F,
    ) -> Result<V, E> {
        let key = (store, project.to_owned());
        if let Some(v) = self.cache.get(&key) {
            return Ok(v);
        }
        let before = self.writes.load(Ordering::Acquire);
        let v = read().await?;
        if self.writes.load(Ordering::Acquire) == before {
            self.cache.put(key, v.clone());
        }
        Ok(v)
    }

    /// After a write of what the project's value holds (applied or maybe: also after an error).
    pub fn changed(&self, project: &str) {
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.cache.forget(|(_, p)| p == project);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_forget_and_start_over_past_the_bound() {
        let c = TtlCache::new(Duration::from_secs(60), 2);
        c.put("a", 1);
        assert_eq!(c.get(&"a"), Some(1));
        c.put("b", 2);
        c.put("c", 3); // past the bound: starts over
        assert_eq!((c.get(&"a"), c.get(&"c")), (None, Some(3)));
        c.forget(|k| *k == "c");
        assert_eq!(c.get(&"c"), None);
        let short = TtlCache::new(Duration::ZERO, 2);
        short.put("a", 1);
        assert_eq!(short.get(&"a"), None, "trusted for no time");
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(f)
    }

    #[test]
    fn a_project_cache_reads_once_forgets_on_a_write_and_keeps_no_read_older_than_one() {
        let c: ProjectCache<u32> = ProjectCache::new(Duration::from_secs(60), 10);
        let read = |v: u32| async move { Ok::<_, ()>(v) };
        assert_eq!(block_on(c.get_or(1, "p", || read(1))), Ok(1));
        assert_eq!(block_on(c.get_or(1, "p", || read(2))), Ok(1), "kept");
        assert_eq!(block_on(c.get_or(2, "p", || read(3))), Ok(3), "another store's is its own");
        c.changed("p");
        // A read that began before a write: answered, not kept.
        let v = block_on(c.get_or(1, "p", || async {
            c.changed("p");
            Ok::<_, ()>(4)
        }));
        assert_eq!(v, Ok(4));
        assert_eq!(block_on(c.get_or(1, "p", || read(5))), Ok(5), "read again after the write");
        assert_eq!(block_on(c.get_or(1, "p", || read(6))), Ok(5));
    }
}
