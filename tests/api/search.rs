//! Nearby geofence search: order and distances, paging by `page_limit`, validation, the
//! `user_id` form, and a property test against a brute force over every fence.

use std::time::Instant;

use axum::http::StatusCode;
use serde_json::{Value, json};
use shared::domain::geofences::{self, Geofence, index};
use shared::geometry::LngLat;

use crate::both;
use crate::geofences::{HOME, circle, create_many, fence, ids_of, polygon, project, square};
use crate::helpers::{Backend, Key, TestApp, assert_error};
use crate::trace::{Rng, offset};

fn ll(p: (f64, f64)) -> LngLat {
    LngLat { lng: p.0, lat: p.1 }
}

/// The search URI for a `(lng, lat)` point (the parameter is written `lat,lng`).
fn at(p: (f64, f64), radius: impl std::fmt::Display) -> String {
    format!("/v1/api/search/geofences/?location={},{}&radius={radius}", p.1, p.0)
}

pub async fn search(app: &TestApp, uri: &str) -> Value {
    let (status, res) = app.get(uri).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {res}");
    assert_eq!((res["status"].clone(), res["code"].clone()), (json!(true), json!(200)), "{res}");
    res
}

/// Every page of a search (page_limit 100): (id, distance) in order.
async fn search_all(app: &TestApp, uri: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for page in 1.. {
        let res = search(app, &format!("{uri}&page_limit=100&page_number={page}")).await;
        let items = res["data"]["geofences"].as_array().unwrap().clone();
        if items.is_empty() {
            break;
        }
        let pages = res["data"]["pages"].as_u64().unwrap();
        out.extend(items.iter().map(|g| (g["id"].as_str().unwrap().to_owned(), g["distance"].as_f64().unwrap())));
        assert!(page as u64 <= pages, "{res}");
    }
    out
}

both!(nearest_first_with_distances, |app| async move {
    let p = HOME;
    let a = fence(&app, circle(p, 100)).await;
    let b_center = offset(p.0, p.1, 500.0, 0.0);
    let b = fence(&app, circle(b_center, 200)).await;
    let c_ring = square(offset(p.0, p.1, 0.0, 1000.0), 100.0);
    let c = fence(&app, polygon(&c_ring)).await;
    let d = fence(&app, circle(offset(p.0, p.1, -3000.0, 0.0), 100)).await;
    let e = fence(&app, polygon(&square(offset(p.0, p.1, 50.0, 50.0), 150.0))).await;

    let res = search(&app, &at(p, 2000)).await;
    let mut inside = [a.clone(), e.clone()];
    inside.sort();
    let expected: Vec<String> = inside.iter().cloned().chain([b.clone(), c.clone()]).collect();
    assert_eq!(ids_of(&res, "id"), expected, "ties at 0 m by id; the far fence is out: {res}");
    let gs = res["data"]["geofences"].as_array().unwrap();
    assert_eq!((gs[0]["distance"].clone(), gs[1]["distance"].clone()), (json!(0.0), json!(0.0)));
    let b_dist = ll(b_center).distance_m(ll(p)) - 200.0;
    assert!((gs[2]["distance"].as_f64().unwrap() - b_dist).abs() <= 0.005 + 1e-9, "{} vs {b_dist}", gs[2]);
    let c_dist = gs[3]["distance"].as_f64().unwrap();
    // The nearest point of C is straight north, on its southern edge.
    let c_expected = ll(p).distance_m(LngLat { lng: p.0, lat: c_ring[0].1 });
    assert!((c_dist - c_expected).abs() < 0.5, "{c_dist} vs {c_expected}");
    // Each item is a Geofence plus its distance.
    for g in gs {
        for f in ["id", "account_id", "project_id", "geometry_type", "geometry_center", "is_enabled", "created_at"] {
            assert!(g.get(f).is_some(), "missing {f}: {g}");
        }
    }
    assert_eq!(gs[2]["geometry_radius"], 200);
    assert_eq!(gs[3]["geometry"]["type"], "Polygon");
    let d_items = search(&app, &at(p, 3000)).await;
    assert_eq!(ids_of(&d_items, "id").last(), Some(&d), "{d_items}");
    // A radius that ends just short of B's edge misses it; one just past it finds it.
    let short = ids_of(&search(&app, &at(p, b_dist - 0.5)).await, "id");
    assert!(!short.contains(&b), "{short:?}");
    assert!(ids_of(&search(&app, &at(p, b_dist + 0.5)).await, "id").contains(&b));
    // Nothing near: an empty page with null paging.
    let res = search(&app, &at((10.0, 50.0), 5000)).await;
    let dd = &res["data"];
    assert_eq!(
        (dd["geofences"].clone(), dd["next_page"].clone(), dd["pages"].clone(), dd["prev_page"].clone()),
        (json!([]), Value::Null, json!(0), Value::Null)
    );
});

