//! `page_number` paging of location history (`domain::history_pages`): every page, and the
//! paging fields, equal to the naive answer (count the range, skip) after appends, late inserts in
//! the middle, re-sent batches, a writer that died part-way, one still writing, retention's
//! sweeper and DynamoDB TTL deleting fixes, and a history stored before the counts existed; plus
//! the measurement of page cost against page number (`--ignored`).

use std::time::Instant;

use axum::http::StatusCode;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use shared::domain::history_pages::{self, fixes};
use shared::domain::locations::{self, Location, locations_pk};
use shared::paging::{Order, PAGE_SIZE, PageInfo, PageNumber};
use shared::pipeline::retention;
use shared::project::Project;
use shared::store::{Cond, Query, SkRange, Table, from_jsons, to_item};
use shared::time::{DateRange, Timestamp};

use crate::both;
use crate::geofences::project;
use crate::helpers::{Key, TestApp};
use crate::trips::ts;

/// `n` fixes from `start`, `step_s` seconds apart, placed by their time (the same time gives the
/// same fix), `dx` shifting them so two series at the same times are distinct fixes.
fn series(start: DateTime<Utc>, n: usize, step_s: i64, dx: f64) -> Vec<Location> {
    (0..n)
        .map(|i| {
            let at = start + Duration::seconds(step_s * i as i64);
            let lng = 13.0 + dx + (at.timestamp() % 100_000) as f64 * 1e-6;
            let v = json!({"coordinates": [lng, 52.0], "recorded_at": ts(at)});
            serde_json::from_value(v).expect("a location")
        })
        .collect()
}

/// Store fixes as ingest does, without the processor (what paging reads is the same).
async fn store(app: &TestApp, user: &str, fixes: Vec<Location>) -> usize {
    let p = project(app);
    let s = app.state.store.as_ref();
    let mut stored = 0;
    for chunk in fixes.chunks(locations::MAX_BATCH) {
        let prepared = locations::prepare(&p, user, chunk.to_vec());
        stored += locations::store_prepared(s, &p, user, prepared).await.expect("stored").len();
    }
    stored
}

/// The number of entries the partition's own counts (`history_pages` buckets: a base item and
/// writers' count items, `~<bucket>+<writer>`) hold, when it has any and every item is valid
/// with no writer pending; else None (a read would recount).
pub(crate) async fn counted(app: &TestApp, table: Table, pk: &str) -> Option<u64> {
    let items = app.state.store.query(table, &Query::new(pk, SkRange::Prefix("~".into()))).await.unwrap().items;
    let mut sum = Some(0).filter(|_| !items.is_empty());
    // Deltas a base lists as folded are in its counts already (their deletes may be to come).
    let folded: Vec<String> = items
        .iter()
        .flat_map(|b| b.get("folded").and_then(|f| f.as_array()).cloned().unwrap_or_default())
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    for b in items.iter().filter(|b| !folded.iter().any(|f| b["sk"] == f.as_str())) {
        let writer = b["sk"].as_str().unwrap().contains('+');
        let field = |f: &str| b.get(f).cloned().unwrap_or_default();
        let valid = field("valid") == true && (!writer || field("done") == true);
        let cells = field("n").as_array().cloned().unwrap_or_default();
        let n: u64 = cells.iter().map(|v| v.as_u64().unwrap()).sum();
        sum = sum.filter(|_| valid).map(|s| s + n);
    }
    sum
}

