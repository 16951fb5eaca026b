//! The storage trait itself, held to one behaviour on both backends.

use serde_json::json;
use shared::store::{Cond, Item, Query, SkRange, StoreError, Table, WriteOp, query_as_ranges};

use crate::both;

fn item(pk: &str, sk: &str, v: i64) -> Item {
    json!({"pk": pk, "sk": sk, "v": v, "nested": {"a": [1, "x", null]}}).as_object().unwrap().clone()
}

fn sks(items: &[Item]) -> Vec<&str> {
    items.iter().map(|i| i["sk"].as_str().unwrap()).collect()
}

both!(query_ranges_cursors_and_order, |app| async move {
    let s = app.state.store.as_ref();
    let pk = format!("{}#T", app.project.project_id);
    for sk in ["a1", "a2", "a3", "b1", "b2"] {
        s.put(Table::Main, item(&pk, sk, 1), Cond::None).await.unwrap();
    }
    s.put(Table::Main, item(&format!("{pk}x"), "a1", 1), Cond::None).await.unwrap();
    let q = |r| Query::new(&pk, r);
    assert_eq!(sks(&s.query(Table::Main, &q(SkRange::All)).await.unwrap().items), ["a1", "a2", "a3", "b1", "b2"]);
    assert_eq!(sks(&s.query(Table::Main, &q(SkRange::Prefix("a".into()))).await.unwrap().items), ["a1", "a2", "a3"]);
    let between = SkRange::Between("a2".into(), "b1".into());
    assert_eq!(sks(&s.query(Table::Main, &q(between.clone())).await.unwrap().items), ["a2", "a3", "b1"]);
    assert_eq!(s.count(Table::Main, &pk, &between).await.unwrap(), 3);
    assert_eq!(s.count(Table::Main, &pk, &SkRange::All).await.unwrap(), 5);
    let desc = s.query(Table::Main, &q(SkRange::All).descending().limit(2)).await.unwrap();
    assert_eq!(sks(&desc.items), ["b2", "b1"]);
    let rest = s.query(Table::Main, &q(SkRange::All).descending().after(desc.last_sk.clone())).await.unwrap();
    assert_eq!(sks(&rest.items), ["a3", "a2", "a1"]);
    let first = s.query(Table::Main, &q(SkRange::All).limit(3)).await.unwrap();
    assert_eq!(first.last_sk.as_deref(), Some("a3"));
    let next = s.query(Table::Main, &q(SkRange::All).after(first.last_sk)).await.unwrap();
    assert_eq!(sks(&next.items), ["b1", "b2"]);
    assert_eq!(next.last_sk, None);
    // Items come back as stored.
    assert_eq!(s.get(Table::Main, &pk, "a1").await.unwrap().unwrap(), item(&pk, "a1", 1));
});

both!(conditions_hold_or_nothing_changes, |app| async move {
    let s = app.state.store.as_ref();
    let pk = format!("{}#C", app.project.project_id);
    s.put(Table::Main, item(&pk, "x", 1), Cond::NotExists).await.unwrap();
    assert!(matches!(s.put(Table::Main, item(&pk, "x", 2), Cond::NotExists).await, Err(StoreError::ConditionFailed)));
    assert!(matches!(s.put(Table::Main, item(&pk, "y", 2), Cond::Exists).await, Err(StoreError::ConditionFailed)));
    assert!(matches!(
        s.put(Table::Main, item(&pk, "x", 2), Cond::Equals("v", json!(7))).await,
        Err(StoreError::ConditionFailed)
    ));
    s.put(Table::Main, item(&pk, "x", 2), Cond::Equals("v", json!(1))).await.unwrap();
    assert_eq!(s.get(Table::Main, &pk, "x").await.unwrap().unwrap()["v"], 2);

    // A transaction with one failing condition writes nothing.
    let ops = vec![
        WriteOp::Put { table: Table::Main, item: item(&pk, "t1", 1), cond: Cond::None },
        WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: "x".into(), cond: Cond::Equals("v", json!(99)) },
    ];
    assert!(matches!(s.transact(ops).await, Err(StoreError::ConditionFailed)));
    assert!(s.get(Table::Main, &pk, "t1").await.unwrap().is_none());
    assert!(s.get(Table::Main, &pk, "x").await.unwrap().is_some());
    let ops = vec![
        WriteOp::Put { table: Table::Locations, item: item(&pk, "t1", 1), cond: Cond::NotExists },
        WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: "x".into(), cond: Cond::Equals("v", json!(2)) },
    ];
    s.transact(ops).await.unwrap();
    assert!(s.get(Table::Locations, &pk, "t1").await.unwrap().is_some());
    assert!(s.get(Table::Main, &pk, "x").await.unwrap().is_none());
    assert!(s.get(Table::Main, &pk, "t1").await.unwrap().is_none(), "tables are separate");

    let stored =
        s.put_new(Table::Locations, vec![item(&pk, "n1", 1), item(&pk, "t1", 5), item(&pk, "n2", 1)]).await.unwrap();
    assert_eq!(stored, [true, false, true]);
    assert_eq!(s.get(Table::Locations, &pk, "t1").await.unwrap().unwrap()["v"], 1, "existing item untouched");
    s.delete(Table::Locations, &pk, "n1", Cond::Exists).await.unwrap();
    assert!(matches!(s.delete(Table::Locations, &pk, "n1", Cond::Exists).await, Err(StoreError::ConditionFailed)));

    // A check writes nothing and fails its transaction unless it holds (a delete guarding an
    // absence too).
    let check = |sk: &str, cond| WriteOp::Check { table: Table::Locations, pk: pk.clone(), sk: sk.into(), cond };
    let put = |sk: &str| WriteOp::Put { table: Table::Main, item: item(&pk, sk, 1), cond: Cond::None };
    let ops = vec![check("t1", Cond::Equals("v", json!(2))), put("c1")];
    assert!(matches!(s.transact(ops).await, Err(StoreError::ConditionFailed)));
    assert!(s.get(Table::Main, &pk, "c1").await.unwrap().is_none());
    s.transact(vec![check("t1", Cond::Equals("v", json!(1))), put("c1")]).await.unwrap();
    assert!(s.get(Table::Main, &pk, "c1").await.unwrap().is_some());
    assert_eq!(s.get(Table::Locations, &pk, "t1").await.unwrap().unwrap()["v"], 1, "checked, unchanged");
    let absent = WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: "c1".into(), cond: Cond::NotExists };
    assert!(matches!(s.transact(vec![absent, put("c2")]).await, Err(StoreError::ConditionFailed)));
    assert!(s.get(Table::Main, &pk, "c2").await.unwrap().is_none());
});