both!(page_limit_defaults_to_10_and_is_at_most_100, |app| async move {
    let bodies = (0..12).map(|i| circle(offset(HOME.0, HOME.1, i as f64 * 150.0, 0.0), 50)).collect();
    let ids: Vec<String> = create_many(&app, bodies).await.into_iter().map(|g| g.id).collect();
    let base = at(HOME, 2000);
    let res = search(&app, &base).await;
    let d = &res["data"];
    assert_eq!(ids_of(&res, "id"), ids[..10], "nearest first: the fences are strung eastwards");
    assert_eq!((d["next_page"].clone(), d["pages"].clone(), d["prev_page"].clone()), (json!(2), json!(2), Value::Null));
    let res = search(&app, &format!("{base}&page_number=2")).await;
    assert_eq!(ids_of(&res, "id"), ids[10..]);
    assert_eq!((res["data"]["next_page"].clone(), res["data"]["prev_page"].clone()), (Value::Null, json!(1)));
    let mut paged = Vec::new();
    for n in 1..=3 {
        let res = search(&app, &format!("{base}&page_limit=5&page_number={n}")).await;
        assert_eq!(res["data"]["pages"], 3);
        paged.extend(ids_of(&res, "id"));
    }
    assert_eq!(paged, ids);
    assert!(ids_of(&search(&app, &format!("{base}&page_limit=5&page_number=4")).await, "id").is_empty());
    assert_eq!(ids_of(&search(&app, &format!("{base}&page_limit=100")).await, "id"), ids);
    assert_eq!(ids_of(&search(&app, &format!("{base}&page_limit=1&page_number=12")).await, "id"), [ids[11].clone()]);
    for bad in ["101", "0", "-1", "ten", "2.5"] {
        let (status, res) = app.get(&format!("{base}&page_limit={bad}")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "page_limit");
    }
    let (status, res) = app.get(&format!("{base}&page_number=0")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "page_number");
});

both!(location_and_radius_are_validated, |app| async move {
    fence(&app, circle(HOME, 100)).await;
    let loc = format!("{},{}", HOME.1, HOME.0);
    for bad in
        ["abc", "12.97", "12.97,", ",77.59", "12.97;77.59", "91,77.59", "-90.5,0", "12.97,181", "12.97,-180.5", "NaN,1"]
    {
        let (status, res) = app.get(&format!("/v1/api/search/geofences/?location={bad}&radius=100")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "location");
    }
    let (status, res) = app.get("/v1/api/search/geofences/?radius=100").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "location");
    for bad in ["0", "-5", "10000.5", "10001", "abc", "inf", "NaN"] {
        let (status, res) = app.get(&format!("/v1/api/search/geofences/?location={loc}&radius={bad}")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "radius");
    }
    // Without a radius: 1000 m, as Roam's nearby search defaults (a fence 1.5 km off is left out).
    fence(&app, circle(crate::trace::offset(HOME.0, HOME.1, 1500.0, 0.0), 100)).await;
    let res = search(&app, &format!("/v1/api/search/geofences/?location={loc}")).await;
    assert_eq!(ids_of(&res, "id").len(), 1, "{res}");
    // Up to 10,000 m (Roam's own example searches 10,000), fractions allowed.
    let res = search(&app, &format!("/v1/api/search/geofences/?location={loc}&radius=10000")).await;
    assert_eq!(ids_of(&res, "id").len(), 2, "{res}");
    for ok in ["0.5", "1e3", "250.25"] {
        let res = search(&app, &format!("/v1/api/search/geofences/?location={loc}&radius={ok}")).await;
        assert_eq!(ids_of(&res, "id").len(), 1, "{ok}");
    }
    // Circles the index cannot cover.
    for (p, r) in [((179.99, 0.0), 5000), ((0.0, 84.99), 5000), ((-179.999, 10.0), 500)] {
        let (status, res) = app.get(&at(p, r)).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "radius");
    }
    // Missing key: 401.
    let (status, _) = app.call("GET", &at(HOME, 100), Key::None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
});