/// Every page of the range, and one past the end, against the ids read in one query.
async fn assert_pages_exact(app: &TestApp, p: &Project, user: &str, range: Option<DateRange>) {
    let s = app.state.store.as_ref();
    let pk = locations_pk(&p.project_id, user);
    let sk = match &range {
        Some(r) => {
            let (a, b) = shared::ids::id_range(r);
            SkRange::Between(a, b)
        }
        None => fixes(),
    };
    let all: Vec<String> = s
        .query(Table::Locations, &Query::new(&pk, sk))
        .await
        .expect("query")
        .items
        .iter()
        .map(|i| i["sk"].as_str().expect("sk").to_owned())
        .collect();
    let pages = all.len().div_ceil(PAGE_SIZE);
    for n in 1..=pages + 1 {
        let (got, info) = locations::list(s, p, user, range, PageNumber(n)).await.expect("page");
        let got = from_jsons::<Location>(&got).expect("stored fixes");
        let ids: Vec<&str> = got.iter().map(|l| l.id.as_str()).collect();
        let want: Vec<&str> = all.iter().skip((n - 1) * PAGE_SIZE).take(PAGE_SIZE).map(String::as_str).collect();
        assert_eq!(ids, want, "page {n} of {pages}");
        assert_eq!(info, PageInfo::new(PageNumber(n), all.len()), "paging fields of page {n}");
    }
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).single().expect("a time")
}

