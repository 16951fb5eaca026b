//! A process's cache of records read from the store, each trusted for a fixed time after it was
//! read; past a number of entries it starts over. What a Lambda instance keeps between requests
//! (projects' settings, keys): another instance's change applies within the time, this
//! instance's own change replaces or removes its entry at once.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
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
}
