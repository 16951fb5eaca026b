//! The geofence index at both precisions: after creates, shape updates (moves, growth, circle to
//! polygon and back) and deletes, the index holds one copy of each live fence in each cell of
//! either precision its shape overlaps, equal to the fence, and nothing else.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use serde_json::{Value, json};
use shared::domain::geofences::{self, Geofence, index};
use shared::store::Table;

use crate::both;
use crate::geofences::{HOME, circle, delete, fence, polygon, put, square};
use crate::helpers::TestApp;
use crate::trace::offset;

/// Every index item of the app's project as (cell, fence id), each checked to be a copy of a live
/// fence; and the cells the live fences' shapes overlap, as the index should hold them.
async fn index_and_expected(app: &TestApp) -> (BTreeSet<(String, String)>, BTreeSet<(String, String)>) {
    let pid = &app.project.project_id;
    let items = app.state.store.scan_all(Table::Main).await.expect("scan");
    let field = |i: &serde_json::Map<String, Value>, k: &str| i[k].as_str().unwrap_or_default().to_owned();
    let live: Vec<Geofence> = items
        .iter()
        .filter(|i| field(i, "pk") == format!("{pid}#F"))
        .map(|i| serde_json::from_value(Value::Object(i.clone())).expect("fence"))
        .collect();
    let mut got = BTreeSet::new();
    for i in items.iter().filter(|i| field(i, "pk").starts_with(&format!("{pid}#C#"))) {
        let cell = field(i, "pk")[pid.len() + 3..].to_owned();
        let copy: Geofence = serde_json::from_value(Value::Object(i.clone())).expect("copy");
        let fence = live.iter().find(|g| g.id == index::copy_fence_id(&field(i, "sk")));
        assert_eq!(fence, Some(&copy), "cell {cell} holds a stale copy of {}", field(i, "sk"));
        got.insert((cell, field(i, "sk")));
    }
    let mut expected = BTreeSet::new();
    for g in &live {
        let cells = g.shape().cells("coordinates").expect("cells");
        assert_eq!(cells, g.cells, "the fence records the cells of its shape");
        for (precision, what) in [(index::PRECISION, "fine"), (index::COARSE_PRECISION, "coarse")] {
            assert!(cells.iter().any(|c| c.len() == precision), "{} has no {what} cell", g.id);
        }
        expected.extend(geofences::copy_keys(g).into_iter().map(|(pk, sk)| (pk[pid.len() + 3..].to_owned(), sk)));
    }
    (got, expected)
}

async fn assert_index_exact(app: &TestApp, step: &str) {
    let (got, expected) = index_and_expected(app).await;
    let stale: Vec<_> = got.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&got).collect();
    assert!(stale.is_empty() && missing.is_empty(), "{step}: stale {stale:?}, missing {missing:?}");
}