both!(get_docs_answers_each_key_in_order, |app| async move {
    let s = app.state.store.as_ref();
    let pk = format!("{}#G", app.project.project_id);
    for sk in ["a", "b", "c"] {
        s.put(Table::Main, item(&pk, sk, 1), Cond::None).await.unwrap();
    }
    let keys: Vec<String> = ["c", "x", "a", "a"].map(String::from).to_vec();
    let docs = s.get_docs(Table::Main, &pk, &keys).await.unwrap();
    let got: Vec<Option<String>> = docs
        .iter()
        .map(|d| d.as_ref().map(|d| serde_json::from_slice::<serde_json::Value>(d).unwrap()["sk"].to_string()))
        .collect();
    assert_eq!(got, [Some("\"c\"".into()), None, Some("\"a\"".into()), Some("\"a\"".into())]);
    assert!(s.get_docs(Table::Main, &pk, &[]).await.unwrap().is_empty());
    // More keys than one DynamoDB BatchGetItem takes (100), every third absent, in a mixed order;
    // an expired item reads as absent.
    let many: Vec<String> = (0..250).map(|n| format!("k{:03}", (n * 7) % 250)).collect();
    for sk in many.iter().filter(|sk| !sk[1..].parse::<u32>().unwrap().is_multiple_of(3)) {
        s.put(Table::Main, item(&pk, sk, 1), Cond::None).await.unwrap();
    }
    let mut gone = item(&pk, "k001", 1);
    gone.insert(shared::store::TTL_ATTRIBUTE.into(), (chrono::Utc::now().timestamp() - 60).into());
    s.put(Table::Main, gone, Cond::None).await.unwrap();
    let docs = s.get_docs(Table::Main, &pk, &many).await.unwrap();
    assert_eq!(docs.len(), many.len());
    for (sk, doc) in many.iter().zip(&docs) {
        let n: u32 = sk[1..].parse().unwrap();
        let got = doc.as_ref().map(|d| serde_json::from_slice::<serde_json::Value>(d).unwrap()["sk"].clone());
        let want = (!n.is_multiple_of(3) && n != 1).then(|| serde_json::json!(sk));
        assert_eq!(got, want, "{sk}");
    }
});