both!(pages_are_exact_through_appends_late_inserts_and_resends, |app| async move {
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    // Dense (5 s: a dozen fixes a cell) across a bucket boundary (16^6 ms ≈ 4.7 h), then sparse.
    let t0 = utc(2024, 5, 1, 2, 0);
    let dense = series(t0, 600, 5, 0.0);
    assert_eq!(store(&app, &user, dense.clone()).await, 600);
    assert_pages_exact(&app, &p, &user, None).await;
    let sparse = series(t0 + Duration::hours(1), 150, 170, 0.0);
    store(&app, &user, sparse.clone()).await;
    assert_pages_exact(&app, &p, &user, None).await;

    // Late: fixes between those already stored, at the front and in the middle.
    let late = series(t0 - Duration::minutes(3), 300, 7, 0.5);
    assert_eq!(store(&app, &user, late.clone()).await, 300);
    assert_pages_exact(&app, &p, &user, None).await;

    // Re-sent: nothing new, nothing counted twice; a batch half new, half re-sent.
    assert_eq!(store(&app, &user, dense.clone()).await, 0);
    let mut mixed = late[100..200].to_vec();
    mixed.extend(series(t0 + Duration::minutes(20), 50, 3, 0.7));
    assert_eq!(store(&app, &user, mixed).await, 50);
    assert_pages_exact(&app, &p, &user, None).await;

    // Date ranges cut cells at both ends.
    for (a, b) in [(t0 + Duration::seconds(1234), t0 + Duration::hours(3)), (t0 - Duration::days(1), t0)] {
        assert_pages_exact(&app, &p, &user, Some(DateRange { start: a, end: b })).await;
    }

    // Through the API: the same pages.
    let (status, res) = app.get(&format!("/v1/api/location/?user_id={user}&page_number=7")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (want, info) = locations::list(app.state.store.as_ref(), &p, &user, None, PageNumber(7)).await.unwrap();
    let want = from_jsons::<Location>(&want).unwrap();
    let got: Vec<&str> =
        res["data"]["locations"].as_array().unwrap().iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(got, want.iter().map(|l| l.id.as_str()).collect::<Vec<_>>());
    assert_eq!((res["data"]["pages"].clone(), res["data"]["next_page"].clone()), (json!(info.pages), json!(8)));
    // Ingest through the API counts too.
    let body = json!({"user_id": user, "locations": [{"coordinates": [13.9, 52.1], "recorded_at": ts(t0 + Duration::minutes(1))}]});
    let (status, res) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_pages_exact(&app, &p, &user, None).await;
});

/// Every page of `lo..=hi` newest first (`history_pages::page`), and one past the end, against
/// the keys read in one descending query.
async fn assert_newest_first_exact(app: &TestApp, pk: &str, lo: &str, hi: &str) {
    let s = app.state.store.as_ref();
    let q = Query::new(pk, SkRange::Between(lo.into(), hi.into())).descending();
    let all: Vec<String> = s
        .query(Table::Locations, &q)
        .await
        .unwrap()
        .items
        .iter()
        .map(|i| i["sk"].as_str().unwrap().to_owned())
        .collect();
    let pages = all.len().div_ceil(PAGE_SIZE);
    for n in 1..=pages + 1 {
        let (docs, info) =
            history_pages::page(s, Table::Locations, pk, lo, hi, PageNumber(n), Order::NewestFirst).await.unwrap();
        let ids: Vec<String> = docs
            .iter()
            .map(|d| serde_json::from_slice::<serde_json::Value>(d).unwrap()["sk"].as_str().unwrap().to_owned())
            .collect();
        let want: Vec<String> = all.iter().skip((n - 1) * PAGE_SIZE).take(PAGE_SIZE).cloned().collect();
        assert_eq!(ids, want, "page {n} of {pages}, newest first");
        assert_eq!(info, PageInfo::new(PageNumber(n), all.len()), "paging fields of page {n}");
    }
}

both!(newest_first_pages_are_exact, |app| async move {
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    let pk = locations_pk(&p.project_id, &user);
    // Dense and sparse across a bucket boundary, late fixes between them: cells of 1 to 13.
    let t0 = utc(2024, 5, 2, 2, 0);
    store(&app, &user, series(t0, 400, 5, 0.0)).await;
    store(&app, &user, series(t0 + Duration::hours(1), 120, 170, 0.0)).await;
    store(&app, &user, series(t0 - Duration::minutes(3), 200, 7, 0.5)).await;
    let (lo, hi) = match fixes() {
        SkRange::Between(a, b) => (a, b),
        _ => unreachable!(),
    };
    assert_newest_first_exact(&app, &pk, &lo, &hi).await;
    // Ranges that cut cells at either end, one inside a single cell, and one holding nothing.
    for (a, b) in [
        (t0 + Duration::seconds(1234), t0 + Duration::hours(3)),
        (t0 - Duration::days(1), t0 + Duration::seconds(61)),
        (t0 + Duration::seconds(20), t0 + Duration::seconds(40)),
        (t0 - Duration::days(3), t0 - Duration::days(2)),
    ] {
        let (lo, hi) = shared::ids::id_range(&DateRange { start: a, end: b });
        assert_newest_first_exact(&app, &pk, &lo, &hi).await;
    }
});

both!(a_read_while_entries_are_deleted_leaves_no_stale_counts, |app| async move {
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    let s = app.state.store.as_ref();
    let pk = locations_pk(&p.project_id, &user);
    store(&app, &user, series(utc(2024, 5, 3, 2, 0), 60, 5, 0.0)).await;
    let all = s.query(Table::Locations, &Query::new(&pk, fixes())).await.unwrap().items;
    let keys: Vec<(String, String)> =
        all.iter().step_by(4).map(|i| (pk.clone(), i["sk"].as_str().unwrap().to_owned())).collect();
    // A deleter as retention and erasure are: a reader comes between its registration and its
    // deletes, and after them, before it is done.
    let change = history_pages::deleting(s, Table::Locations, &keys).await.unwrap();
    assert_pages_exact(&app, &p, &user, None).await;
    s.delete_many(Table::Locations, keys).await.unwrap();
    assert_pages_exact(&app, &p, &user, None).await;
    change.done(s).await.unwrap();
    assert_pages_exact(&app, &p, &user, None).await;
    let (lo, hi) = shared::ids::all_ids();
    assert_eq!(history_pages::count(s, Table::Locations, &pk, &lo, &hi).await.unwrap(), all.len() - 15);
});

both!(many_writers_at_once_into_one_bucket_all_succeed_and_count_once, |app| async move {
    // Writers of one list (different users' passes adding to the project's event list) used to
    // read and rewrite one shared bucket item, conditional on its nonce: forty at once left the
    // last ones out of tries ("condition failed"). Each now writes only items of its own.
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    let s = app.state.store.as_ref();
    let pk = locations_pk(&p.project_id, &user);
    store(&app, &user, series(utc(2024, 5, 4, 2, 0), 30, 5, 0.0)).await;
    let batches: Vec<Vec<Location>> = (0..40)
        .map(|k| locations::prepare(&p, &user, series(utc(2024, 5, 4, 2, 1), 5, 7, 0.01 * (k + 1) as f64)))
        .collect();
    let writes = batches.iter().map(|b| {
        let items = b.iter().map(|l| to_item(&pk, &l.id, l).unwrap()).collect();
        history_pages::put_new_counted(s, Table::Locations, items)
    });
    let stored = futures::future::join_all(writes).await;
    assert!(
        stored.iter().all(|r| r.as_ref().is_ok_and(|(s, _)| s.iter().all(|n| *n))),
        "{:?}",
        stored.iter().map(|r| r.as_ref().map(|(s, _)| s)).collect::<Vec<_>>()
    );
    assert_eq!(counted(&app, Table::Locations, &pk).await, Some(30 + 40 * 5));
    assert_pages_exact(&app, &p, &user, None).await;
});

both!(pages_are_exact_while_a_writer_is_storing_and_after_one_died, |app| async move {
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    let s = app.state.store.as_ref();
    let pk = locations_pk(&p.project_id, &user);
    let t0 = utc(2024, 6, 1, 8, 0);
    store(&app, &user, series(t0, 200, 10, 0.0)).await;

    // A writer registered and storing: its bucket is counted directly until it finishes.
    let more = locations::prepare(&p, &user, series(t0 + Duration::seconds(5), 100, 10, 0.1));
    let ids: Vec<&str> = more.iter().map(|l| l.id.as_str()).collect();
    let w = history_pages::begin(s, Table::Locations, &pk, &ids).await.unwrap();
    let items: Vec<_> = more.iter().map(|l| to_item(&pk, &l.id, l).unwrap()).collect();
    s.put_new(Table::Locations, items[..50].to_vec()).await.unwrap();
    assert_pages_exact(&app, &p, &user, None).await;
    s.put_new(Table::Locations, items[50..].to_vec()).await.unwrap();
    let stored: Vec<(String, Option<i64>)> = more.iter().map(|l| (l.id.clone(), None)).collect();
    history_pages::finish(s, w, Some(&stored)).await.unwrap();
    assert_pages_exact(&app, &p, &user, None).await;

    // A writer that registered long ago and died after storing part of its batch.
    let lost = locations::prepare(&p, &user, series(t0 + Duration::seconds(7), 80, 10, 0.2));
    let ids: Vec<&str> = lost.iter().map(|l| l.id.as_str()).collect();
    let old = (Utc::now() - Duration::minutes(5)).timestamp_millis();
    let _dead = history_pages::begin_at(s, Table::Locations, &pk, &ids, old).await.unwrap();
    let items: Vec<_> = lost[..30].iter().map(|l| to_item(&pk, &l.id, l).unwrap()).collect();
    s.put_new(Table::Locations, items).await.unwrap();
    assert_pages_exact(&app, &p, &user, None).await;
    // Its client re-sends the batch: the rest is stored and counted once.
    assert_eq!(store(&app, &user, lost).await, 50);
    assert_pages_exact(&app, &p, &user, None).await;
});

both!(pages_are_exact_after_concurrent_overlapping_batches, |app| async move {
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    let t0 = utc(2024, 8, 1, 4, 0);
    // Six batches at once into the same cells, each sharing half its fixes with the next: every
    // fix is stored by one of them and counted once.
    let batches: Vec<Vec<Location>> = (0..6).map(|k| series(t0 + Duration::seconds(30 * k), 120, 3, 0.0)).collect();
    let stored = futures::future::join_all(batches.iter().map(|b| store(&app, &user, b.clone()))).await;
    let distinct: std::collections::BTreeSet<String> = batches.iter().flatten().map(|l| ts(l.recorded_at.0)).collect();
    assert_eq!(stored.iter().sum::<usize>(), distinct.len(), "{stored:?}");
    assert_pages_exact(&app, &p, &user, None).await;
});

both!(pages_are_exact_after_retention_and_ttl_delete_fixes, |app| async move {
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    let s = app.state.store.as_ref();
    let pk = locations_pk(&p.project_id, &user);
    let now = Utc::now();
    // Written before retention: no TTL; the sweeper removes them.
    store(&app, &user, series(now - Duration::days(40), 300, 15, 0.0)).await;
    let (status, res) =
        app.call("PUT", "/v1/api/project/settings/", Key::Secret, Some(&json!({"retention_days": 30}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    // Written with retention: TTL from recorded time. Some already past it, as DynamoDB's TTL
    // would see them; the rest not.
    let expired = series(now - Duration::days(31), 200, 15, 0.0);
    let kept = series(now - Duration::days(2), 300, 15, 0.0);
    store(&app, &user, expired.clone()).await;
    store(&app, &user, kept).await;
    assert_pages_exact(&app, &p, &user, None).await;
    // DynamoDB TTL deletes some expired fixes, telling no one.
    for l in locations::prepare(&p, &user, expired).iter().step_by(3) {
        s.delete(Table::Locations, &pk, &l.id, Cond::None).await.unwrap();
    }
    assert_pages_exact(&app, &p, &user, None).await;
    // The sweeper removes part of what has expired, then the rest.
    let swept = retention::sweep_one(s, &p.project_id, retention::Budget::items(120), Timestamp(now)).await.unwrap();
    assert!(swept.locations > 0 && !swept.finished, "{swept:?}");
    assert_pages_exact(&app, &p, &user, None).await;
    retention::sweep_one(s, &p.project_id, retention::Budget::items(100_000), Timestamp(now)).await.unwrap();
    assert_pages_exact(&app, &p, &user, None).await;
    // Retention lengthened: the cells the sweeper emptied are back in the window, counted right.
    let (status, res) =
        app.call("PUT", "/v1/api/project/settings/", Key::Secret, Some(&json!({"retention_days": 60}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_pages_exact(&app, &p, &user, None).await;
});

/// Page cost against page number on a 300,000-fix history, and whole reads: run with
/// `--ignored --nocapture` (DynamoDB Local adds capacity units read).
#[tokio::test]
#[ignore]
async fn page_cost_does_not_grow_with_the_page_number() {
    let n: usize = std::env::var("WAYMARK_PAGES_FIXES").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000);
    for backend in [crate::helpers::Backend::Embedded, crate::helpers::Backend::DynamoDb] {
        let dynamo = matches!(backend, crate::helpers::Backend::DynamoDb);
        if dynamo && std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_none() {
            continue;
        }
        let (app, units) = crate::helpers::metered_app(backend).await;
        let p = project(&app);
        let user = app.create_user(json!({})).await;
        let t = Instant::now();
        // One fix a second, as a phone tracking actively sends them: ≈ 83 hours.
        let start = utc(2024, 3, 1, 0, 0);
        for part in 0..n.div_ceil(10_000) {
            let k = 10_000.min(n - part * 10_000);
            store(&app, &user, series(start + Duration::seconds(part as i64 * 10_000), k, 1, 0.0)).await;
        }
        eprintln!("[{backend:?}] stored {n} fixes in {:.1} s", t.elapsed().as_secs_f64());
        let s = app.state.store.as_ref();
        let pk = locations_pk(&p.project_id, &user);
        let last = n.div_ceil(PAGE_SIZE);
        let measure = |label: String, f: std::time::Duration, u: f64| {
            eprintln!("[{backend:?}] {label:<44} {:>9.2} ms {u:>10.1} RCU", f.as_secs_f64() * 1e3);
        };
        for page in [1, last / 2, last] {
            let (u0, t) = (units(), Instant::now());
            let (got, info) = locations::list(s, &p, &user, None, PageNumber(page)).await.unwrap();
            measure(format!("page {page} (counted)"), t.elapsed(), units() - u0);
            assert_eq!((got.len(), info.pages), (PAGE_SIZE.min(n - (page - 1) * PAGE_SIZE), last));
            // The former way: count the range, read the page's offset and skip.
            let (u0, t) = (units(), Instant::now());
            let (old, _) = shared::domain::list_pages::list_page::<Location>(
                s,
                Table::Locations,
                &pk,
                fixes(),
                PageNumber(page),
                None,
            )
            .await
            .unwrap();
            measure(format!("page {page} (count and skip, before)"), t.elapsed(), units() - u0);
            let got = from_jsons::<Location>(&got).unwrap();
            assert_eq!(old.iter().map(|l| &l.id).collect::<Vec<_>>(), got.iter().map(|l| &l.id).collect::<Vec<_>>());
        }
        // Whole reads of the first quarter and of all of it (on DynamoDB Local, which answers in
        // milliseconds a call, the first eighth and quarter): time and units per page stay flat.
        let shares: &[usize] = if dynamo { &[8, 4] } else { &[4, 1] };
        for &share in shares {
            let pages = last / share;
            let (u0, t) = (units(), Instant::now());
            for page in 1..=pages {
                let (got, _) = locations::list(s, &p, &user, None, PageNumber(page)).await.unwrap();
                assert_eq!(got.len(), PAGE_SIZE);
            }
            let (el, u) = (t.elapsed(), units() - u0);
            eprintln!(
                "[{backend:?}] pages 1..={pages:<6} {:>8.1} s {:>7.3} ms/page {:>10.1} RCU {:>6.2} RCU/page",
                el.as_secs_f64(),
                el.as_secs_f64() * 1e3 / pages as f64,
                u,
                u / pages as f64
            );
        }
    }
}

both!(a_folded_count_item_whose_delete_did_not_happen_is_counted_once, |app| async move {
    // A fold writes the bucket's base, listing the writers' count items it took, then deletes
    // them one by one: a delete that did not happen (a crash, a fault) leaves an item the base
    // has counted already. Readers skip it; the next fold deletes it.
    let p = project(&app);
    let user = app.create_user(json!({})).await;
    let s = app.state.store.as_ref();
    let pk = locations_pk(&p.project_id, &user);
    let t0 = utc(2024, 5, 6, 2, 0);
    for k in 0..3 {
        history_pages::with_fold_odds(1, store(&app, &user, series(t0 + Duration::minutes(k), 12, 5, 0.0))).await;
    }
    let counts =
        || async { s.query(Table::Locations, &Query::new(&pk, SkRange::Prefix("~".into()))).await.unwrap().items };
    let items = counts().await;
    let base = items.iter().find(|i| !i["sk"].as_str().unwrap().contains('+')).expect("a base after folds").clone();
    let listed: Vec<String> = base["folded"]
        .as_array()
        .expect("the base lists what it folded")
        .iter()
        .map(|f| f.as_str().unwrap().into())
        .collect();
    assert!(!listed.is_empty(), "{base:?}");
    assert!(items.iter().all(|i| !listed.iter().any(|f| i["sk"] == f.as_str())), "the folded deltas are deleted");
    // The delete of one of them "did not happen": it is back, finished and valid, as it was.
    let stale = json!({"at": 0, "done": true, "valid": true, "n": [36]});
    s.put(Table::Locations, to_item(&pk, &listed[0], &stale).unwrap(), Cond::None).await.unwrap();
    let (lo, hi) = shared::ids::all_ids();
    assert_eq!(history_pages::count(s, Table::Locations, &pk, &lo, &hi).await.unwrap(), 36, "counted once");
    assert_eq!(counted(&app, Table::Locations, &pk).await, Some(36));
    assert_pages_exact(&app, &p, &user, None).await;
    // The next writer's fold deletes it, and counts stay exact.
    history_pages::with_fold_odds(1, store(&app, &user, series(t0 + Duration::minutes(10), 12, 5, 0.0))).await;
    let items = counts().await;
    assert!(items.iter().all(|i| i["sk"] != listed[0].as_str()), "the next fold deleted it: {items:?}");
    assert_eq!(history_pages::count(s, Table::Locations, &pk, &lo, &hi).await.unwrap(), 48);
    assert_eq!(counted(&app, Table::Locations, &pk).await, Some(48));
    assert_pages_exact(&app, &p, &user, None).await;
});
