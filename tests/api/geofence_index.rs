//! The geofence index: after creates, shape updates (moves, growth, circle to polygon and back)
//! and deletes, the index holds one copy of each live fence in each cell its shape overlaps,
//! equal to the fence, and nothing else.

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
        assert!(!cells.is_empty() && cells.iter().all(|c| c.len() == index::PRECISION), "{}: {cells:?}", g.id);
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

both!(update_and_delete_leave_no_stale_index_items, |app| async move {
    let near = |e: f64, n: f64| offset(HOME.0, HOME.1, e, n);
    let a = fence(&app, circle(HOME, 1000)).await;
    // Larger than a fine cell, across coarse cells' edges too.
    let big = fence(&app, polygon(&square(near(3000.0, 0.0), 1800.0))).await;
    let small = fence(&app, circle(near(-2000.0, 500.0), 60)).await;
    assert_index_exact(&app, "created").await;

    // Moved 20 km and shrunk: every old cell goes.
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