async fn update(app: &TestApp, body: Value) {
    let (status, res) = put(app, "v1", body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
}

both!(update_and_delete_leave_no_stale_index_items_at_any_precision, |app| async move {
    let near = |e: f64, n: f64| offset(HOME.0, HOME.1, e, n);
    let a = fence(&app, circle(HOME, 1000)).await;
    // Larger than a fine cell, across coarse cells' edges too.
    let big = fence(&app, polygon(&square(near(3000.0, 0.0), 1800.0))).await;
    let small = fence(&app, circle(near(-2000.0, 500.0), 60)).await;
    assert_index_exact(&app, "created").await;

    // Moved 20 km and shrunk: every old cell of both precisions goes.
    let far = near(20_000.0, -15_000.0);
    update(&app, json!({"geofence_id": a, "coordinates": [far.0, far.1], "geometry_radius": 900})).await;
    assert_index_exact(&app, "circle moved").await;
    // Polygon to circle, circle to a large polygon, a tag change (same cells, new copies).
    let to = near(6000.0, 6000.0);
    update(
        &app,
        json!({"geofence_id": big, "geometry_type": "circle", "coordinates": [to.0, to.1],
        "geometry_radius": 300}),
    )
    .await;
    let ring: Vec<[f64; 2]> = square(near(-3000.0, 2000.0), 1500.0).iter().map(|p| [p.0, p.1]).collect();
    update(&app, json!({"geofence_id": small, "geometry_type": "polygon", "coordinates": ring})).await;
    update(&app, json!({"geofence_id": small, "tag": "grown"})).await;
    assert_index_exact(&app, "shapes changed").await;

    let (status, res) = delete(&app, &format!("/v1/api/geofence/?geofence_id={a}"), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_index_exact(&app, "one deleted").await;
    let (status, res) = delete(&app, "/v1/api/geofence/", Some(json!({"geofence_id": [big, small]}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (got, _) = index_and_expected(&app).await;
    assert!(got.is_empty(), "all deleted, yet the index holds {got:?}");
});

// A project whose fences were stored before the coarse copies existed (no marker, fine copies
// only) still finds them in a wide search, over the fine cells.
both!(a_project_indexed_before_the_coarse_cells_is_searched_on_the_fine_ones, |app| async move {
    let pid = app.project.project_id.clone();
    let id = fence(&app, circle(HOME, 200)).await;
    let search = |r: u32| format!("/v1/api/search/geofences/?location={},{}&radius={r}", HOME.1 + 0.03, HOME.0);
    let found = |res: &Value| res["data"]["geofences"].as_array().unwrap().iter().any(|g| g["id"] == id.as_str());
    // (No search before the marker goes: a process remembers a project seen marked.)
    let store = &app.state.store;
    store.delete(Table::Main, &format!("{pid}#C5"), "-", shared::store::Cond::None).await.unwrap();
    let (got, _) = index_and_expected(&app).await;
    for (cell, sk) in got.iter().filter(|(c, _)| c.len() == index::COARSE_PRECISION) {
        store.delete(Table::Main, &format!("{pid}#C#{cell}"), sk, shared::store::Cond::None).await.unwrap();
    }
    for r in [1000, 2000, 5000, 10_000] {
        let (status, res) = app.get(&search(r)).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        assert_eq!(found(&res), r >= 5000, "radius {r} on fine cells only: {res}");
    }
});

// Fences stored before the copies had class keys (every copy under the bare id) are found at
// every radius, and an update or a delete leaves no copy behind.
both!(fences_stored_before_the_class_keys_are_found_updated_and_deleted, |app| async move {
    let pid = app.project.project_id.clone();
    let near = |e: f64, n: f64| offset(HOME.0, HOME.1, e, n);
    let a = fence(&app, circle(HOME, 1000)).await;
    let b = fence(&app, polygon(&square(near(3000.0, 0.0), 1500.0))).await;
    let store = &app.state.store;
    for id in [&a, &b] {
        let mut g: Geofence =
            shared::store::from_item(store.get(Table::Main, &format!("{pid}#F"), id).await.unwrap().expect("fence"))
                .unwrap();
        for (pk, sk) in geofences::copy_keys(&g) {
            store.delete(Table::Main, &pk, &sk, shared::store::Cond::None).await.unwrap();
        }
        g.keyed = false;
        let mut ops = Vec::new();
        for (pk, sk) in std::iter::once((format!("{pid}#F"), g.id.clone())).chain(geofences::copy_keys(&g)) {
            let item = shared::store::to_item(&pk, &sk, &g).unwrap();
            ops.push(shared::store::WriteOp::Put { table: Table::Main, item, cond: shared::store::Cond::None });
        }
        store.transact(ops).await.unwrap();
    }
    assert_index_exact(&app, "stored the old way").await;
    for r in [300, 1000, 2000, 5000, 10_000] {
        let uri = format!("/v1/api/search/geofences/?location={},{}&radius={r}&page_limit=100", HOME.1, HOME.0);
        let (status, res) = app.get(&uri).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        let ids: Vec<&str> =
            res["data"]["geofences"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap()).collect();
        assert!(ids.contains(&a.as_str()), "radius {r}: {ids:?}");
        assert_eq!(ids.contains(&b.as_str()), r >= 2000, "radius {r}: {ids:?}");
    }
    update(&app, json!({"geofence_id": a, "tag": "kept"})).await;
    let to = near(-4000.0, 3000.0);
    update(
        &app,
        json!({"geofence_id": b, "geometry_type": "circle", "coordinates": [to.0, to.1], "geometry_radius": 700}),
    )
    .await;
    assert_index_exact(&app, "updated").await;
    let (status, res) = delete(&app, "/v1/api/geofence/", Some(json!({"geofence_id": [a, b]}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (got, _) = index_and_expected(&app).await;
    assert!(got.is_empty(), "all deleted, yet the index holds {got:?}");
});

// A project indexed before the coarse copies and the class keys (no marker, fine copies under the
// bare id) is brought up to date by a reindex: every copy as a new fence's, the marker written;
// a second run changes nothing.
both!(a_reindex_brings_an_old_project_index_up_to_date, |app| async move {
    let pid = app.project.project_id.clone();
    let near = |e: f64, n: f64| offset(HOME.0, HOME.1, e, n);
    let ids = [
        fence(&app, circle(HOME, 1000)).await,
        fence(&app, polygon(&square(near(3000.0, 0.0), 1800.0))).await,
        fence(&app, circle(near(-2000.0, 500.0), 60)).await,
    ];
    let store = &app.state.store;
    store.delete(Table::Main, &format!("{pid}#C5"), "-", shared::store::Cond::None).await.unwrap();
    for id in &ids {
        let mut g: Geofence =
            shared::store::from_item(store.get(Table::Main, &format!("{pid}#F"), id).await.unwrap().expect("fence"))
                .unwrap();
        for (pk, sk) in geofences::copy_keys(&g) {
            store.delete(Table::Main, &pk, &sk, shared::store::Cond::None).await.unwrap();
        }
        (g.keyed, g.cells) = (false, g.cells.into_iter().filter(|c| c.len() == index::PRECISION).collect());
        let mut ops = Vec::new();
        for (pk, sk) in std::iter::once((format!("{pid}#F"), g.id.clone())).chain(geofences::copy_keys(&g)) {
            let item = shared::store::to_item(&pk, &sk, &g).unwrap();
            ops.push(shared::store::WriteOp::Put { table: Table::Main, item, cond: shared::store::Cond::None });
        }
        store.transact(ops).await.unwrap();
    }
    let done = geofences::reindex(store.as_ref(), &pid).await.expect("reindex");
    assert_eq!((done.fences, done.rewritten, done.marked), (3, 3, true), "{done:?}");
    assert!(store.get(Table::Main, &format!("{pid}#C5"), "-").await.unwrap().is_some());
    assert_index_exact(&app, "reindexed").await;
    let (got, _) = index_and_expected(&app).await;
    assert!(got.iter().any(|(_, sk)| !ids.contains(sk)), "class keys written");
    let again = geofences::reindex(store.as_ref(), &pid).await.expect("reindex");
    assert_eq!((again.fences, again.rewritten, again.marked), (3, 0, true), "{again:?}");
});
