//! Search totals from the cells' fence counts (`pages`, and the pages themselves): after
//! creates, moves between cells (circles, a polygon whose first vertex is far from its centroid,
//! a circle turned polygon), deletes one by one and in bulk, every count item equals the live
//! fences counted in its cell, and every search's total and first pages equal a brute force over
//! the live fences. Another project's fences at the same places are never counted.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use shared::domain::geofences::{self, Geofence, index};
use shared::geometry::LngLat;
use shared::store::Table;

use crate::both;
use crate::geofences::{HOME, circle, create_many, delete, polygon, project, put, square};
use crate::helpers::TestApp;
use crate::search::{brute_force, search};
use crate::trace::{Rng, offset};

/// Live fences of the app's project, as stored.
async fn live(app: &TestApp, ids: &[String]) -> Vec<Geofence> {
    let mut out = Vec::new();
    for id in ids {
        if let Ok(g) = geofences::get(app.state.store.as_ref(), &project(app), id).await {
            out.push(g);
        }
    }
    out
}

/// Every count item of the project, nonzero, by cell; and what the live fences make them.
async fn counts(app: &TestApp, fences: &[Geofence]) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let pid = &app.project.project_id;
    let prefix = format!("{pid}#CN#");
    let mut got = BTreeMap::new();
    for i in app.state.store.scan_all(Table::Main).await.expect("scan") {
        let pk = i["pk"].as_str().unwrap_or_default();
        if let Some(coarse) = pk.strip_prefix(&prefix) {
            let cell = i["sk"].as_str().expect("sk").to_owned();
            assert!(cell.starts_with(coarse), "{cell} kept under {coarse}");
            let n = i["n"].as_i64().expect("n");
            if n != 0 {
                got.insert(cell, n);
            }
        }
    }
    let mut want = BTreeMap::new();
    for g in fences {
        *want.entry(index::count_cell(g.anchor()).expect("cell")).or_insert(0) += 1;
    }
    (got, want)
}

/// The search at `p` of `radius`: its total (`pages` at one a page) and its first two pages of 10.
async fn answer(app: &TestApp, p: LngLat, radius: f64) -> (u64, Vec<String>) {
    let uri = format!("/v1/api/search/geofences/?location={},{}&radius={radius}", p.lat, p.lng);
    let total = search(app, &format!("{uri}&page_limit=1")).await["data"]["pages"].as_u64().expect("pages");
    let mut ids = Vec::new();
    for page in 1..=2 {
        let res = search(app, &format!("{uri}&page_number={page}")).await;
        let list = res["data"]["geofences"].as_array().expect("geofences").clone();
        ids.extend(list.iter().map(|g| g["id"].as_str().expect("id").to_owned()));
        assert_eq!(res["data"]["pages"].as_u64(), Some(total.div_ceil(10)), "{uri}: {res}");
    }
    (total, ids)
}

/// Counts and searches agree with the live fences, at points around HOME and radii from a few
/// cells (no inner cell) to 5 km (about 90 inner cells).
async fn check(app: &TestApp, ids: &[String], step: &str) {
    let fences = live(app, ids).await;
    let (got, want) = counts(app, &fences).await;
    assert_eq!(got, want, "{step}: count items");
    let mut rng = Rng::new(47);
    let mut inner_seen = 0;
    for q in 0..5 {
        let (lng, lat) = offset(HOME.0, HOME.1, (rng.uniform() - 0.5) * 4000.0, (rng.uniform() - 0.5) * 4000.0);
        let p = LngLat { lng, lat };
        for radius in [400.0, 1500.0, 5000.0] {
            let plan = index::SearchPlan::new(p, radius).expect("plan");
            inner_seen += plan.cells.iter().filter(|c| c.inner).count();
            let expected = brute_force(&fences, p, radius);
            let (total, page) = answer(app, p, radius).await;
            assert_eq!(total as usize, expected.len(), "{step}: query {q} total at {p:?} radius {radius}");
            let want: Vec<String> = expected.iter().take(20).map(|(id, _)| id.clone()).collect();
            assert_eq!(page, want, "{step}: query {q} pages 1-2 at {p:?} radius {radius}");
        }
    }
    assert!(inner_seen > 100, "{step}: the searches should count whole cells ({inner_seen} inner)");
}

