//! The embedded store's own tests (the suite in `tests/` runs the API on it and on DynamoDB).
use super::*;

#[test]
fn expiry_is_read_from_the_ttl_attribute_only() {
    let v = |j: serde_json::Value| serde_json::to_vec(&j).unwrap();
    let attr = super::super::TTL_ATTRIBUTE;
    assert!(expired_value(&v(serde_json::json!({attr: 100})), 100));
    assert!(!expired_value(&v(serde_json::json!({attr: 101})), 100));
    // Not a number, nested, or absent: not an expiry (as DynamoDB's TTL reads it).
    assert!(!expired_value(&v(serde_json::json!({attr: "1"})), 100));
    assert!(!expired_value(&v(serde_json::json!({"secrets": [{attr: 1}]})), 100));
    assert!(!expired_value(&v(serde_json::json!({"pk": "a"})), 100));
    // The top-level one whatever comes before it: nested copies, the name as a value or
    // inside a string, escapes, other numbers.
    let tricky = br#"{"a":{"expires_at":1},"b":["expires_at",{"expires_at":2}],"c":"\"expires_at\": 3","d":"x\\","expires_at" : 1.5e2 ,"z":[1]}"#;
    assert_eq!(ttl_of(tricky), Some(150.0));
    assert!(expired_value(tricky, 150) && !expired_value(tricky, 149));
    assert_eq!(ttl_of(br#"{"a":"expires_at","expires_at":null}"#), None);
    assert_eq!(ttl_of(br#"{"expires_at":-5}"#), Some(-5.0));
    assert_eq!(ttl_of(br#"{"n":"expires_at"}"#), None);
    // Whatever serde_json writes for a record, the walk reads what a parse reads.
    for t in [0i64, 1, 1_700_000_000, i64::from(i32::MAX) * 4] {
        let doc = v(serde_json::json!({"id": "x", "nested": {attr: 1, "s": "}{]["}, attr: t, "tail": [attr]}));
        assert_eq!(ttl_of(&doc), Some(t as f64), "{}", String::from_utf8_lossy(&doc));
    }
}

/// `bytes` stored as the value at `pk`/`sk` of the main table, as they are.
fn store_raw(store: &EmbeddedStore, pk: &str, sk: &str, bytes: &[u8]) {
    let txn = store.db.begin_write().unwrap();
    txn.open_table(redb_table(Table::Main)).unwrap().insert(key(pk, sk).as_str(), bytes).unwrap();
    txn.commit().unwrap();
}

#[tokio::test]
async fn values_leave_the_partition_key_out_and_every_read_puts_it_back() {
    let store = EmbeddedStore::memory().unwrap();
    let item =
        |sk: &str| Item::from_iter([("pk".into(), "p#1".into()), ("sk".into(), sk.into()), ("n".into(), 1.into())]);
    store.put(Table::Main, item("a"), Cond::None).await.unwrap();
    store.put_new(Table::Main, vec![item("b")]).await.unwrap();
    store
        .transact(vec![WriteOp::Add { table: Table::Main, pk: "p#1".into(), sk: "c".into(), attr: "n", delta: 1 }])
        .await
        .unwrap();
    store.put_new(Table::Main, vec![item("d")]).await.unwrap();
    let txn = store.db.begin_read().unwrap();
    let t = txn.open_table(redb_table(Table::Main)).unwrap();
    for sk in ["a", "b", "c", "d"] {
        let stored: serde_json::Value =
            serde_json::from_slice(t.get(key("p#1", sk).as_str()).unwrap().unwrap().value()).unwrap();
        assert_eq!(stored.get("pk"), None, "{sk}: {stored}");
        assert_eq!(stored["sk"], sk);
    }
    let all = ["a", "b", "c", "d"].map(item);
    assert_eq!(store.query(Table::Main, &Query::new("p#1", SkRange::All)).await.unwrap().items, all);
    assert_eq!(store.get(Table::Main, "p#1", "d").await.unwrap().as_ref(), Some(&all[3]));
    assert_eq!(store.get(Table::Main, "p#1", "a").await.unwrap().as_ref(), Some(&all[0]));
    assert_eq!(store.scan_all(Table::Main).await.unwrap().into_iter().filter(|i| i["pk"] == "p#1").count(), 4);
    // Adding to a counter reads the stored value and writes it back, still without `pk`.
    store
        .transact(vec![WriteOp::Add { table: Table::Main, pk: "p#1".into(), sk: "d".into(), attr: "n", delta: 1 }])
        .await
        .unwrap();
    let d = store.get(Table::Main, "p#1", "d").await.unwrap().unwrap();
    assert_eq!((d["n"].as_i64(), d["pk"].as_str()), (Some(2), Some("p#1")));
}

#[tokio::test]
async fn an_unsynced_write_syncs_only_what_no_synced_commit_covered() {
    let store = EmbeddedStore::memory().unwrap();
    let item = |sk: &str| Item::from_iter([("pk".into(), "p".into()), ("sk".into(), sk.into())]);
    let synced = || store.db.synced();
    // Unsynced fixes: not yet covered; making them durable syncs.
    let (stored, fixes) = store.put_new_unsynced(Table::Main, vec![item("a"), item("b")]).await.unwrap();
    assert_eq!(stored, [true, true]);
    let mine = store.db.written();
    assert!(synced() < mine);
    fixes.durable().await.unwrap();
    assert!(synced() >= mine);
    // Fixes, then a synced write (the pass's commit), then someone else's unsynced write: the
    // synced write covered the fixes, so making them durable syncs nothing more.
    let (_, fixes) = store.put_new_unsynced(Table::Main, vec![item("c")]).await.unwrap();
    store.put(Table::Main, item("w"), Cond::None).await.unwrap();
    let after_pass = synced();
    let other = store.put_unsynced(Table::Main, item("other"), Cond::None).await.unwrap();
    fixes.durable().await.unwrap();
    assert_eq!(synced(), after_pass, "a covered write synced again");
    assert!(store.db.written() > synced(), "the other write stays unsynced until someone syncs it");
    // Of two, the later covers both: the other write too.
    let (_, mark) = store.put_new_unsynced(Table::Main, vec![item("d")]).await.unwrap();
    other.and(mark).durable().await.unwrap();
    assert_eq!(synced(), store.db.written());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_grouped_in_one_transaction_stay_all_or_nothing_each() {
    let store = EmbeddedStore::memory().unwrap();
    let item = |sk: String, by: usize| {
        Item::from_iter([("pk".into(), "p".into()), ("sk".into(), sk.into()), ("by".into(), by.into())])
    };
    // 64 writers at once: each puts its own key and, in the same transaction, claims one of
    // 8 shared keys; only the first claim of each succeeds, and a writer whose claim failed
    // leaves its own key unwritten although its group's other writes commit.
    let writes = (0..64).map(|i| {
        let s = store.clone();
        tokio::spawn(async move {
            let ops = vec![
                WriteOp::Put { table: Table::Main, item: item(format!("own{i:02}"), i), cond: Cond::NotExists },
                WriteOp::Put { table: Table::Main, item: item(format!("claim{}", i % 8), i), cond: Cond::NotExists },
            ];
            s.transact(ops).await
        })
    });
    let mut won = Vec::new();
    for (i, w) in writes.collect::<Vec<_>>().into_iter().enumerate() {
        match w.await.unwrap() {
            Ok(()) => won.push(i),
            Err(StoreError::ConditionFailed) => {}
            Err(e) => panic!("writer {i}: {e}"),
        }
    }
    assert_eq!(won.len(), 8, "one claim of each shared key: {won:?}");
    let all = store.scan_all(Table::Main).await.unwrap();
    let sks: std::collections::BTreeSet<String> = all.iter().map(|i| i["sk"].as_str().unwrap().to_owned()).collect();
    let mut expected: std::collections::BTreeSet<String> = won.iter().map(|i| format!("own{i:02}")).collect();
    expected.extend((0..8).map(|k| format!("claim{k}")));
    assert_eq!(sks, expected);
    for claim in all.iter().filter(|i| i["sk"].as_str().unwrap().starts_with("claim")) {
        let by = claim["by"].as_u64().unwrap() as usize;
        assert!(won.contains(&by) && format!("claim{}", by % 8) == claim["sk"], "{claim:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_fails_before_writing_leaves_its_group_standing() {
    let store = EmbeddedStore::memory().unwrap();
    // A stored value that is not an item: an Add on it cannot read its counter.
    store_raw(&store, "p", "bad", b"[1]");
    for round in 0..20 {
        let item = |sk: String| Item::from_iter([("pk".into(), "p".into()), ("sk".into(), sk.into())]);
        let good = (0..16).map(|i| {
            let s = store.clone();
            tokio::spawn(async move { s.put(Table::Main, item(format!("r{round}w{i}")), Cond::NotExists).await })
        });
        let s = store.clone();
        let bad = tokio::spawn(async move {
            let op = WriteOp::Add { table: Table::Main, pk: "p".into(), sk: "bad".into(), attr: "n", delta: 1 };
            s.transact(vec![op]).await
        });
        for w in good.collect::<Vec<_>>() {
            w.await.unwrap().expect("a write grouped with a failing one");
        }
        assert!(matches!(bad.await.unwrap(), Err(StoreError::Corrupt(_))));
    }
    assert_eq!(store.count(Table::Main, "p", &SkRange::Prefix("r".into())).await.unwrap(), 20 * 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_answers_writes_durable_and_conditions_read_only_what_they_need() {
    let dir = std::env::temp_dir().join(format!("waymark-gc-{}", crate::ids::random_hex(8)));
    let path = dir.join("db.redb");
    let item = |sk: &str, nonce: &str| {
        Item::from_iter([("pk".into(), "p".into()), ("sk".into(), sk.into()), ("nonce".into(), nonce.into())])
    };
    {
        let store = EmbeddedStore::open(&path).unwrap();
        // An unsynced write, then concurrent durable ones: every one answered is covered.
        drop(store.put_unsynced(Table::Main, item("u", "a"), Cond::None).await.unwrap());
        let writes = (0..16).map(|i| {
            let s = store.clone();
            tokio::spawn(async move { s.put(Table::Main, item(&format!("d{i:02}"), "a"), Cond::NotExists).await })
        });
        for w in writes.collect::<Vec<_>>() {
            w.await.unwrap().unwrap();
        }
        assert_eq!(store.db.synced(), store.db.written());
        let eq = |v: &str| Cond::Equals("nonce", v.into());
        assert!(matches!(store.put(Table::Main, item("u", "b"), eq("x")).await, Err(StoreError::ConditionFailed)));
        store.put(Table::Main, item("u", "b"), eq("a")).await.unwrap();
        assert!(matches!(
            store.put(Table::Main, item("d00", "b"), Cond::NotExists).await,
            Err(StoreError::ConditionFailed)
        ));
    }
    // Reopened (as after a restart), everything answered is there.
    let store = EmbeddedStore::open(&path).unwrap();
    let all = store.scan_all(Table::Main).await.unwrap();
    assert_eq!(all.len(), 17);
    assert!(all.iter().any(|i| i["sk"] == "u" && i["nonce"] == "b"));
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_point_read_is_kept_and_never_older_than_a_committed_write() {
    let store = EmbeddedStore::memory().unwrap();
    let (pk, sk) = ("KEY#h", "KEY");
    let item = |n: i64| Item::from_iter([("pk".into(), pk.into()), ("sk".into(), sk.into()), ("n".into(), n.into())]);
    let read = || async {
        let doc = store.get_doc(Table::Main, pk, sk).await.unwrap();
        doc.map(|d| serde_json::from_slice::<serde_json::Value>(&d).unwrap()["n"].as_i64().unwrap())
    };
    assert_eq!(read().await, None);
    store.put(Table::Main, item(1), Cond::None).await.unwrap();
    assert_eq!(read().await, Some(1));
    // Held: a change behind the store's back (tests only; nothing else writes the file) is
    // not seen.
    store_raw(&store, pk, sk, br#"{"sk":"KEY","n":99}"#);
    assert_eq!(read().await, Some(1));
    // Every kind of write through the store is.
    store.put(Table::Main, item(2), Cond::None).await.unwrap();
    assert_eq!(read().await, Some(2));
    let add = WriteOp::Add { table: Table::Main, pk: pk.into(), sk: sk.into(), attr: "n", delta: 1 };
    store.transact(vec![add]).await.unwrap();
    assert_eq!(read().await, Some(3));
    store.delete_many(Table::Main, vec![(pk.into(), sk.into())]).await.unwrap();
    assert_eq!(read().await, None);
    store.put_new(Table::Main, vec![item(4)]).await.unwrap();
    assert_eq!(read().await, Some(4));
    // A writer that stops waiting (a request dropped) once its write is queued: the write
    // still commits, and what was held goes with it.
    {
        let mut write = std::pin::pin!(store.put(Table::Main, item(5), Cond::None));
        let polled =
            std::future::Future::poll(write.as_mut(), &mut std::task::Context::from_waker(std::task::Waker::noop()));
        assert!(polled.is_pending(), "the write was queued, not done");
    }
    // Groups commit in order: once a later write returns, the left one has committed.
    let other = Item::from_iter([("pk".into(), pk.into()), ("sk".into(), "other".into())]);
    store.put(Table::Main, other, Cond::None).await.unwrap();
    assert_eq!(read().await, Some(5));
    store.delete(Table::Main, pk, sk, Cond::None).await.unwrap();
    assert_eq!(read().await, None);
}

/// The `n` of each document a query answers.
async fn ns(store: &EmbeddedStore, qs: &[Query]) -> Vec<Vec<i64>> {
    let docs = store.query_docs_many(Table::Main, qs).await.unwrap();
    let n = |d: &Doc| serde_json::from_slice::<serde_json::Value>(d).unwrap()["n"].as_i64().unwrap();
    docs.iter().map(|ds| ds.iter().map(n).collect()).collect()
}

#[tokio::test]
async fn a_kept_answer_is_never_older_than_a_committed_write() {
    let store = EmbeddedStore::memory().unwrap();
    let (pk, other) = ("p#answers", "p#other");
    let item = |pk: &str, sk: &str, n: i64| {
        Item::from_iter([("pk".into(), pk.into()), ("sk".into(), sk.into()), ("n".into(), n.into())])
    };
    store.put(Table::Main, item(pk, "a", 1), Cond::None).await.unwrap();
    store.put(Table::Main, item(other, "a", 10), Cond::None).await.unwrap();
    let qs = [Query::new(pk, SkRange::All).limit(10), Query::new(other, SkRange::All)];
    let one = Query::new(pk, SkRange::All).limit(10);
    let store = &store;
    let get = |sk: &'static str| async move {
        let doc = store.get_doc(Table::Main, pk, sk).await.unwrap();
        doc.map(|d| serde_json::from_slice::<serde_json::Value>(&d).unwrap()["n"].as_i64().unwrap())
    };
    assert_eq!(ns(store, &qs).await, [vec![1], vec![10]]);
    assert_eq!((get("a").await, get("b").await), (Some(1), None));
    // Kept: a change behind the store's back (tests only) is not seen, by any read.
    store_raw(store, pk, "a", br#"{"sk":"a","n":99}"#);
    assert_eq!(ns(store, &qs).await, [vec![1], vec![10]]);
    assert_eq!(store.query_docs(Table::Main, &one).await.unwrap().len(), 1);
    assert_eq!(get("a").await, Some(1));
    let many = |sks: [&'static str; 3]| async move {
        let docs = store.get_docs(Table::Main, pk, &sks.map(String::from)).await.unwrap();
        let n = |d: &Doc| serde_json::from_slice::<serde_json::Value>(d).unwrap()["n"].as_i64().unwrap();
        docs.iter().map(|d| d.as_ref().map(n)).collect::<Vec<_>>()
    };
    assert_eq!(many(["b", "a", "a"]).await, [None, Some(1), Some(1)]);
    // Every kind of write through the store is, and only its partition's answers go.
    store.put(Table::Main, item(pk, "a", 2), Cond::None).await.unwrap();
    store_raw(store, other, "a", br#"{"sk":"a","n":98}"#);
    assert_eq!(ns(store, &qs).await, [vec![2], vec![10]]);
    assert_eq!(get("a").await, Some(2));
    let add = WriteOp::Add { table: Table::Main, pk: pk.into(), sk: "a".into(), attr: "n", delta: 1 };
    store.transact(vec![add]).await.unwrap();
    assert_eq!(ns(store, &qs).await, [vec![3], vec![10]]);
    assert_eq!(get("a").await, Some(3));
    store.put_new(Table::Main, vec![item(pk, "b", 4)]).await.unwrap();
    assert_eq!(ns(store, &qs).await, [vec![3, 4], vec![10]]);
    assert_eq!(get("b").await, Some(4));
    assert_eq!(many(["b", "a", "x"]).await, [Some(4), Some(3), None]);
    store.delete_many(Table::Main, vec![(pk.into(), "a".into())]).await.unwrap();
    assert_eq!(ns(store, &qs).await, [vec![4], vec![10]]);
    assert_eq!(get("a").await, None);
    store.delete(Table::Main, pk, "b", Cond::None).await.unwrap();
    assert_eq!(ns(store, &qs).await, [vec![], vec![10]]);
    assert!(store.query_docs(Table::Main, &one).await.unwrap().is_empty());
    store.put(Table::Main, item(other, "b", 11), Cond::None).await.unwrap();
    assert_eq!(ns(store, &qs).await, [vec![], vec![98, 11]]);

    // An item that expires leaves the kept answer when it does, without a write.
    let mut soon = item(pk, "c", 5);
    soon.insert(super::super::TTL_ATTRIBUTE.into(), (epoch_now() + 2).into());
    store.put(Table::Main, soon, Cond::None).await.unwrap();
    assert_eq!(ns(store, &qs).await, [vec![5], vec![98, 11]]);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    assert_eq!(ns(store, &qs).await, [vec![], vec![98, 11]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_kept_while_writes_run_are_never_older_than_the_last_returned_write() {
    let store = EmbeddedStore::memory().unwrap();
    let pk = "p#race";
    let item = |n: i64| Item::from_iter([("pk".into(), pk.into()), ("sk".into(), "a".into()), ("n".into(), n.into())]);
    store.put(Table::Main, item(0), Cond::None).await.unwrap();
    let q = Query::new(pk, SkRange::All).limit(1);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Readers keep offering what they read, some of it read before a write committed.
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (store, q, stop) = (store.clone(), q.clone(), stop.clone());
            tokio::spawn(async move {
                let mut last = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let n = ns(&store, std::slice::from_ref(&q)).await[0][0];
                    assert!(n >= last, "went back from {last} to {n}");
                    last = n;
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for n in 1..=300 {
        store.put(Table::Main, item(n), Cond::None).await.unwrap();
        assert_eq!(ns(&store, std::slice::from_ref(&q)).await[0], [n], "after write {n} returned");
        let doc = store.query_docs(Table::Main, &q).await.unwrap();
        assert!(String::from_utf8_lossy(&doc[0]).contains(&format!("\"n\":{n}")), "after write {n} returned");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
}

#[tokio::test]
async fn ranges_are_visited_whole_in_order_and_apart_only_once_long() {
    let store = EmbeddedStore::memory().unwrap();
    let n = 2 * RANGES_APART_AFTER + 10;
    let attr = super::super::TTL_ATTRIBUTE;
    let items: Vec<Item> = (0..n)
        .map(|i| {
            let mut item = Item::from_iter([("pk".into(), "p#r".into()), ("sk".into(), format!("{i:06}").into())]);
            // Every hundredth one expired: left out as by every read.
            if i % 100 == 7 {
                item.insert(attr.into(), 1.into());
            }
            item
        })
        .collect();
    store.put_new(Table::Main, items).await.unwrap();
    let range = |a: usize, b: usize| Query::new("p#r", SkRange::Between(format!("{a:06}"), format!("{b:06}")));
    let expect = |a: usize, b: usize| (a..=b).filter(|i| i % 100 != 7).collect::<Vec<usize>>();
    type Seen = Vec<(usize, std::thread::ThreadId)>;
    let visit = |qs: &[Query]| {
        let mut seen: Vec<Seen> = qs.iter().map(|_| Vec::new()).collect();
        let mut visitors: Vec<Box<Visitor>> = seen
            .iter_mut()
            .map(|s| {
                Box::new(move |doc: &[u8]| {
                    let v: serde_json::Value = serde_json::from_slice(doc).unwrap();
                    s.push((v["sk"].as_str().unwrap().parse().unwrap(), std::thread::current().id()));
                    Ok(())
                }) as Box<Visitor>
            })
            .collect();
        super::visit_ranges(&store.db, Table::Main, qs, &mut visitors).unwrap();
        drop(visitors);
        seen
    };
    let here = std::thread::current().id();
    // The last range long: those before it on threads of their own.
    let (a, b) = (1_000, 3_000);
    let seen = visit(&[range(0, a - 1), range(a, b - 1), range(b, n)]);
    for (s, (lo, hi)) in seen.iter().zip([(0, a - 1), (a, b - 1), (b, n - 1)]) {
        assert_eq!(s.iter().map(|(i, _)| *i).collect::<Vec<_>>(), expect(lo, hi));
    }
    assert!(seen[2].iter().all(|(_, t)| *t == here), "the last range is read on the caller's thread");
    for s in &seen[..2] {
        let t = s[0].1;
        assert!(t != here && s.iter().all(|(_, u)| *u == t), "an earlier range has a thread of its own");
    }
    assert_ne!(seen[0][0].1, seen[1][0].1);
    // The last range short: everything here, no thread started.
    let seen = visit(&[range(0, n - 100), range(n - 99, n)]);
    assert_eq!(seen[0].iter().map(|(i, _)| *i).collect::<Vec<_>>(), expect(0, n - 100));
    assert!(seen.iter().flatten().all(|(_, t)| *t == here));
    // A visitor's error ends the read and is the answer, from a helper as from the caller.
    for failing in [0, 1] {
        let mut visitors: Vec<Box<Visitor>> = (0..2)
            .map(|k| {
                Box::new(
                    move |_: &[u8]| {
                        if k == failing { Err(StoreError::Corrupt(format!("range {k}"))) } else { Ok(()) }
                    },
                ) as Box<Visitor>
            })
            .collect();
        let err =
            super::visit_ranges(&store.db, Table::Main, &[range(0, 99), range(100, n)], &mut visitors).unwrap_err();
        assert_eq!(err.to_string(), StoreError::Corrupt(format!("range {failing}")).to_string());
    }
    // The records of the ranges, as one read of the whole gives them.
    let q = |a, b| Query::new("p#r", SkRange::Between(a, b));
    let whole: Vec<Item> =
        super::super::query_as_ranges(&store, Table::Main, &[q("".into(), "~".into())]).await.unwrap();
    let parts: Vec<Item> =
        super::super::query_as_ranges(&store, Table::Main, &[range(0, 4_999), range(5_000, n)]).await.unwrap();
    assert_eq!(whole.len(), expect(0, n - 1).len());
    assert_eq!(parts, whole);
}