both!(user_id_searches_from_the_users_latest_location, |app| async move {
    let near_new = fence(&app, circle(offset(HOME.0, HOME.1, 2000.0, 0.0), 100)).await;
    let near_old = fence(&app, circle(HOME, 100)).await;
    let u = app.create_user(json!({})).await;
    let uri = format!("/v1/api/search/geofences/?user_id={u}&radius=500");
    let (status, res) = app.get(&uri).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "user_id");
    let newest = offset(HOME.0, HOME.1, 2000.0, 0.0);
    // The newer fix is sent first: the latest by recorded_at counts, not the last sent.
    let locations = json!([
        {"coordinates": [newest.0, newest.1], "recorded_at": "2024-05-01T10:05:00.000"},
        {"coordinates": [HOME.0, HOME.1], "recorded_at": "2024-05-01T10:00:00.000"},
    ]);
    let (status, res) = app.post("/v1/api/location/", &json!({"user_id": u, "locations": locations})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let res = search(&app, &uri).await;
    assert_eq!(ids_of(&res, "id"), std::slice::from_ref(&near_new));
    assert_eq!(search(&app, &uri).await["data"], search(&app, &at(newest, 500)).await["data"]);
    assert!(!ids_of(&search(&app, &format!("{uri}&page_limit=100")).await, "id").contains(&near_old));
    let (status, res) = app.get("/v1/api/search/geofences/?user_id=0123456789abcdef01234567&radius=500").await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = app.get("/v1/api/search/geofences/?user_id=nope&radius=500").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "user_id");
    let (status, res) = app.get(&format!("{uri}&location={},{}", HOME.1, HOME.0)).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "location");
    // Another project's user is unknown here.
    let other = app.other_project().await;
    let (status, res) = app.call("GET", &uri, Key::Raw(&other.api_key), None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
});

/// The property test's region: a 40 km square around this point.
const REGION: (f64, f64) = (77.55, 12.95);
const HALF_SIDE_M: f64 = 20_000.0;

/// A random fence body inside the region: 70% circles of 50..=1000 m, 30% star-shaped polygons
/// of 3 to 8 vertices 40..600 m from their centre (angles spread so that each gap is under π,
/// so the ring is simple and holds its centre); one polygon in ten of those reaches 1000..1800 m
/// instead, larger than a fine index cell and across coarse cells' edges.
fn random_fence(rng: &mut Rng) -> Value {
    let c = offset(
        REGION.0,
        REGION.1,
        (rng.uniform() * 2.0 - 1.0) * HALF_SIDE_M,
        (rng.uniform() * 2.0 - 1.0) * HALF_SIDE_M,
    );
    if rng.uniform() < 0.7 {
        circle(c, 50 + (rng.uniform() * 951.0) as u32)
    } else {
        let k = 3 + (rng.uniform() * 6.0) as usize;
        let big = rng.uniform() < 0.1;
        let base = rng.uniform() * std::f64::consts::TAU;
        let ring: Vec<(f64, f64)> = (0..k)
            .map(|j| {
                let a = base + std::f64::consts::TAU * (j as f64 + 0.4 * rng.uniform()) / k as f64;
                let r = if big { 1000.0 + rng.uniform() * 800.0 } else { 40.0 + rng.uniform() * 560.0 };
                offset(c.0, c.1, r * a.cos(), r * a.sin())
            })
            .collect();
        polygon(&ring)
    }
}

/// The brute force: every fence's distance by the same exact rule, kept when ≤ radius, ordered
/// by (distance, id).
pub fn brute_force(fences: &[Geofence], p: LngLat, radius: f64) -> Vec<(String, f64)> {
    let mut hits: Vec<(String, f64)> = fences
        .iter()
        .filter_map(|g| {
            let d = match (g.radius_m, &g.ring) {
                (Some(r), None) => (g.center.distance_m(p) - f64::from(r)).max(0.0),
                _ => g.shape().distance_m(p),
            };
            (d <= radius).then(|| (g.id.clone(), d))
        })
        .collect();
    hits.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    hits
}

/// On a mismatch, why: for each fence only one side has, its distance, whether the stored copy
/// equals the created one, and whether its index cells meet the query's cells.
async fn explain(
    app: &TestApp,
    fences: &[Geofence],
    got: &[(String, f64)],
    expected: &[(String, f64)],
    p: LngLat,
    r: f64,
) {
    let query_cells = index::search_cells(p, r).expect("query cells");
    let got_ids: Vec<&String> = got.iter().map(|(id, _)| id).collect();
    let exp_ids: Vec<&String> = expected.iter().map(|(id, _)| id).collect();
    for g in fences {
        let (in_got, in_exp) = (got_ids.contains(&&g.id), exp_ids.contains(&&g.id));
        if in_got == in_exp {
            continue;
        }
        let stored = geofences::get(app.state.store.as_ref(), &project(app), &g.id).await.expect("stored");
        let shared_cells: Vec<&String> = g.cells.iter().filter(|c| query_cells.contains(c)).collect();
        eprintln!(
            "fence {} (search: {in_got}, brute force: {in_exp}): {:?} radius {:?}, distance {:?} (shape rule {:?}), \
             stored copy equal: {}, its cells {:?}, shared with the query's {} cells: {shared_cells:?}, cell of query {:?}",
            g.id,
            g.center,
            g.radius_m,
            g.radius_m.map(|rm| g.center.distance_m(p) - f64::from(rm)),
            g.shape().distance_m(p),
            stored == *g,
            g.cells,
            query_cells.len(),
            index::cell_of(p),
        );
    }
}

