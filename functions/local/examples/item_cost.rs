//! What one stored item costs on the embedded store, written where an event's copies go (random
//! keys: one partition per fence) against where a user's history goes (keys in order), through
//! `Store::put_new` in groups from several tasks at once, on two worker threads like the server's
//! machine. The figure behind docs/measurements.md's bound on ingest with geofence events.
//! `cargo run --release -p local --example item_cost` (`ITEMS=200000`, `GROUP=8`, `TASKS=8`).
#![allow(clippy::disallowed_methods)] // tools read their own settings from the environment

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use shared::store::{EmbeddedStore, Store, Table, to_item};

/// The allocator `waymark serve` runs on.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn var(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let (items, group, tasks) = (var("ITEMS", 200_000), var("GROUP", 8), var("TASKS", 8));
    for random in [false, true] {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::memory().expect("store"));
        let started = Instant::now();
        let writers: Vec<_> = (0..tasks)
            .map(|task| {
                let store = store.clone();
                tokio::spawn(async move {
                    for n in 0..items / tasks / group {
                        let batch = (0..group).map(|k| {
                            // An event's copy: the fence's partition, a time-ordered id.
                            let pk = if random {
                                format!("p1#FE#{:016x}", rand::random::<u64>() % 100_000)
                            } else {
                                format!("p1#UE#{task}")
                            };
                            let id = format!("{task:08x}{:016x}", n * group + k);
                            let event = json!({"id": id, "event_type": "motion:geofence:entry",
                                "user_id": "0193a1b2c3d4e5f60718293a", "geofence_id": "0193a1b2c3d4e5f60718293b",
                                "coordinates": [13.4, 52.5], "recorded_at": "2026-11-25T10:00:00.123",
                                "created_at": "2026-11-25T10:00:00.123", "accuracy": 5.0, "speed": 10.0});
                            to_item(&pk, &id, &event).expect("item")
                        });
                        store.put_new(Table::Main, batch.collect()).await.expect("stored");
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.expect("writer");
        }
        let s = started.elapsed().as_secs_f64();
        let keys = if random { "random keys" } else { "keys in order" };
        println!(
            "{keys}: {items} items in groups of {group} from {tasks} tasks: {:.2} µs an item, {:.0} items/s",
            s * 1e6 / items as f64,
            items as f64 / s
        );
    }
}