async fn update(app: &TestApp, body: Value) {
    let (status, res) = put(app, "v1", body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
}

/// 120 fences within 3 km of HOME: circles of 50 to 1000 m, squares, and triangles whose first
/// vertex lies 900 m from the rest (often in another cell than the centroid).
fn bodies(rng: &mut Rng) -> Vec<Value> {
    (0..120)
        .map(|i| {
            let c = offset(HOME.0, HOME.1, (rng.uniform() - 0.5) * 6000.0, (rng.uniform() - 0.5) * 6000.0);
            match i % 6 {
                4 => polygon(&square(c, 100.0 + rng.uniform() * 500.0)),
                5 => {
                    polygon(&[offset(c.0, c.1, 900.0, 0.0), offset(c.0, c.1, 0.0, 80.0), offset(c.0, c.1, 0.0, -80.0)])
                }
                _ => circle(c, 50 + (rng.uniform() * 950.0) as u32),
            }
        })
        .collect()
}

both!(geofence_search_totals_follow_creates_moves_and_deletes, |app| async move {
    let mut rng = Rng::new(0x70_7A15);
    let ids: Vec<String> = create_many(&app, bodies(&mut rng)).await.into_iter().map(|g| g.id).collect();
    check(&app, &ids, "created").await;

    // Moves: circles to other cells (near and far), a circle grown in place, a circle turned
    // polygon and a polygon turned circle, a polygon's ring rotated (its first vertex moves).
    for (k, id) in ids.iter().enumerate().take(24) {
        let to = offset(HOME.0, HOME.1, (rng.uniform() - 0.5) * 8000.0, (rng.uniform() - 0.5) * 8000.0);
        let body = match k % 4 {
            0 => {
                json!({"geofence_id": id, "coordinates": [to.0, to.1], "geometry_type": "circle", "geometry_radius": 200})
            }
            1 => json!({"geofence_id": id, "geometry_type": "polygon",
                        "coordinates": square(to, 300.0).iter().map(|p| [p.0, p.1]).collect::<Vec<_>>()}),
            2 => json!({"geofence_id": id, "geometry_radius": 1000}),
            _ => json!({"geofence_id": id, "tag": "moved nowhere"}),
        };
        update(&app, body).await;
    }
    let triangle = &ids[29];
    let g = geofences::get(app.state.store.as_ref(), &project(&app), triangle).await.expect("triangle");
    let mut ring: Vec<[f64; 2]> = g.ring.expect("ring").iter().map(|p| [p.lng, p.lat]).collect();
    ring.pop();
    ring.rotate_left(1);
    update(&app, json!({"geofence_id": triangle, "coordinates": ring})).await;
    check(&app, &ids, "moved").await;

    for id in ids.iter().skip(30).step_by(7) {
        let (status, res) = delete(&app, &format!("/v1/api/geofence/?geofence_id={id}"), None).await;
        assert_eq!(status, StatusCode::OK, "{res}");
    }
    let bulk: Vec<&String> = ids.iter().skip(31).step_by(7).collect();
    let (status, res) = delete(&app, "/v1/api/geofence/", Some(json!({"geofence_id": bulk}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    check(&app, &ids, "deleted").await;
});

both!(geofence_search_totals_never_count_another_projects_fences, |app| async move {
    let mut rng = Rng::new(0xB0B);
    let ours: Vec<String> = create_many(&app, bodies(&mut rng)).await.into_iter().map(|g| g.id).collect();
    let b = app.other_project().await;
    let b_app = TestApp { state: app.state.clone(), router: app.router.clone(), project: b };
    // The other project's fences at the same places and more: one in every cell around HOME.
    let mut rng = Rng::new(0xB0B);
    let mut theirs_bodies = bodies(&mut rng);
    theirs_bodies.extend((0..80).map(|_| {
        let c = offset(HOME.0, HOME.1, (rng.uniform() - 0.5) * 9000.0, (rng.uniform() - 0.5) * 9000.0);
        circle(c, 100)
    }));
    let theirs: Vec<String> = create_many(&b_app, theirs_bodies).await.into_iter().map(|g| g.id).collect();
    check(&app, &ours, "ours beside theirs").await;
    check(&b_app, &theirs, "theirs beside ours").await;
    // A search from HOME at 5 km in our project names none of theirs.
    let (_, page) = answer(&app, LngLat { lng: HOME.0, lat: HOME.1 }, 5000.0).await;
    assert!(page.iter().all(|id| ours.contains(id)), "{page:?}");
});