both!(items_past_their_ttl_are_gone_for_reads_but_not_for_the_sweeper, |app| async move {
    use shared::store::TTL_ATTRIBUTE;
    let s = app.state.store.as_ref();
    let pk = format!("{}#TTL", app.project.project_id);
    let now = chrono::Utc::now().timestamp();
    // a: past; b: no TTL; c: future; d: past; e: a TTL that is not a number (no expiry, as on AWS).
    for (sk, ttl) in
        [("a", json!(now - 10)), ("b", json!(null)), ("c", json!(now + 3600)), ("d", json!(now - 1)), ("e", json!("1"))]
    {
        let mut i = item(&pk, sk, 1);
        if !ttl.is_null() {
            i.insert(TTL_ATTRIBUTE.into(), ttl);
        }
        s.put(Table::Main, i, Cond::None).await.unwrap();
    }
    let q = Query::new(&pk, SkRange::All);
    assert_eq!(sks(&s.query(Table::Main, &q).await.unwrap().items), ["b", "c", "e"]);
    assert_eq!(s.count(Table::Main, &pk, &SkRange::All).await.unwrap(), 3);
    assert_eq!(s.query_docs(Table::Main, &q).await.unwrap().len(), 3);
    assert!(s.get(Table::Main, &pk, "a").await.unwrap().is_none());
    assert!(s.get(Table::Main, &pk, "c").await.unwrap().is_some());
    // A limit counts the items returned, not those skipped; the cursor goes on from there.
    let first = s.query(Table::Main, &q.clone().limit(1)).await.unwrap();
    assert_eq!((sks(&first.items), first.last_sk.is_some()), (vec!["b"], true));
    let next = s.query(Table::Main, &q.clone().after(first.last_sk).limit(2)).await.unwrap();
    assert_eq!(sks(&next.items), ["c", "e"]);
    // The sweeper (and erasure) see everything; a write's condition sees the item too, as
    // DynamoDB's does until TTL deletes it.
    assert_eq!(sks(&s.query(Table::Main, &q.clone().with_expired()).await.unwrap().items), ["a", "b", "c", "d", "e"]);
    assert!(matches!(s.put(Table::Main, item(&pk, "a", 2), Cond::NotExists).await, Err(StoreError::ConditionFailed)));
    s.delete_many(Table::Main, vec![(pk.clone(), "a".into()), (pk.clone(), "d".into())]).await.unwrap();
    assert_eq!(s.query(Table::Main, &q.clone().with_expired()).await.unwrap().items.len(), 3);
});

both!(a_long_read_in_chunks_is_the_read_in_one, |app| async move {
    let s = app.state.store.as_ref();
    let pk = format!("{}#L", app.project.project_id);
    // More than the embedded store reads on the calling task, so its chunked path runs, and more
    // than one DynamoDB page (1 MB), so pages are handed over one by one.
    let pad = "x".repeat(600);
    let items: Vec<Item> = (0..2_500)
        .map(|k| {
            let mut i = item(&pk, &format!("{k:05}"), k);
            i.insert("pad".into(), pad.as_str().into());
            i
        })
        .collect();
    s.put_new(Table::Main, items).await.unwrap();
    let q = Query::new(&pk, SkRange::Between("00100".into(), "02400".into()));
    let whole = s.query_docs(Table::Main, &q).await.unwrap();
    assert_eq!(whole.len(), 2_301);
    let (mut chunked, mut chunks) = (Vec::new(), 0);
    s.query_docs_each(Table::Main, &q, &mut |docs| {
        chunked.extend(docs);
        chunks += 1;
        Ok(())
    })
    .await
    .unwrap();
    assert!(chunked.iter().eq(whole.iter().map(|d| &d[..])), "the chunks, in order, are the whole read");
    assert!(chunks > 1, "{chunks} chunk");
    // Decoded as read: the records of the whole read, in order.
    #[derive(serde::Deserialize, PartialEq, Debug)]
    struct Record {
        sk: String,
        v: i64,
    }
    let spread: Vec<Record> = query_as_ranges(s, Table::Main, std::slice::from_ref(&q)).await.unwrap();
    let decoded: Vec<Record> = whole.iter().map(|d| serde_json::from_slice(d).unwrap()).collect();
    assert_eq!(spread, decoded);
    // A document that is not its record is an error, whichever core decoded it.
    #[derive(serde::Deserialize, Debug)]
    struct Wrong {
        #[allow(dead_code)]
        v: String,
    }
    let r = query_as_ranges::<Wrong>(s, Table::Main, std::slice::from_ref(&q)).await;
    assert!(matches!(&r, Err(StoreError::Corrupt(_))), "{r:?}");
    // Also when the document is in a later chunk (past the embedded store's 1,000 and DynamoDB's
    // first 1 MB page).
    let mut odd = item(&pk, "02000", 0);
    odd.insert("v".into(), "not a number".into());
    s.put(Table::Main, odd, Cond::None).await.unwrap();
    let r = query_as_ranges::<Record>(s, Table::Main, std::slice::from_ref(&q)).await;
    assert!(matches!(&r, Err(StoreError::Corrupt(m)) if m.contains("invalid type")), "{r:?}");
    // A limit holds across chunks.
    let mut n = 0;
    s.query_docs_each(Table::Main, &q.clone().limit(2_000), &mut |docs| {
        n += docs.len();
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(n, 2_000);
    // An error from the caller ends the read and is what it returns.
    let mut calls = 0;
    let r = s
        .query_docs_each(Table::Main, &q, &mut |_| {
            calls += 1;
            Err(StoreError::Corrupt("stop".into()))
        })
        .await;
    assert!(matches!(&r, Err(StoreError::Corrupt(m)) if m == "stop"), "{r:?}");
    assert_eq!(calls, 1);
});

/// Webhook bodies are deflated where writes are billed by the kilobyte (`webhooks::stored_body`):
/// DynamoDB, not the embedded store (the batch test in `webhooks` checks each stores its form).
#[tokio::test]
async fn only_dynamodb_bills_by_the_kilobyte() {
    use crate::helpers::{Backend, store};
    assert!(store(Backend::DynamoDb).await.store.bills_by_kilobyte());
    assert!(!store(Backend::Embedded).await.store.bills_by_kilobyte());
}