/// Random fences over the region, random queries (uniform over a slightly larger square, and
/// queries whose radius ends exactly at a random circle's edge): the endpoint returns exactly
/// the brute force's ids in its order, with its distances.
async fn search_matches_brute_force(app: TestApp, n_fences: usize, n_queries: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let bodies: Vec<Value> = (0..n_fences).map(|_| random_fence(&mut rng)).collect();
    let t0 = Instant::now();
    let fences = create_many(&app, bodies).await;
    let created = t0.elapsed();
    let circles: Vec<&Geofence> = fences.iter().filter(|g| g.radius_m.is_some()).collect();
    let (mut total_hits, mut edge_hits) = (0, 0);
    let mut brute_time = std::time::Duration::ZERO;
    let t1 = Instant::now();
    for q in 0..n_queries {
        let (p, radius) = if q % 3 == 2 {
            // At a circle's edge: the radius is the exact rule's distance to it, so it must be in.
            let g = circles[(rng.uniform() * circles.len() as f64) as usize];
            let r = f64::from(g.radius_m.unwrap());
            let a = rng.uniform() * std::f64::consts::TAU;
            let reach = r + 1.0 + rng.uniform() * 4990.0;
            let (lng, lat) = offset(g.center.lng, g.center.lat, reach * a.cos(), reach * a.sin());
            let p = LngLat { lng, lat };
            let radius = g.center.distance_m(p) - r;
            assert!(radius > 0.0 && radius <= 5000.0, "{radius}");
            edge_hits += 1;
            (p, radius)
        } else {
            let s = HALF_SIDE_M + 2000.0;
            let (lng, lat) =
                offset(REGION.0, REGION.1, (rng.uniform() * 2.0 - 1.0) * s, (rng.uniform() * 2.0 - 1.0) * s);
            // Radii from a few cells to the largest allowed.
            let radius = match q % 3 {
                0 => [1000.0, 2000.0, 5000.0, 10_000.0][(q / 3) % 4],
                _ => (rng.uniform() * 10_000.0).max(1.0),
            };
            (LngLat { lng, lat }, radius)
        };
        let tb = Instant::now();
        let expected = brute_force(&fences, p, radius);
        brute_time += tb.elapsed();
        let got = search_all(&app, &at((p.lng, p.lat), radius)).await;
        let ids = |v: &[(String, f64)]| v.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>();
        if ids(&got) != ids(&expected) {
            explain(&app, &fences, &got, &expected, p, radius).await;
        }
        assert_eq!(ids(&got), ids(&expected), "query {q}: at {p:?} radius {radius}");
        for ((id, d), (_, e)) in got.iter().zip(&expected) {
            assert!((d - e).abs() <= 0.005 + 1e-6, "query {q}: {id} distance {d} vs {e}");
        }
        total_hits += expected.len();
    }
    assert!(total_hits > n_queries * 5, "the queries should find fences: {total_hits} hits");
    assert!(edge_hits > 0);
    eprintln!(
        "search property: {n_fences} fences created in {created:?}; {n_queries} queries ({edge_hits} at an edge, \
         {total_hits} hits) in {:?}, of which the brute force {brute_time:?}",
        t1.elapsed()
    );
}

/// 5,000 fences and 75 queries on the embedded store (about 18 s in a debug build); on DynamoDB
/// Local 1,000 fences and 18 queries: creating 5,000 fences there (each a transaction of up to 16
/// items) takes about 45 s alone, and each query reads every index cell of its circle (up to
/// ~150 Query calls per page), so the suite would leave its one-minute budget.
mod search_matches_brute_force_over_random_fences {
    use super::*;

    #[tokio::test]
    async fn embedded() {
        search_matches_brute_force(TestApp::new(Backend::Embedded).await, 5000, 75, 0x5EA4C4).await;
    }

    #[tokio::test]
    async fn dynamodb() {
        search_matches_brute_force(TestApp::new(Backend::DynamoDb).await, 1000, 18, 0xD1A40).await;
    }
}

#[test]
fn random_fences_are_valid_shapes() {
    let mut rng = Rng::new(3);
    for _ in 0..2000 {
        let b = random_fence(&mut rng);
        if b["geometry_type"] == "polygon" {
            shared::domain::geofences::parse_ring(&b["coordinates"]).expect("a simple ring");
        }
    }
}
